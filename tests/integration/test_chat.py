"""Chat over a knowledge base, through the real openai client to a scripted server: answers stream,
carry [ID:n] citations that resolve to real chunks, and later turns build on earlier ones."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from kbgraph.engine import Engine
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.llm.base import LLMNotConfigured
from kbgraph.meta.schemas import GraphConfig
from support.graph_model import GraphModel


class ChatModelScript(GraphModel):
    """Answers chat turns citing the first two chunks it was shown (and one marker that does not exist)."""

    def __call__(self, request):
        if not request.get("stream"):
            return super().__call__(request)
        self.kinds.append("chat")
        system = request["messages"][0]["content"]
        markers = re.findall(r"\[ID:(\d+)\]", system)[:2]
        return (f"Mira Castell founded the Lumen Cartographers Guild [ID:{markers[0]}]. "
                f"Its emblem is a silver heron [ID:{markers[-1]}][ID:99].")


@pytest.fixture
def engine(settings, scripted_llm, tmp_path):
    scripted_llm.responder = ChatModelScript()
    with Engine.open(scripted_llm.settings(settings, embedding_provider="hash")) as engine:
        engine.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp"))
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR])
        yield engine


def test_answer_streams_with_citations_to_real_chunks(engine, scripted_llm):
    dialog = engine.dialog(["lore"])
    events = list(dialog.ask("Who founded the Lumen Cartographers Guild?"))
    deltas = [e for e in events if e.kind == "delta"]
    done = events[-1]
    assert len(deltas) > 3  # token by token, not one block
    assert done.kind == "done" and "[ID:99]" not in done.text
    assert done.references and len(done.references) == len(set(re.findall(r"\[ID:(\d+)\]", done.text)))
    chunk_ids = {c.chunk_id for c in events[0].retrieval.chunks}
    for ref in done.references:
        assert ref.chunk_id in chunk_ids
        assert engine.store.get(engine.tenant, [engine.kb("lore").id], [ref.chunk_id])[0]["content_with_weight"] == ref.content


def test_second_turn_uses_the_first(engine, scripted_llm):
    dialog = engine.dialog(["lore"])
    dialog.answer("Who founded the Lumen Cartographers Guild?")
    scripted_llm.reset()
    second = list(dialog.ask("And what is its emblem?"))
    retrieval = second[0].retrieval
    assert "Lumen Cartographers Guild" in retrieval.question  # the earlier turn refines retrieval
    assert any(c.doc_name == "lumen_cartographers_guild.md" for c in retrieval.chunks)
    chat_request = next(r for r in scripted_llm.requests if r["body"].get("stream"))
    roles = [m["role"] for m in chat_request["body"]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert "Mira Castell founded" in chat_request["body"]["messages"][2]["content"]


def test_nothing_found_answers_without_calling_the_llm(engine, scripted_llm, settings):
    engine.settings = engine.settings.replace(similarity_threshold=0.99)
    dialog = engine.dialog(["lore"], mode="naive")
    scripted_llm.reset()
    turn = dialog.answer("zebra quantum marmalade")
    assert turn.answer == engine.settings.empty_response and turn.references == []
    assert scripted_llm.counts["chat"] == 0


def test_no_llm_configured_is_a_clear_error(settings):
    with Engine.open(settings) as engine:
        engine.create_kb("plain")
        with pytest.raises(LLMNotConfigured, match="KBGRAPH_LLM_BASE_URL"):
            engine.dialog(["plain"])


def test_chat_command_in_the_terminal(engine, scripted_llm, settings):
    env = {"KBGRAPH_DATA_DIR": str(engine.settings.data_dir), "KBGRAPH_EMBEDDING_PROVIDER": "hash",
           "KBGRAPH_EMBEDDING_DIM": str(engine.settings.embedding_dim), "KBGRAPH_LLM_BASE_URL": scripted_llm.base_url,
           "KBGRAPH_LLM_MODEL": engine.settings.llm_model, "KBGRAPH_LLM_API_KEY": "test-key", "PATH": "/usr/bin:/bin",
           # the same document store the engine wrote to (Elasticsearch when KBGRAPH_ES_URL is set)
           "KBGRAPH_STORE": engine.settings.store, "KBGRAPH_ES_URL": engine.settings.es_url,
           "KBGRAPH_ES_INDEX_PREFIX": engine.settings.es_index_prefix,
           # the tree under test, where it is put first on the path (a worktree beside an editable install)
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "kbgraph.cli", "chat", "--kb", "lore"], input="Who founded the guild?\n",
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Mira Castell founded the Lumen Cartographers Guild [ID:" in done.stdout
    assert re.search(r"^  \[ID:\d+\] \S+", done.stdout, flags=re.M)
