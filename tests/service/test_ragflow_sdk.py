"""The real ragflow-sdk 0.22.1 and the real openai client against a live kbgraph-web: real Flask over
HTTP, real Redis, a real Celery worker (in-process threads), the embedded SQLite store, the hash
embedder, the `nlp` graph method and the scripted OpenAI-compatible LLM for chat answers.

Redis: KBGRAPH_TEST_REDIS_URL (default DB 11, as tests/conftest.py), keys under a per-run prefix, removed afterwards."""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from ragflow_sdk import RAGFlow
from ragflow_sdk.modules.chunk import ChunkUpdateError
from ragflow_sdk.modules.dataset import DataSet

from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from support.scripted_llm import ScriptedError, ScriptedLLM
from support.web_host import celery_worker, web_server
from task_executor.celery_app import KBCelery
from task_executor.tasks import refresh_pending_key
from conftest import REDIS_URL, scratch_redis_prefix


pytestmark = pytest.mark.services


class ChatScript:
    """Chat replies for the scripted LLM: cites the first two chunk markers of its system prompt and
    says which turn of the conversation it is (history reaches the model)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.failure: ScriptedError | None = None  # the answer (a streamed request) fails with this

    def __call__(self, body: dict[str, Any]) -> str | ScriptedError:
        self.requests.append(body)
        if body.get("stream") and self.failure is not None:
            return self.failure
        system = body["messages"][0]["content"]
        markers = re.findall(r"\[ID:(\d+)\]", system)
        turn = sum(1 for m in body["messages"] if m["role"] == "user")
        if not markers:
            return f"Turn {turn}: no excerpts to cite, answering from general knowledge."
        return (f"Turn {turn}: Mira Castell founded the Lumen Cartographers Guild [ID:{markers[0]}]. "
                f"Its emblem is a silver heron [ID:{markers[-1]}].")


@pytest.fixture(scope="module")
def chat_script() -> ChatScript:
    return ChatScript()


@pytest.fixture(scope="module")
def llm(chat_script: ChatScript) -> Iterator[ScriptedLLM]:
    with ScriptedLLM(responder=chat_script, stream_piece_chars=6) as server:
        yield server


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM) -> Iterator[Settings]:
    with scratch_redis_prefix() as prefix:
        base = load_settings(data_dir=tmp_path_factory.mktemp("sdk") / "data", store="sqlite",
                             embedding_provider="hash", embedding_dim=64, redis_url=REDIS_URL, redis_prefix=prefix)
        yield llm.settings(base, embedding_provider="hash", embedding_model="")


@pytest.fixture(scope="module")
def celery_app(settings: Settings) -> Iterator[KBCelery]:
    with celery_worker(settings, refresh_delay=0.2) as app:
        yield app


@pytest.fixture(scope="module")
def host(settings: Settings, celery_app: KBCelery) -> Iterator[str]:
    with web_server(settings, celery_app) as url:
        yield url


@pytest.fixture(scope="module")
def keys(host: str, settings: Settings) -> dict[str, str]:
    from kbgraph.meta import MetaDB

    with MetaDB.open(settings.meta_url) as meta:
        out = {}
        for tenant in ("alice", "mallory"):
            meta.ensure_tenant(tenant)
            out[tenant] = meta.create_api_key(tenant)[1]
        return out


@pytest.fixture(scope="module")
def rag(host: str, keys: dict[str, str]) -> RAGFlow:
    return RAGFlow(keys["alice"], host)


def wait_for(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def sample(*names: str) -> list[dict[str, Any]]:
    return [{"display_name": n, "blob": (SAMPLE_CORPUS_DIR / n).read_bytes()} for n in names]


def parsed(dataset: DataSet, names: list[str]) -> list[Any]:
    docs = dataset.upload_documents(sample(*names))
    ids = [d.id for d in docs]
    dataset.async_parse_documents(ids)
    wait_for(lambda: all(d.run in ("DONE", "FAIL") for d in dataset.list_documents(page_size=100) if d.id in ids),
             what="parsing")
    done = [d for d in dataset.list_documents(page_size=100) if d.id in ids]
    assert all(d.run == "DONE" for d in done), [(d.name, d.progress_msg) for d in done]
    return done


def graph_of(host: str, key: str, dataset_id: str) -> dict[str, Any]:
    body = requests.get(f"{host}/api/v1/datasets/{dataset_id}/knowledge_graph",
                        headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
    assert body["code"] == 0, body
    return body["data"]["graph"]


def mentions_of(settings: Settings, tenant: str, kb_id: str, chunk_id: str) -> list[dict[str, Any]]:
    from kbgraph.store import open_store
    from kbgraph.store.base import eq

    store = open_store(settings)
    try:
        return list(store.scan(tenant, [kb_id], [eq("chunk_id_kwd", chunk_id)]))
    finally:
        store.close()


@pytest.fixture(scope="module")
def lore(rag: RAGFlow) -> tuple[DataSet, list[Any]]:
    """A dataset with the graph on (`nlp`, no LLM) and two parsed documents."""
    config = DataSet.ParserConfig(rag, {"chunk_token_num": 128,
                                        "graphrag": {"use_graphrag": True, "method": "nlp"}})
    dataset = rag.create_dataset("Varrow lore", parser_config=config)
    docs = parsed(dataset, ["mira_castell.md", "lumen_cartographers_guild.md"])
    return dataset, docs


# -- datasets and documents ---------------------------------------------------------------------

def test_datasets_through_the_sdk(rag: RAGFlow) -> None:
    dataset = rag.create_dataset("sdk datasets")
    assert dataset.chunk_method == "naive" and dataset.document_count == 0
    assert rag.get_dataset("sdk datasets").id == dataset.id
    assert dataset.id in [d.id for d in rag.list_datasets(page_size=100)]
    dataset.update({"description": "renamed one", "name": "sdk datasets 2"})
    assert dataset.name == "sdk datasets 2"
    assert rag.list_datasets(id=dataset.id)[0].description == "renamed one"
    rag.delete_datasets(ids=[dataset.id])
    with pytest.raises(Exception, match="lacks permission"):
        rag.list_datasets(id=dataset.id)


def test_documents_through_the_sdk(rag: RAGFlow) -> None:
    dataset = rag.create_dataset("sdk documents")
    doc = dataset.upload_documents([{"display_name": "notes.txt", "blob": b"Quartz lanterns glow at night."}])[0]
    assert doc.run == "UNSTART" and doc.size == 30
    assert doc.download() == b"Quartz lanterns glow at night."
    doc.update({"name": "renamed.txt", "meta_fields": {"author": "ann"}})
    assert doc.name == "renamed.txt" and doc.meta_fields.author == "ann"
    with pytest.raises(Exception, match="The extension of file can't be changed"):
        doc.update({"name": "renamed.pdf"})
    with pytest.raises(Exception, match="Can't change `chunk_count`."):
        doc.update({"chunk_count": 9})
    with pytest.raises(Exception, match="meta_fields must be a dictionary"):
        doc.update({"meta_fields": "x"})
    doc.update({"chunk_method": "manual", "parser_config": {"chunk_token_num": 128}})
    assert doc.chunk_method == "manual" and doc.parser_config.chunk_token_num == 128 and doc.run == "UNSTART"
    listed = dataset.list_documents(id=doc.id)[0]
    assert listed.name == "renamed.txt" and listed.chunk_method == "manual"
    results = dataset.parse_documents([doc.id])
    assert results[0][1] == "DONE" and results[0][2] >= 1
    with pytest.raises(Exception, match="Can't stop parsing document with progress at 0 or 1"):
        dataset.async_cancel_parse_documents([doc.id])
    assert [d.id for d in dataset.list_documents(keywords="RENAMED")] == [doc.id]
    assert [d.id for d in dataset.list_documents(name="renamed.txt")] == [doc.id]
    doc.update({"enabled": 0})
    assert doc.status == "0" and doc.list_chunks()  # still listed,
    assert rag.retrieve(dataset_ids=[dataset.id], question="Quartz lanterns") == []  # never retrieved
    doc.update({"enabled": 1})
    assert [c.document_id for c in rag.retrieve(dataset_ids=[dataset.id], question="Quartz lanterns")] == [doc.id]
    dataset.delete_documents(ids=[doc.id])
    assert dataset.list_documents() == []
    rag.delete_datasets(ids=[dataset.id])


def test_a_documents_own_chunk_size_is_used_when_it_is_parsed(rag: RAGFlow) -> None:
    dataset = rag.create_dataset("sdk chunk size")
    text = " ".join(f"Sentence {i} tells of the lantern makers of Varrow and their guild." for i in range(150))
    doc = dataset.upload_documents([{"display_name": "long.txt", "blob": text.encode()}])[0]
    default = dataset.parse_documents([doc.id])[0][2]
    doc.update({"parser_config": {"chunk_token_num": 64}})
    assert doc.parser_config.chunk_token_num == 64 and not hasattr(doc.parser_config, "raptor")
    smaller = dataset.parse_documents([doc.id])[0][2]
    assert smaller > 2 * default >= 2
    rag.delete_datasets(ids=[dataset.id])


def test_document_update_resets_a_parsed_document(rag: RAGFlow) -> None:
    dataset = rag.create_dataset("sdk reset")
    doc = parsed(dataset, ["tobias_wren.txt"])[0]
    assert doc.chunk_count > 0 and doc.list_chunks()
    doc.update({"chunk_method": "one"})
    assert doc.run == "UNSTART" and doc.chunk_count == 0 and doc.progress == 0
    assert doc.progress_msg == "The chunk method changed to one: parse the document again."
    assert doc.list_chunks() == []
    rag.delete_datasets(ids=[dataset.id])


# -- chunks -------------------------------------------------------------------------------------

def test_chunks_list_add_update_delete(rag: RAGFlow, host: str, keys: dict[str, str], settings: Settings) -> None:
    dataset = rag.create_dataset("sdk chunks")
    doc = parsed(dataset, ["ashgrove_academy.txt"])[0]
    parsed_chunks = doc.list_chunks(page_size=100)
    assert len(parsed_chunks) == doc.chunk_count >= 1

    added = [doc.add_chunk(f"chunk test {i}", important_keywords=[f"kw{i}"], questions=[f" q{i}? ", ""])
             for i in range(4)]
    assert added[1].content == "chunk test 1" and added[1].important_keywords == ["kw1"]
    assert added[1].questions == ["q1?"] and added[1].dataset_id == dataset.id and added[1].document_id == doc.id
    assert re.fullmatch(r"[0-9a-f]{16}", added[0].id)
    again = doc.add_chunk("chunk test 0")  # same content, same document: the same chunk
    assert again.id == added[0].id
    listed = doc.list_chunks(page_size=100)
    assert len(listed) == len(parsed_chunks) + 4
    assert [c.id for c in listed[:len(parsed_chunks)]] == [c.id for c in parsed_chunks]  # parsed first
    assert len(doc.list_chunks(keywords="chunk")) == 4
    assert [c.id for c in doc.list_chunks(keywords="kw2")] == [added[2].id]  # keywords are searched
    assert [c.id for c in doc.list_chunks(keywords="q3")] == [added[3].id]  # and questions
    assert len(doc.list_chunks(keywords="ashgrove")) >= len(parsed_chunks)  # title tokens of the file name
    assert doc.list_chunks(keywords="zebraquantum") == []
    assert [c.id for c in doc.list_chunks(id=added[1].id)] == [added[1].id]
    assert len(doc.list_chunks(page=2, page_size=2)) == 2

    # searchable at once
    found = rag.retrieve(dataset_ids=[dataset.id], question="chunk test")
    assert {c.id for c in found} >= {c.id for c in added}
    assert added[1].id in {c.id for c in rag.retrieve(dataset_ids=[dataset.id], question="q1")}  # by its question

    added[2].update({"content": "lantern makers of varrow", "important_keywords": ["glass"], "questions": ["who?"]})
    assert [c.content for c in doc.list_chunks(id=added[2].id)] == ["lantern makers of varrow"]
    assert [c.id for c in doc.list_chunks(keywords="glass")] == [added[2].id]
    added[3].update({"available": False})
    assert doc.list_chunks(id=added[3].id)[0].available is False
    hidden = rag.retrieve(dataset_ids=[dataset.id], question="chunk test 3")
    assert added[3].id not in {c.id for c in hidden}
    with pytest.raises(ChunkUpdateError, match="`important_keywords` should be a list"):
        added[0].update({"important_keywords": "x"})
    headers = {"Authorization": f"Bearer {keys['alice']}"}

    def put(ds: str, chunk: str, body: dict[str, Any]) -> dict[str, Any]:
        return requests.put(f"{host}/api/v1/datasets/{ds}/documents/{doc.id}/chunks/{chunk}", json=body,
                            headers=headers, timeout=30).json()

    assert put("nosuchds", added[0].id, {"content": "x"}) == {"code": 102, "message": "You don't own the dataset nosuchds."}
    assert put(dataset.id, "nosuchchunk", {}) == {"code": 102, "message": "Can't find this chunk nosuchchunk"}
    assert put(dataset.id, added[0].id, {"content": None})["message"] == "TypeError('expected string or bytes-like object')"
    assert put(dataset.id, added[0].id, {"questions": [1]}) == {
        "code": 100, "message": "TypeError('sequence item 0: expected str instance, int found')"}
    listed_page = requests.get(f"{host}/api/v1/datasets/{dataset.id}/documents/{doc.id}/chunks?id=nosuch",
                               headers=headers, timeout=30).json()
    assert listed_page == {"code": 404, "message": f"Chunk not found: {dataset.id}/nosuch"}

    with pytest.raises(Exception, match="rm_chunk deleted chunks 1, expect 2"):
        doc.delete_chunks(ids=[added[0].id, "nosuchchunk"])
    assert added[0].id not in {c.id for c in doc.list_chunks(page_size=100)}
    refreshed = dataset.list_documents(id=doc.id)[0]
    assert refreshed.chunk_count == len(parsed_chunks) + 3  # recounted after a delete
    doc.delete_chunks(ids=[])
    assert doc.list_chunks() == []
    assert dataset.list_documents(id=doc.id)[0].chunk_count == 0
    rag.delete_datasets(ids=[dataset.id])


def test_chunk_edits_reach_the_graph(rag: RAGFlow, lore: tuple[DataSet, list[Any]], host: str,
                                     keys: dict[str, str], settings: Settings, celery_app: KBCelery) -> None:
    dataset, docs = lore
    doc = docs[0]
    before = {n["id"] for n in graph_of(host, keys["alice"], dataset.id)["nodes"]}
    text = "Quillon Marrowby founded the Obsidian Ferry Consortium in Port Halvane."
    chunk = doc.add_chunk(text)
    mentions = mentions_of(settings, "alice", dataset.id, chunk.id)
    assert mentions and all(m["doc_id"] == doc.id for m in mentions)
    nodes = {n["id"]: n for n in graph_of(host, keys["alice"], dataset.id)["nodes"]}
    new = set(nodes) - before
    assert any("QUILLON" in n.upper() for n in new), new

    chunk.update({"content": "Perrin Oakhollow mapped the Saltmere Narrows."})
    after_update = {n["id"] for n in graph_of(host, keys["alice"], dataset.id)["nodes"]}
    assert not any("QUILLON" in n.upper() for n in after_update)
    assert any("PERRIN" in n.upper() for n in after_update)

    doc.delete_chunks(ids=[chunk.id])
    assert mentions_of(settings, "alice", dataset.id, chunk.id) == []
    after_delete = {n["id"] for n in graph_of(host, keys["alice"], dataset.id)["nodes"]}
    assert not any("PERRIN" in n.upper() for n in after_delete)
    assert after_delete == before
    key = refresh_pending_key(settings.redis_prefix, dataset.id)
    wait_for(lambda: not celery_app.redis.exists(key), what="the graph refresh the edits scheduled")


# -- chat assistants ------------------------------------------------------------------------------

def test_chat_assistants_through_the_sdk(rag: RAGFlow, lore: tuple[DataSet, list[Any]]) -> None:
    from ragflow_sdk.modules.chat import Chat

    dataset, _ = lore
    chat = rag.create_chat("sdk assistant", dataset_ids=[dataset.id])
    assert chat.name == "sdk assistant" and chat.dataset_ids == [dataset.id]
    assert chat.llm.model_name == "scripted" and chat.llm.temperature == 0.1
    assert chat.prompt.opener == "Hi! I'm your assistant. What can I do for you?"
    assert chat.prompt.keywords_similarity_weight == pytest.approx(1 - 0.7)  # RAGFlow reads it back as 1 - v
    assert chat.prompt.similarity_threshold == 0.2 and chat.prompt.top_n == 8

    prompt = Chat.Prompt(rag, {"similarity_threshold": 0.1, "top_n": 3, "empty_response": "Nothing here.",
                               "prompt": "Be terse.\n{knowledge}", "opener": "Ask away."})
    other = rag.create_chat("sdk assistant 2", dataset_ids=[dataset.id],
                            llm=Chat.LLM(rag, {"temperature": 0.5, "max_token": 99}), prompt=prompt)
    assert other.prompt.opener == "Ask away." and other.prompt.top_n == 3 and other.llm.max_token == 99
    with pytest.raises(Exception, match="Duplicated chat name in creating chat."):
        rag.create_chat("SDK ASSISTANT", dataset_ids=[dataset.id])
    with pytest.raises(Exception, match="You don't own the dataset nosuch"):
        rag.create_chat("x", dataset_ids=["nosuch"])
    empty = rag.create_dataset("sdk unparsed")
    with pytest.raises(Exception, match=f"The dataset {empty.id} doesn't own parsed file"):
        rag.create_chat("x", dataset_ids=[empty.id])
    with pytest.raises(Exception, match="`model_name` gpt-nine doesn't exist"):
        rag.create_chat("x", llm=Chat.LLM(rag, {"model_name": "gpt-nine"}))
    with pytest.raises(Exception, match="Parameter 'knowledge' is not used"):
        rag.create_chat("x", prompt=Chat.Prompt(rag, {"prompt": "no slot", "variables": [{"key": "knowledge",
                                                                                           "optional": False}]}))

    listed = {c.id: c for c in rag.list_chats()}
    assert {chat.id, other.id} <= set(listed)
    assert listed[chat.id].datasets[0]["id"] == dataset.id and listed[chat.id].datasets[0]["chunk_num"] > 0
    assert [c.id for c in rag.list_chats(name="sdk assistant 2")] == [other.id]
    with pytest.raises(Exception, match="The chat doesn't exist"):
        rag.list_chats(name="nobody")

    other.update({"name": "renamed assistant", "prompt": {"similarity_threshold": 0.3, "opener": "Hello"},
                  "llm": {"temperature": 0.2}})
    again = rag.list_chats(id=other.id)[0]
    assert again.name == "renamed assistant" and again.prompt.similarity_threshold == 0.3
    assert again.prompt.opener == "Hello" and again.prompt.top_n == 3 and again.llm.temperature == 0.2
    assert again.llm.max_token == 99 and again.datasets[0]["id"] == dataset.id
    with pytest.raises(Exception, match="Duplicated chat name in updating chat."):
        other.update({"name": "SDK assistant"})
    with pytest.raises(Exception, match="`name` cannot be empty."):
        other.update({"name": ""})
    with pytest.raises(Exception, match="ValueError"):
        other.update({"bogus": 1})

    rag.delete_chats(ids=[other.id])
    assert other.id not in {c.id for c in rag.list_chats()}
    with pytest.raises(Exception, match=r"Assistant\(nosuch\) not found."):
        rag.delete_chats(ids=["nosuch"])
    with pytest.raises(Exception, match="You do not own the chat"):
        other.update({"name": "ghost"})  # deleted: gone for good
    rag.delete_chats(ids=[chat.id])
    rag.delete_datasets(ids=[empty.id])


# -- sessions and completions ----------------------------------------------------------------------

def test_sessions_through_the_sdk(rag: RAGFlow, lore: tuple[DataSet, list[Any]]) -> None:
    dataset, _ = lore
    chat = rag.create_chat("session keeper", dataset_ids=[dataset.id])
    first = chat.create_session()
    assert first.name == "New session" and first.chat_id == chat.id
    assert first.messages == [{"role": "assistant", "content": "Hi! I'm your assistant. What can I do for you?"}]
    second = chat.create_session("named")
    assert {s.id for s in chat.list_sessions()} == {first.id, second.id}
    assert [s.id for s in chat.list_sessions(name="named")] == [second.id]
    assert chat.list_sessions(id="nosuch") == []
    second.update({"name": "renamed"})
    assert chat.list_sessions(id=second.id)[0].name == "renamed"
    with pytest.raises(Exception, match="`name` can not be empty."):
        second.update({"name": ""})
    with pytest.raises(Exception, match="`message` can not be change"):
        second.update({"messages": []})
    with pytest.raises(Exception, match="The chat doesn't own the session nosuch"):
        chat.delete_sessions(ids=["nosuch"])
    chat.delete_sessions(ids=[second.id])
    assert [s.id for s in chat.list_sessions()] == [first.id]
    chat.delete_sessions()
    assert chat.list_sessions() == []
    rag.delete_chats(ids=[chat.id])


def _chunk_ids(dataset: DataSet) -> dict[str, str]:
    return {c.id: d.id for d in dataset.list_documents() for c in d.list_chunks(page_size=100)}


def test_ask_streams_cumulative_answers_with_references(rag: RAGFlow, lore: tuple[DataSet, list[Any]],
                                                        chat_script: ChatScript) -> None:
    dataset, docs = lore
    chat = rag.create_chat("asker", dataset_ids=[dataset.id])
    session = chat.create_session()
    messages = list(session.ask("Who founded the Lumen Cartographers Guild?", stream=True))
    assert len(messages) > 3  # delta by delta, then the final message
    texts = [m.content for m in messages]
    for before, after in zip(texts[:-2], texts[1:-1]):
        assert after.startswith(before) and len(after) > len(before)  # each event adds a delta
    final = messages[-1]
    assert final.content.startswith("Turn 1: Mira Castell founded") and "[ID:" in final.content
    assert all(m.reference == [] for m in messages[:-1])
    references = final.reference
    known = _chunk_ids(dataset)
    assert references and all(r["id"] in known and r["document_id"] == known[r["id"]] for r in references)
    for marker in re.findall(r"\[ID:(\d+)\]", final.content):
        cited = references[int(marker)]
        assert cited["document_name"] in {d.name for d in docs} and cited["content"]
    # the graph came in front of the chunks: the model saw entities and relations
    system = chat_script.requests[-1]["messages"][0]["content"]
    assert "---- Entities ----" in system and "---- Chunks ----" in system

    reply = list(session.ask("And what is its emblem?", stream=False))
    assert len(reply) == 1 and reply[0].content.startswith("Turn 2:")  # the first turn was in the history
    roles = [m["role"] for m in chat_script.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    stored = chat.list_sessions(id=session.id)[0].messages
    assert [m["role"] for m in stored] == ["assistant", "user", "assistant", "user", "assistant"]
    assert stored[2]["content"] == final.content and stored[2]["reference"]
    assert stored[2]["reference"][0]["id"] == references[0]["id"]
    rag.delete_chats(ids=[chat.id])


def test_use_kg_off_and_plain_chat(rag: RAGFlow, lore: tuple[DataSet, list[Any]], chat_script: ChatScript) -> None:
    dataset, _ = lore
    naive = rag.create_chat("no graph", dataset_ids=[dataset.id])
    naive.update({"prompt": {"use_kg": False}, "dataset_ids": [dataset.id]})
    answer = list(naive.create_session().ask("Who founded the Lumen Cartographers Guild?"))[-1]
    system = chat_script.requests[-1]["messages"][0]["content"]
    assert "---- Entities ----" not in system and "---- Chunks ----" in system and answer.reference

    from ragflow_sdk.modules.chat import Chat

    styled = rag.create_chat("styled", dataset_ids=[dataset.id], prompt=Chat.Prompt(rag, {
        "prompt": "Answer as a {persona}.\n{knowledge}", "variables": [
            {"key": "knowledge", "optional": False}, {"key": "persona", "optional": True}]}))
    list(styled.create_session().ask("Who founded the guild?", persona="harbour pilot"))
    system = chat_script.requests[-1]["messages"][0]["content"]
    assert system.startswith("Answer as a harbour pilot.\n") and "---- Chunks ----" in system

    plain = rag.create_chat("plain", prompt=None)
    reply = list(plain.create_session().ask("hello there"))[-1]
    assert reply.content == "Turn 1: no excerpts to cite, answering from general knowledge."
    assert reply.reference is None  # no datasets: no reference at all
    rag.delete_chats(ids=[naive.id, plain.id, styled.id])


def test_retrieval_with_the_graph_goes_through_the_sdks_post(rag: RAGFlow, lore: tuple[DataSet, list[Any]]) -> None:
    """docs/api.md: ragflow-sdk's retrieve() cannot ask for the graph; its post() with use_kg can."""
    import inspect

    dataset, _ = lore
    assert "use_kg" not in inspect.signature(RAGFlow.retrieve).parameters
    api = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")
    assert "has no `use_kg` parameter" in api and 'rag.post("/retrieval"' in api
    plain = rag.retrieve(dataset_ids=[dataset.id], question="Who founded the guild?")
    assert plain and all(c.id for c in plain)
    found = rag.post("/retrieval", {"question": "Who founded the guild?", "dataset_ids": [dataset.id],
                                    "use_kg": True}).json()["data"]["chunks"]
    assert "Related content in Knowledge Graph" in json.dumps(found[0])
    assert len(found) > 1 and {c["id"] for c in found[1:]} & {c.id for c in plain}


def test_completion_wire_format(host: str, keys: dict[str, str], rag: RAGFlow, lore: tuple[DataSet, list[Any]]) -> None:
    dataset, _ = lore
    chat = rag.create_chat("wire", dataset_ids=[dataset.id])
    headers = {"Authorization": f"Bearer {keys['alice']}"}
    url = f"{host}/api/v1/chats/{chat.id}/completions"
    greeting = requests.post(url, json={"question": "ignored"}, headers=headers, timeout=30)
    assert greeting.headers["Content-Type"].startswith("text/event-stream")
    events = [json.loads(line[5:]) for line in greeting.text.split("\n\n") if line]
    assert events[0]["data"]["answer"] == "Hi! I'm your assistant. What can I do for you?"
    assert events[-1] == {"code": 0, "message": "", "data": True}
    session_id = events[0]["data"]["session_id"]
    assert greeting.text.startswith('data:{"code": 0')  # no space after "data:"

    body = requests.post(url, json={"question": "Who founded the guild?", "stream": False, "session_id": session_id},
                         headers=headers, timeout=30).json()
    data = body["data"]
    assert body["code"] == 0 and data["session_id"] == session_id and data["audio_binary"] is None
    assert set(data["reference"]) == {"total", "chunks", "doc_aggs"} and data["reference"]["total"] >= 1
    assert data["prompt"] and data["created_at"] > 0 and data["id"]
    assert sum(a["count"] for a in data["reference"]["doc_aggs"]) == data["reference"]["total"]
    unknown = requests.post(url, json={"question": "q", "session_id": "nosuch"}, headers=headers, timeout=30).json()
    assert unknown == {"code": 102, "message": "You don't own the session nosuch"}
    rag.delete_chats(ids=[chat.id])


# -- the OpenAI-compatible endpoint ------------------------------------------------------------------

def test_openai_client_gets_answers_with_references(host: str, keys: dict[str, str], rag: RAGFlow,
                                                    lore: tuple[DataSet, list[Any]], chat_script: ChatScript) -> None:
    from openai import OpenAI

    dataset, _ = lore
    chat = rag.create_chat("openai", dataset_ids=[dataset.id])
    client = OpenAI(api_key=keys["alice"], base_url=f"{host}/api/v1/chats_openai/{chat.id}", max_retries=0)
    conversation = [{"role": "system", "content": "ignored"},
                    {"role": "assistant", "content": "leading greeting, dropped"},
                    {"role": "user", "content": "Who founded the Lumen Cartographers Guild?"}]
    whole = client.chat.completions.create(model="model", messages=conversation, stream=False,
                                           extra_body={"reference": True})
    message = whole.choices[0].message
    assert whole.id == f"chatcmpl-{chat.id}" and whole.choices[0].finish_reason == "stop"
    assert message.content.startswith("Turn 1: Mira Castell founded") and "[ID:" in message.content
    known = _chunk_ids(dataset)
    references = message.model_extra["reference"]
    assert references and all(r["id"] in known for r in references)
    assert whole.usage.completion_tokens == len(message.content)
    roles = [m["role"] for m in chat_script.requests[-1]["messages"]]
    assert roles == ["system", "user"]  # the client's system and leading assistant messages are dropped

    follow_up = [*conversation[2:], {"role": "assistant", "content": message.content},
                 {"role": "user", "content": "And its emblem?"}]
    stream = client.chat.completions.create(model="model", messages=follow_up, stream=True,
                                            extra_body={"reference": True})
    chunks = list(stream)
    deltas = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert len(deltas) > 3 and "".join(deltas).startswith("Turn 2:")  # incremental, and the history arrived
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop" and last.choices[0].delta.content is None
    assert last.usage.completion_tokens == len(last.choices[0].delta.model_extra["final_content"])
    assert all(r["id"] in known for r in last.choices[0].delta.model_extra["reference"])
    assert [m["role"] for m in chat_script.requests[-1]["messages"]] == ["system", "user", "assistant", "user"]

    plain = client.chat.completions.create(model="model", messages=conversation[2:], stream=False)
    assert "reference" not in (plain.choices[0].message.model_extra or {})
    bad = requests.post(f"{host}/api/v1/chats_openai/{chat.id}/chat/completions", timeout=30,
                        headers={"Authorization": f"Bearer {keys['alice']}"},
                        json={"model": "m", "messages": [{"role": "assistant", "content": "hi"}]}).json()
    assert bad == {"code": 102, "message": "The last content of this conversation is not from user."}
    rag.delete_chats(ids=[chat.id])


# -- auth, missing features, tenants ------------------------------------------------------------------

def test_auth_comes_first_on_every_route(host: str) -> None:
    for method, path in [("GET", "/api/v1/datasets"), ("POST", "/api/v1/chats"), ("GET", "/api/v1/agents"),
                         ("POST", "/api/v1/no/such/route"), ("POST", "/api/v1/chats_openai/x/chat/completions")]:
        missing = requests.request(method, host + path, timeout=30).json()
        assert missing == {"code": 0, "message": "`Authorization` can't be empty", "data": False}, path
        wrong = requests.request(method, host + path, headers={"Authorization": "Bearer nope"}, timeout=30).json()
        assert wrong == {"code": 109, "message": "Authentication error: API key is invalid!", "data": False}, path


def test_missing_features_say_so(host: str, keys: dict[str, str], rag: RAGFlow) -> None:
    headers = {"Authorization": f"Bearer {keys['alice']}"}
    dataset_id = uuid.uuid1().hex
    for method, path, feature in [("GET", "/api/v1/agents", "Agents"), ("POST", "/api/v1/agents/x/sessions", "Agents"),
                                  ("POST", f"/api/v1/datasets/{dataset_id}/run_raptor", "RAPTOR"),
                                  ("GET", f"/api/v1/datasets/{dataset_id}/trace_raptor", "RAPTOR"),
                                  ("POST", "/api/v1/sessions/ask", "Chats without an assistant")]:
        response = requests.request(method, host + path, headers=headers, json={}, timeout=30)
        body = response.json()
        assert response.status_code == 200 and body["code"] == 102, (path, body)
        assert body["message"].startswith(f"Not available in kbgraph: {feature}"), body
    with pytest.raises(Exception, match="Not available in kbgraph: Agents"):
        rag.list_agents()


def _alice_state(rag: RAGFlow) -> Any:
    state = []
    for dataset in rag.list_datasets(page_size=100):
        for doc in dataset.list_documents(page_size=100):
            chunks = sorted((c.id, c.content, c.available) for c in doc.list_chunks(page_size=1000))
            state.append((dataset.id, dataset.name, doc.id, doc.name, doc.chunk_count, doc.run, chunks))
    for chat in rag.list_chats(page_size=100):
        sessions = sorted((s.id, s.name, len(s.messages)) for s in chat.list_sessions(page_size=100))
        state.append((chat.id, chat.name, sessions))
    return sorted(state, key=repr)


def test_another_tenants_ids_are_unknown_ids(host: str, keys: dict[str, str], rag: RAGFlow,
                                             lore: tuple[DataSet, list[Any]], settings: Settings) -> None:
    dataset, docs = lore
    chat = rag.create_chat("private", dataset_ids=[dataset.id])
    session = chat.create_session("private talk")
    real = {"ds": dataset.id, "doc": docs[0].id, "chunk": docs[0].list_chunks()[0].id, "chat": chat.id,
            "session": session.id}
    fake = {"ds": uuid.uuid1().hex, "doc": uuid.uuid1().hex, "chunk": uuid.uuid4().hex[:16], "chat": uuid.uuid1().hex,
            "session": uuid.uuid1().hex}
    routes: list[tuple[str, str, Any]] = [
        ("GET", "/datasets?id={ds}", None), ("PUT", "/datasets/{ds}", {"name": "stolen"}),
        ("DELETE", "/datasets", {"ids": ["{ds}"]}), ("GET", "/datasets/{ds}/knowledge_graph", None),
        ("DELETE", "/datasets/{ds}/knowledge_graph", None), ("POST", "/datasets/{ds}/run_graphrag", None),
        ("GET", "/datasets/{ds}/trace_graphrag", None), ("GET", "/datasets/{ds}/documents", None),
        ("GET", "/datasets/{ds}/documents/{doc}", None), ("PUT", "/datasets/{ds}/documents/{doc}", {"name": "x.md"}),
        ("PATCH", "/datasets/{ds}/documents/{doc}", {"enabled": 0}),
        ("DELETE", "/datasets/{ds}/documents", {"ids": ["{doc}"]}),
        ("POST", "/datasets/{ds}/chunks", {"document_ids": ["{doc}"]}),
        ("DELETE", "/datasets/{ds}/chunks", {"document_ids": ["{doc}"]}),
        ("GET", "/datasets/{ds}/documents/{doc}/chunks", None),
        ("POST", "/datasets/{ds}/documents/{doc}/chunks", {"content": "planted"}),
        ("PUT", "/datasets/{ds}/documents/{doc}/chunks/{chunk}", {"content": "defaced"}),
        ("DELETE", "/datasets/{ds}/documents/{doc}/chunks", {"chunk_ids": ["{chunk}"]}),
        ("DELETE", "/datasets/{ds}/documents/{doc}/chunks", {"chunk_ids": []}),
        ("POST", "/retrieval", {"question": "guild", "dataset_ids": ["{ds}"]}),
        ("GET", "/chats?id={chat}", None), ("PUT", "/chats/{chat}", {"name": "stolen"}),
        ("DELETE", "/chats", {"ids": ["{chat}"]}), ("POST", "/chats/{chat}/sessions", {"name": "spy"}),
        ("GET", "/chats/{chat}/sessions", None), ("PUT", "/chats/{chat}/sessions/{session}", {"name": "spy"}),
        ("DELETE", "/chats/{chat}/sessions", {"ids": ["{session}"]}),
        ("POST", "/chats/{chat}/completions", {"question": "q", "session_id": "{session}", "stream": False}),
        ("POST", "/chats/{chat}/completions", {"question": "q"}),
        ("POST", "/chats_openai/{chat}/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "q"}],
                                                           "stream": False}),
    ]
    before = _alice_state(rag)
    headers = {"Authorization": f"Bearer {keys['mallory']}"}

    def call(method: str, template: str, body: Any, ids: dict[str, str]) -> str:
        path = _fill(template, ids)
        payload = json.loads(_fill(json.dumps(body), ids)) if body is not None else None
        response = requests.request(method, f"{host}/api/v1{path}", headers=headers, json=payload, timeout=30)
        assert response.status_code == 200
        text = response.text
        for name, value in ids.items():
            text = text.replace(value, f"<{name}>")
        return text

    for method, template, body in routes:
        assert call(method, template, body, real) == call(method, template, body, fake), (method, template)
    upload = requests.post(f"{host}/api/v1/datasets/{dataset.id}/documents", headers=headers,
                           files=[("file", ("planted.txt", b"planted"))], timeout=30).json()
    assert upload["code"] == 100 and "Can't find the dataset" in upload["message"]
    assert _alice_state(rag) == before
    rag.delete_chats(ids=[chat.id])


def _fill(text: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        text = text.replace("{" + name + "}", value)
    return text


def test_chat_defaults_over_http(host: str, keys: dict[str, str], lore: tuple[DataSet, list[Any]]) -> None:
    dataset, _ = lore
    headers = {"Authorization": f"Bearer {keys['alice']}"}
    created = requests.post(f"{host}/api/v1/chats", headers=headers, timeout=30,
                            json={"name": "bare", "dataset_ids": [dataset.id]}).json()
    assert created["code"] == 0, created
    data = created["data"]
    assert data["llm"] == {"model_name": "scripted", "temperature": 0.1, "top_p": 0.3, "frequency_penalty": 0.7,
                           "presence_penalty": 0.4, "max_tokens": 512}
    prompt = data["prompt"]
    assert set(prompt) == {"prompt", "opener", "variables", "empty_response", "show_quote", "tts", "refine_multiturn",
                           "similarity_threshold", "keywords_similarity_weight", "top_n", "rerank_model"}
    assert prompt["variables"] == [{"key": "knowledge", "optional": False}] and "{knowledge}" in prompt["prompt"]
    assert prompt["empty_response"] == "Sorry! No relevant content was found in the knowledge base!"
    assert (prompt["similarity_threshold"], prompt["keywords_similarity_weight"], prompt["top_n"]) == (0.2, 0.7, 6)
    assert data["dataset_ids"] == [dataset.id] and data["description"] == "A helpful Assistant"
    listed = requests.get(f"{host}/api/v1/chats?id={data['id']}", headers=headers, timeout=30).json()["data"][0]
    assert "dataset_ids" not in listed and listed["top_k"] == 1024 and listed["datasets"][0]["id"] == dataset.id
    bad = requests.put(f"{host}/api/v1/chats/{data['id']}", headers=headers, json={"llm": {}}, timeout=30).json()
    assert bad["code"] == 100 and bad["message"].startswith("ValueError('Unrecognized field name: \"llm\"")
    requests.delete(f"{host}/api/v1/chats", headers=headers, json={"ids": [data["id"]]}, timeout=30)


def test_llm_failure_arrives_inside_the_stream(host: str, keys: dict[str, str], rag: RAGFlow, chat_script: ChatScript,
                                               lore: tuple[DataSet, list[Any]]) -> None:
    dataset, _ = lore
    chat = rag.create_chat("failing", dataset_ids=[dataset.id])
    session = chat.create_session()
    chat_script.failure = ScriptedError(400, "the model refuses")
    try:
        response = requests.post(f"{host}/api/v1/chats/{chat.id}/completions", timeout=30,
                                 headers={"Authorization": f"Bearer {keys['alice']}"},
                                 json={"question": "Who founded the guild?", "session_id": session.id})
    finally:
        chat_script.failure = None
    events = [json.loads(line[5:]) for line in response.text.split("\n\n") if line]
    failure = events[-2]
    assert failure["code"] == 500 and "the model refuses" in failure["message"]
    assert failure["data"]["answer"].startswith("**ERROR**: ")
    assert events[-1]["data"] is True
    assert len(chat.list_sessions(id=session.id)[0].messages) == 1  # the failed turn is not kept
    rag.delete_chats(ids=[chat.id])
