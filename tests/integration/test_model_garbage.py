"""A model that answers garbage: nothing unreadable is cached or becomes content, a document with
failed chunks ends failed as "partial" with the count, and the next run asks only for what failed.

Real openai client against the scripted OpenAI-compatible server; real SQLite store and cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbgraph.engine import Engine
from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.graph.describe import usable_summary
from kbgraph.llm.base import Message
from kbgraph.llm.factory import build_chat
from kbgraph.meta import GraphConfig
from kbgraph.store.base import any_of
from kbgraph.store.records import Entity
from support.graph_model import GraphModel, _last_user
from support.scripted_llm import ScriptedLLM

GARBAGE = "\ufffd\ufffd#@!% 0x1f 0x00 \ufffd"
GRAPH = GraphConfig(enabled=True, method="light", community=False, max_gleanings=0)


class Flaky:
    """The scripted model's answers, with garbage for the prompts ``broken`` picks while ``down``."""

    def __init__(self, broken: Any) -> None:
        self.model, self.broken, self.down = GraphModel(), broken, True
        self.asked: list[str] = []

    def __call__(self, request: dict[str, Any]) -> str:
        prompt = _last_user(request)
        kind, answer = self.model._answer(prompt)
        self.asked.append(kind)
        return GARBAGE if self.down and self.broken(kind, prompt) else answer


def _engine(settings: Settings, llm: ScriptedLLM, **overrides: Any) -> Engine:
    return Engine.open(llm.settings(settings, llm_max_retries=0, chunk_tokens=96, chunk_overlap=8, **overrides))


def test_a_garbled_chunk_is_not_cached_and_only_it_is_asked_again(settings: Settings) -> None:
    # one chunk of the document always gets garbage while the model is "down"
    flaky = Flaky(lambda kind, prompt: kind == "extract" and "Treaty of Corran" in prompt.split("---Input Text---")[1])
    with ScriptedLLM(responder=flaky) as llm, _engine(settings, llm) as engine:
        engine.create_kb("kb", graph=GRAPH)
        report = engine.index_paths("kb", [SAMPLE_CORPUS_DIR / "salt_war.md"])
        [outcome] = report.documents
        doc = engine.meta.get_document(engine.kb("kb").id, outcome.doc_id)
        assert outcome.status == "failed" and doc.status == "failed"
        assert doc.error is not None and doc.error.startswith("partial: graph extraction failed for 1 of ")
        assert doc.chunk_count > 1  # the other chunks are indexed and searchable
        assert engine.query(["kb"], "Salt War", mode="naive").chunks
        first_run = list(flaky.asked)
        assert first_run.count("extract") == doc.chunk_count + 1  # the broken chunk was asked twice (retry)

        flaky.down, flaky.asked = False, []
        again = engine.index_paths("kb", [SAMPLE_CORPUS_DIR / "salt_war.md"])
        assert again.documents[0].status == "indexed"
        # answers that parsed came from the cache: only the chunk that failed was asked again
        assert flaky.asked == ["extract"]
        assert engine.meta.get_document(engine.kb("kb").id, outcome.doc_id).status == "done"


def test_a_garbage_summary_is_an_error_not_a_description(settings: Settings) -> None:
    flaky = Flaky(lambda kind, prompt: kind == "summarize")
    files = [SAMPLE_CORPUS_DIR / n for n in ("mira_castell.md", "lumen_cartographers_guild.md")]
    with ScriptedLLM(responder=flaky) as llm, _engine(settings, llm, summary_max_tokens=24) as engine:
        engine.create_kb("kb", graph=GRAPH)
        report = engine.index_paths("kb", files)
        assert flaky.asked.count("summarize") >= 2
        failed = [d for d in report.documents if d.status == "failed"]
        assert failed and all("unusable twice" in d.message for d in failed)
        kb = engine.kb("kb")
        descriptions = [Entity.from_doc(d).description for d in engine.store.scan(
            engine.tenant, [kb.id], [any_of("knowledge_graph_kwd", [Entity.KIND])])]
        assert not any(GARBAGE in d or "\ufffd" in d for d in descriptions)

        flaky.down = False
        report = engine.index_paths("kb", files)
        assert all(d.status in ("indexed", "skipped") for d in report.documents), report.documents
        assert all(d.status == "done" for d in engine.meta.list_documents(kb.id, limit=None))


def test_the_cache_keeps_only_accepted_answers_and_asks_again_for_poisoned_ones(settings: Settings) -> None:
    with ScriptedLLM(responses=["garbage", "good answer"]) as llm:
        chat = build_chat(llm.settings(settings, llm_max_retries=0))
        ask = [Message("user", "question")]

        def accept(text: str) -> bool:
            return text.startswith("good")

        assert chat.chat(ask, phase="t", accept=accept) == "garbage"  # returned, not stored
        assert chat.chat(ask, phase="t", accept=accept) == "good answer"
        assert chat.chat(ask, phase="t", accept=accept) == "good answer"  # now from the cache
        assert llm.counts["chat"] == 2
        # an entry stored without a check (an older release) that the check refuses is asked again
        poisoned = [Message("user", "other")]
        llm.push("junk", "good again")
        assert chat.chat(poisoned, phase="t") == "junk"
        assert chat.chat(poisoned, phase="t", accept=accept) == "good again"
        assert llm.counts["chat"] == 4


def test_summary_validation() -> None:
    assert usable_summary("Mira Castell founded the guild in 1204 and led it for thirty years.", 100)
    assert usable_summary("米拉创立了公会。", 100)
    for bad in ("", "   ", GARBAGE, "<!DOCTYPE html><html><body>502 Bad Gateway</body></html>",
                "## 12 34 -- 56 78 !! ?? 90", "word " * 500):
        assert not usable_summary(bad, 100), bad
