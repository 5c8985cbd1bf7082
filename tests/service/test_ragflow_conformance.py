"""Details RAGFlow clients rely on, over real HTTP against a live kbgraph-web (real Redis, a real Celery
worker in threads, the scripted OpenAI-compatible LLM): how list flags read, which messages and codes
come back, what a trailing slash means, how strings are read as numbers, which models a chat may name.

The server, worker and keys are test_ragflow_sdk's fixtures; the LLM here lists one more chat model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from ragflow_sdk import RAGFlow

from service.test_ragflow_sdk import (  # noqa: F401  (fixtures)
    ChatScript, celery_app, chat_script, host, keys, parsed, rag, settings,
)
from support.scripted_llm import MODEL, ScriptedLLM

pytestmark = pytest.mark.services

OTHER_MODEL = "scripted-large"


@pytest.fixture(scope="module")
def llm(chat_script: ChatScript) -> Iterator[ScriptedLLM]:  # noqa: F811
    with ScriptedLLM(responder=chat_script, extra_models=[OTHER_MODEL]) as server:
        yield server


def call(host: str, key: str, method: str, path: str, **kwargs: Any) -> dict[str, Any]:  # noqa: F811
    response = requests.request(method, f"{host}/api/v1{path}", headers={"Authorization": f"Bearer {key}"},
                                timeout=60, **kwargs)
    assert response.status_code == 200, response.text
    return response.json()


def test_list_flags_read_like_booleans(host: str, keys: dict[str, str], rag: RAGFlow) -> None:  # noqa: F811
    first, second = rag.create_dataset("flag first"), rag.create_dataset("flag second")
    try:
        for word in ("0", "no", "n", "false", "off"):
            body = call(host, keys["alice"], "GET", "/datasets", params={"desc": word, "page_size": 100})
            names = [d["name"] for d in body["data"]]
            assert names.index("flag first") < names.index("flag second"), word
        for word in ("1", "yes", "y", "true", ""):
            body = call(host, keys["alice"], "GET", "/datasets", params={"desc": word, "page_size": 100})
            names = [d["name"] for d in body["data"]]
            assert names.index("flag second") < names.index("flag first"), word
        refused = call(host, keys["alice"], "GET", "/datasets", params={"desc": "sometimes"})
        assert refused["code"] == 101
        assert "Input should be a valid boolean, unable to interpret input" in refused["message"]
    finally:
        rag.delete_datasets(ids=[first.id, second.id])


def test_graph_method_message_names_ragflows_methods_and_nlp(host: str, keys: dict[str, str]) -> None:  # noqa: F811
    body = call(host, keys["alice"], "POST", "/datasets",
                json={"name": "bad method", "parser_config": {"graphrag": {"method": "deep"}}})
    assert body["code"] == 101
    assert "Input should be 'light' or 'general'" in body["message"] and "'nlp'" in body["message"]


def test_deleting_named_datasets_leaves_the_others(host: str, keys: dict[str, str], rag: RAGFlow) -> None:  # noqa: F811
    kept, gone = rag.create_dataset("kept one"), rag.create_dataset("gone one")
    try:
        assert call(host, keys["alice"], "DELETE", "/datasets", json={"ids": [gone.id]}) == {"code": 0}
        ids = [d.id for d in rag.list_datasets(page_size=1000)]
        assert kept.id in ids and gone.id not in ids
        again = call(host, keys["alice"], "DELETE", "/datasets", json={"ids": [gone.id, kept.id]})
        assert again["code"] == 108 and gone.id in again["message"]  # all or nothing: kept stays
        assert kept.id in [d.id for d in rag.list_datasets(page_size=1000)]
    finally:
        rag.delete_datasets(ids=[kept.id])


def test_a_repeated_dataset_name_gets_the_next_number(rag: RAGFlow) -> None:  # noqa: F811
    made = [rag.create_dataset("twin") for _ in range(3)]
    try:
        assert [d.name for d in made] == ["twin", "twin(1)", "twin(2)"]
    finally:
        rag.delete_datasets(ids=[d.id for d in made])


def test_document_listing_by_id_and_another_documents_name_is_empty(host: str, keys: dict[str, str],  # noqa: F811
                                                                    rag: RAGFlow) -> None:
    dataset = rag.create_dataset("id and name")
    try:
        one, two = dataset.upload_documents([{"display_name": "one.txt", "blob": b"first"},
                                             {"display_name": "two.txt", "blob": b"second"}])
        path = f"/datasets/{dataset.id}/documents"
        both = call(host, keys["alice"], "GET", path, params={"id": one.id, "name": "two.txt"})
        assert both["code"] == 0 and both["data"]["docs"] == []
        same = call(host, keys["alice"], "GET", path, params={"id": one.id, "name": "one.txt"})
        assert [d["id"] for d in same["data"]["docs"]] == [one.id]
        unknown = call(host, keys["alice"], "GET", path, params={"id": one.id, "name": "three.txt"})
        assert unknown == {"code": 102, "message": "You don't own the document three.txt."}
    finally:
        rag.delete_datasets(ids=[dataset.id])


def test_an_empty_last_id_is_a_method_not_allowed(host: str, keys: dict[str, str], rag: RAGFlow) -> None:  # noqa: F811
    dataset = rag.create_dataset("trailing slash")
    chat = rag.create_chat("trailing slash chat")
    try:
        doc = dataset.upload_documents([{"display_name": "a.txt", "blob": b"alpha"}])[0]
        for path in (f"/datasets/{dataset.id}/documents/", f"/datasets/{dataset.id}/documents/{doc.id}/chunks/",
                     f"/chats/{chat.id}/sessions/"):
            answer = requests.put(f"{host}/api/v1{path}", headers={"Authorization": f"Bearer {keys['alice']}"},
                                  json={"name": "x"}, timeout=60)
            body = answer.json()
            assert answer.status_code == 405 and body["code"] == 100 and body["message"].startswith("Method Not Allowed: PUT is not served at "), path
        missing = requests.put(f"{host}/api/v1/no/such/route/", headers={"Authorization": f"Bearer {keys['alice']}"},
                               json={}, timeout=60)
        assert missing.status_code == 404
        assert missing.json() == {"code": 404, "message": "Not found: the API has no /api/v1/no/such/route/", "data": None}
    finally:
        rag.delete_chats(ids=[chat.id])
        rag.delete_datasets(ids=[dataset.id])


def test_renaming_a_session_of_a_deleted_chat(host: str, keys: dict[str, str], rag: RAGFlow) -> None:  # noqa: F811
    chat = rag.create_chat("soon deleted")
    session = chat.create_session()
    path = f"/chats/{chat.id}/sessions/{session.id}"
    assert call(host, keys["alice"], "PUT", path, json={"name": "renamed"}) == {"code": 0}
    rag.delete_chats(ids=[chat.id])
    assert call(host, keys["alice"], "PUT", path, json={"name": "again"}) == {
        "code": 102, "message": "You do not own the session"}
    unknown = call(host, keys["alice"], "PUT", f"/chats/{chat.id}/sessions/nosuchsession", json={"name": "x"})
    assert unknown == {"code": 102, "message": "Session does not exist"}
    # another tenant learns nothing about it
    assert call(host, keys["mallory"], "PUT", path, json={"name": "x"})["message"] == "Session does not exist"


def test_retrieval_reads_numbers_sent_as_strings(host: str, keys: dict[str, str], rag: RAGFlow) -> None:  # noqa: F811
    dataset = rag.create_dataset("string numbers")
    try:
        doc = dataset.upload_documents([{"display_name": "a.txt", "blob": b"placeholder"}])[0]
        for i in range(3):
            doc.add_chunk(f"granite lanterns of Varrow, number {i}")
        base = {"question": "granite lanterns", "dataset_ids": [dataset.id]}
        first = call(host, keys["alice"], "POST", "/retrieval", json={**base, "page": "1", "page_size": "2"})
        assert first["code"] == 0 and len(first["data"]["chunks"]) == 2
        second = call(host, keys["alice"], "POST", "/retrieval", json={**base, "page": "2", "page_size": 2})
        assert second["code"] == 0 and len(second["data"]["chunks"]) == 1
        threshold = call(host, keys["alice"], "POST", "/retrieval", json={**base, "similarity_threshold": "0.0"})
        assert threshold["code"] == 0 and len(threshold["data"]["chunks"]) == 3
        for bad in ("a", "nan"):
            refused = call(host, keys["alice"], "POST", "/retrieval", json={**base, "similarity_threshold": bad})
            assert refused["code"] == 102 and "should be a number" in refused["message"], bad
    finally:
        rag.delete_datasets(ids=[dataset.id])


def test_a_file_name_word_finds_parsed_chunks_not_added_ones(rag: RAGFlow) -> None:  # noqa: F811
    dataset = rag.create_dataset("title words")
    try:
        doc = parsed(dataset, ["ashgrove_academy.txt"])[0]
        parsed_ids = {c.id for c in doc.list_chunks(page_size=100)}
        added = doc.add_chunk("a note about zephyrine quills")
        found = {c.id for c in doc.list_chunks(keywords="ashgrove", page_size=100)}
        assert parsed_ids <= found and added.id not in found
        assert [c.id for c in doc.list_chunks(keywords="zephyrine")] == [added.id]
        doc.update({"name": "wrenfield_records.txt"})  # a rename moves the parsed chunks' title words only
        renamed = {c.id for c in doc.list_chunks(keywords="wrenfield", page_size=100)}
        assert renamed == parsed_ids
    finally:
        rag.delete_datasets(ids=[dataset.id])


def test_a_chat_names_any_model_the_endpoint_serves(host: str, keys: dict[str, str], rag: RAGFlow,  # noqa: F811
                                                     llm: ScriptedLLM) -> None:
    chat = rag.create_chat("other model", llm=None)
    try:
        assert chat.llm.model_name == MODEL
        body = call(host, keys["alice"], "PUT", f"/chats/{chat.id}", json={"llm": {"model_name": f"{OTHER_MODEL}@OpenAI"}})
        assert body == {"code": 0}
        listed = call(host, keys["alice"], "GET", "/chats", params={"id": chat.id})["data"][0]
        assert listed["llm"]["model_name"] == f"{OTHER_MODEL}@OpenAI"
        llm.reset()
        session = chat.create_session()
        answer = list(session.ask("Who founded the guild?", stream=False))[-1]
        assert answer.content.startswith("Turn 1")
        asked = [r["body"] for r in llm.requests if r["kind"] in ("chat", "chat_stream")]
        assert asked and all(b["model"] == OTHER_MODEL for b in asked)  # the endpoint's name, no @factory
        refused = call(host, keys["alice"], "POST", "/chats", json={"name": "unknown model",
                                                                    "llm": {"model_name": "no-such-model"}})
        assert refused == {"code": 102, "message": "`model_name` no-such-model doesn't exist"}
    finally:
        rag.delete_chats(ids=[chat.id])
