"""Global map-reduce search over community reports, against the scripted LLM server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.scripted_llm import ScriptedLLM

from kbgraph.config import Settings
from kbgraph.llm import LLMNotConfigured, build_chat
from kbgraph.search.global_search import (
    GlobalParams,
    batches,
    parse_points,
    reduce_input,
    select_reports,
)
from kbgraph.search.retrieve import retrieve

from . import EMBEDDER, KB, TENANT, toy_kb

QUESTION = "What are the main themes around the guild?"


def test_parse_points() -> None:
    points = parse_points('```json\n{"points": [{"description": "A", "score": 80}, {"description": "B", '
                          '"score": 0}, {"description": "C", "score": "35"}, "junk"]}\n```', batch=2)
    assert [(p.description, p.score, p.batch) for p in points] == [("A", 80, 2), ("C", 35, 2)]
    assert parse_points('<think>{"points": []}</think>[{"description": "D", "score": 150}]', 0)[0].score == 100
    assert parse_points("no idea", 0) == []


def test_reports_are_prefiltered_and_batched(tmp_path: Path) -> None:
    store = toy_kb(tmp_path)
    vector = EMBEDDER.embed([QUESTION])[0]
    everything = select_reports(store, TENANT, [KB], QUESTION, vector, GlobalParams())
    assert everything[0].title == "The Lumen guild and its heron"
    assert len(select_reports(store, TENANT, [KB], QUESTION, vector, GlobalParams(max_reports=1))) == 1
    rated = select_reports(store, TENANT, [KB], QUESTION, vector, GlobalParams(min_rating=5))
    assert [r.title for r in rated] == ["The Lumen guild and its heron"]
    assert len(batches(everything, 10**6)) == 1 and len(batches(everything, 1)) == len(everything)
    store.close()


def test_reduce_input_orders_by_importance_within_budget() -> None:
    points = parse_points('[{"description": "low", "score": 10}, {"description": "high", "score": 90}]', 0)
    assert reduce_input(points, 1000).splitlines()[0] == "- (importance 90) high"
    assert reduce_input(points, 1).splitlines() == ["- (importance 90) high"]


def test_global_needs_an_llm(tmp_path: Path) -> None:
    store = toy_kb(tmp_path)
    with pytest.raises(LLMNotConfigured, match="chat model"):
        retrieve(store, TENANT, [KB], QUESTION, "global", embedder=EMBEDDER)
    store.close()


def test_global_map_reduce(tmp_path: Path, scripted_llm: ScriptedLLM, settings: Settings) -> None:
    store = toy_kb(tmp_path)

    def respond(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if "Key points:" in prompt:  # the reduce step
            assert "(importance 90) The guild was founded by Mira Castell" in prompt
            return "The guild, founded by Mira Castell, uses a silver heron as its emblem."
        assert "Reports:" in prompt and QUESTION in prompt
        if "The Salt War" in prompt and "Lumen" not in prompt:
            return '{"points": []}'
        return json.dumps({"points": [{"description": "The guild was founded by Mira Castell", "score": 90},
                                      {"description": "Its emblem is a silver heron", "score": 70}]})

    scripted_llm.responder = respond
    chat = build_chat(scripted_llm.settings(settings), backoff_base=0.01, backoff_max=0.02)
    result = retrieve(store, TENANT, [KB], QUESTION, "global", embedder=EMBEDDER, chat=chat, settings=settings)
    assert result.answer == "The guild, founded by Mira Castell, uses a silver heron as its emblem."
    assert [p.score for p in result.points] == [90, 70]
    assert result.reports and result.chunks == [] and result.citations == {}
    assert scripted_llm.counts["chat"] == 2  # both reports fit one batch: one map call, one reduce call
    assert json.loads(json.dumps(result.to_json()))["answer"] == result.answer

    silent = build_chat(scripted_llm.settings(settings), cache=False, backoff_base=0.01, backoff_max=0.02)
    scripted_llm.responder = lambda body: '{"points": []}'
    empty = retrieve(store, TENANT, [KB], QUESTION, "global", embedder=EMBEDDER, chat=silent, settings=settings)
    assert empty.answer == settings.empty_response
    store.close()
