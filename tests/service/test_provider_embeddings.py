"""A dataset that embeds with a tenant's model provider, through the real ragflow-sdk against a live
kbgraph-web (real Flask over HTTP, real Redis, a real Celery worker in threads, the embedded SQLite
store): ``embedding_model="<model>@<provider>"`` on create and update; the worker's indexing, the
retrieval, a chat's question and a re-embed all reach that provider's endpoint (a second scripted
OpenAI-compatible server) with its key and model, while the server's own embedder stays the default;
unknown names and model changes under chunks are refused with RAGFlow's messages; another tenant cannot
name the provider.

Redis: KBGRAPH_TEST_REDIS_URL (default DB 11, as tests/conftest.py), keys under a per-run prefix."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from ragflow_sdk import RAGFlow
from ragflow_sdk.modules.dataset import DataSet

from conftest import REDIS_URL, scratch_redis_prefix
from kbgraph.config import Settings, load_settings
from service.test_ragflow_sdk import ChatScript, parsed
from support.scripted_llm import ScriptedLLM
from support.web_host import celery_worker, web_server

pytestmark = pytest.mark.services

KEY = "sk-acme-embeddings-0042"
MODEL = "acme-embed-v2"
DIM = 48  # the server's own embedder makes 64-wide vectors: the provider's are told apart by width


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(responder=ChatScript(), stream_piece_chars=8) as server:
        yield server


@pytest.fixture(scope="module")
def acme() -> Iterator[ScriptedLLM]:
    """The tenant's provider: serves embeddings only (a chat request there would get a 400)."""
    with ScriptedLLM(embedding_dim=DIM) as server:
        yield server


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM) -> Iterator[Settings]:
    with scratch_redis_prefix() as prefix:
        base = load_settings(data_dir=tmp_path_factory.mktemp("provider-embed") / "data", store="sqlite",
                             embedding_provider="hash", embedding_dim=64, redis_url=REDIS_URL, redis_prefix=prefix,
                             provider_key_secret="first secret")
        yield llm.settings(base, embedding_provider="hash", embedding_model="")


@pytest.fixture(scope="module")
def host(settings: Settings) -> Iterator[str]:
    with celery_worker(settings, refresh_delay=0.2) as celery, web_server(settings, celery) as url:
        yield url


@pytest.fixture(scope="module")
def keys(host: str, settings: Settings, acme: ScriptedLLM) -> dict[str, str]:
    from kbgraph.engine.providers import seal_key
    from kbgraph.meta import MetaDB

    with MetaDB.open(settings.meta_url) as meta:
        out = {}
        for tenant in ("alice", "mallory"):
            meta.ensure_tenant(tenant)
            out[tenant] = meta.create_api_key(tenant)[1]
        meta.add_provider("alice", "acme", acme.base_url, seal_key(settings, KEY), chat_models=["acme-chat"],
                          embedding_models=[MODEL, "acme-embed-v1"])
        return out


@pytest.fixture(scope="module")
def rag(host: str, keys: dict[str, str]) -> RAGFlow:
    return RAGFlow(keys["alice"], host)


def embedding_calls(server: ScriptedLLM, since: int = 0) -> list[dict[str, Any]]:
    return [r for r in server.requests[since:] if r["kind"] == "embeddings"]


@pytest.fixture(scope="module")
def on_acme(rag: RAGFlow, acme: ScriptedLLM) -> DataSet:
    dataset = rag.create_dataset("on acme", embedding_model=f"{MODEL}@acme")
    parsed(dataset, ["mira_castell.md", "lumen_cartographers_guild.md"])
    return dataset


def test_a_dataset_indexes_with_its_providers_embedding_model(rag: RAGFlow, acme: ScriptedLLM, llm: ScriptedLLM,
                                                              on_acme: DataSet) -> None:
    assert on_acme.embedding_model == f"{MODEL}@acme"
    assert rag.list_datasets(id=on_acme.id)[0].embedding_model == f"{MODEL}@acme"
    calls = embedding_calls(acme)
    assert calls, "the worker never called the provider's endpoint"
    assert {c["authorization"] for c in calls} == {f"Bearer {KEY}"}
    assert {c["body"]["model"] for c in calls} == {MODEL}
    assert not embedding_calls(llm), "the server's own endpoint embedded the provider's dataset"


def test_retrieval_and_chat_embed_the_question_at_the_provider(rag: RAGFlow, acme: ScriptedLLM,
                                                                on_acme: DataSet) -> None:
    before = len(acme.requests)
    found = rag.retrieve(dataset_ids=[on_acme.id], question="Who founded the Lumen Cartographers Guild?")
    assert found and any("Mira Castell" in c.content for c in found)
    asked = embedding_calls(acme, before)
    assert asked and any("Lumen Cartographers Guild" in str(c["body"]["input"]) for c in asked)
    assert {c["authorization"] for c in asked} == {f"Bearer {KEY}"}

    chat = rag.create_chat("acme reader", dataset_ids=[on_acme.id])
    before = len(acme.requests)
    answer = list(chat.create_session().ask("Where is the guild's emblem from?", stream=False))[-1]
    assert "[ID:" in answer.content and answer.reference
    assert any("emblem" in str(c["body"]["input"]) for c in embedding_calls(acme, before))
    rag.delete_chats(ids=[chat.id])


def test_unknown_names_are_refused_with_ragflows_messages(rag: RAGFlow, keys: dict[str, str], host: str) -> None:
    for name in ("nope@acme", "acme-chat@acme", f"{MODEL}@nobody", "other-model@Builtin"):
        with pytest.raises(Exception) as refused:
            rag.create_dataset("refused", embedding_model=name)
        assert str(refused.value) == f"Unsupported model: <{name}>"
    with pytest.raises(Exception, match="Embedding model identifier must follow <model_name>@<provider> format"):
        rag.create_dataset("refused", embedding_model=MODEL)
    # another tenant has no provider "acme": the name is not theirs
    with pytest.raises(Exception) as stranger:
        RAGFlow(keys["mallory"], host).create_dataset("theirs", embedding_model=f"{MODEL}@acme")
    assert str(stranger.value) == f"Unsupported model: <{MODEL}@acme>"
    assert not [d for d in rag.list_datasets(page_size=100) if d.name == "refused"]
    # the server's own model stays the default, and takes RAGFlow's name@factory form
    plain = rag.create_dataset("plain")
    assert plain.embedding_model == "hash-64@Builtin"
    assert rag.create_dataset("plain too", embedding_model="hash-64@Builtin").embedding_model == "hash-64@Builtin"


def test_updating_the_model(rag: RAGFlow, on_acme: DataSet, settings: Settings) -> None:
    from kbgraph.meta import MetaDB

    empty = rag.create_dataset("empty for now")
    empty.update({"embedding_model": f"{MODEL}@acme"})
    assert rag.list_datasets(id=empty.id)[0].embedding_model == f"{MODEL}@acme"
    empty.update({"embedding_model": "acme-embed-v1@acme"})
    assert rag.list_datasets(id=empty.id)[0].embedding_model == "acme-embed-v1@acme"
    with pytest.raises(Exception) as unknown:
        empty.update({"embedding_model": "nope@acme"})
    assert str(unknown.value) == "Unsupported model: <nope@acme>"
    empty.update({"embedding_model": "hash-64@Builtin"})
    assert rag.list_datasets(id=empty.id)[0].embedding_model == "hash-64@Builtin"
    # a document being parsed would write vectors of the old model: the model stays until it ends
    doc = empty.upload_documents([{"display_name": "later.txt", "blob": b"Quartz lanterns light the archive."}])[0]
    with MetaDB.open(settings.meta_url) as meta:
        meta.set_document_status(doc.id, "running", message="parsing")
    with pytest.raises(Exception) as parsing:
        empty.update({"embedding_model": f"{MODEL}@acme"})
    assert str(parsing.value) == "embedding_model cannot change while 1 document(s) are being parsed with the current one"
    assert rag.list_datasets(id=empty.id)[0].embedding_model == "hash-64@Builtin"

    chunks = rag.list_datasets(id=on_acme.id)[0].chunk_count
    assert chunks > 0
    for other in ("hash-64@Builtin", "acme-embed-v1@acme", "nope@acme"):
        with pytest.raises(Exception) as kept:
            on_acme.update({"embedding_model": other})
        assert str(kept.value) == f"When chunk_num ({chunks}) > 0, embedding_model must remain {MODEL}@acme"
    on_acme.update({"embedding_model": f"{MODEL}@acme", "description": "same model"})  # unchanged: fine
    assert rag.list_datasets(id=on_acme.id)[0].embedding_model == f"{MODEL}@acme"


def test_datasets_of_different_models_are_not_searched_together(rag: RAGFlow, on_acme: DataSet) -> None:
    plain = rag.list_datasets(name="plain")[0]
    parsed(plain, ["tobias_wren.txt"])
    with pytest.raises(Exception, match="Datasets use different embedding models"):
        rag.retrieve(dataset_ids=[on_acme.id, plain.id], question="Mira Castell")
    assert rag.retrieve(dataset_ids=[plain.id], question="Tobias Wren")  # each on its own answers


def test_reembedding_moves_a_dataset_to_the_provider(settings: Settings, rag: RAGFlow, acme: ScriptedLLM,
                                                     on_acme: DataSet) -> None:
    from kbgraph.engine import Engine

    plain = rag.list_datasets(name="plain")[0]  # parsed with the server's model by the test above
    with Engine.open(settings, tenant="alice") as engine:
        before = len(acme.requests)
        assert engine.reembed_kb(plain.name, model=f"{MODEL}@acme") > 0
        calls = embedding_calls(acme, before)
        assert calls and {c["body"]["model"] for c in calls} == {MODEL}
        assert {c["authorization"] for c in calls} == {f"Bearer {KEY}"}
        assert engine.reembed_kb(plain.name) == 0  # it stays on the provider's model, not the configured one
        assert len(engine.embedder_for(engine.kb(plain.name)).embed(["probe"])[0]) == DIM
    assert rag.list_datasets(id=plain.id)[0].embedding_model == f"{MODEL}@acme"
    # one model now: searched together, the question embedded at the provider
    found = rag.retrieve(dataset_ids=[on_acme.id, plain.id], question="Tobias Wren")
    assert plain.id in {c.dataset_id for c in found}
