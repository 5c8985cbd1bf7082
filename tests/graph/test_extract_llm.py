"""LLM extraction over real HTTP: the scripted OpenAI-compatible server and the real client stack
(cache, retry, limits, accounting) from kbgraph.llm.factory."""

from __future__ import annotations

from typing import Any

import pytest
from support.scripted_llm import ScriptedLLM

from kbgraph.config import Settings
from kbgraph.graph.extract.base import ExtractionError
from kbgraph.graph.extract.factory import build_extractor
from kbgraph.graph.extract.llm import LLMExtractor
from kbgraph.graph.keys import normalize_key
from kbgraph.llm import Cancelled, ChatModel, LLMNotConfigured, UsageLedger, build_chat

TEXT = ("Ebenezer Scrooge ran a counting-house in London with his late partner Jacob Marley. "
        "His clerk, Bob Cratchit, earned fifteen shillings a week.")
FIRST = (
    '("entity"<|>EBENEZER SCROOGE<|>person<|>A miser who runs a counting-house.)##\n'
    '("entity"<|>Jacob Marley<|>Person<|>Scrooge\'s late partner.)##\n'
    '("entity"<|>London<|>location<|>City of the counting-house.)##\n'
    '("relationship"<|>EBENEZER SCROOGE<|>Jacob Marley<|>Former business partners.<|>9)##\n'
    '("relationship"<|>Ebenezer Scrooge<|>London<|>His counting-house is in London.<|>6)\n<|COMPLETE|>'
)
MORE = ('("entity"<|>Bob Cratchit<|>person<|>Scrooge\'s underpaid clerk.)##\n'
        '("relationship"<|>Bob Cratchit<|>Ebenezer Scrooge<|>Bob works as Scrooge\'s clerk.<|>8)##\n'
        '("relationship"<|>Bob Cratchit<|>Fifteen Shillings<|>His weekly wage.<|>2)\n<|COMPLETE|>')
TYPES = ["organization", "person", "geo", "event", "category"]


def make_chat(llm: ScriptedLLM, settings: Settings, ledger: UsageLedger | None = None) -> ChatModel:
    chat = build_chat(llm.settings(settings), ledger, True, backoff_base=0.01, backoff_max=0.05)
    assert chat is not None
    return chat


def last_user(request: dict[str, Any]) -> str:
    return [m for m in request["body"]["messages"] if m["role"] == "user"][-1]["content"]


def keys(result) -> set[str]:
    return {normalize_key(e.name) for e in result.entities}


def test_general_extraction_with_one_gleaning(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    ledger = UsageLedger()
    scripted_llm.push(FIRST, MORE)
    x = build_extractor("general", make_chat(scripted_llm, settings, ledger), TYPES, max_gleanings=1)
    out = x.extract(TEXT)
    assert out.llm_calls == 2 and scripted_llm.counts["chat"] == 2
    assert keys(out) == {"ebenezer scrooge", "jacob marley", "london", "bob cratchit", "fifteen shillings"}
    ents = {normalize_key(e.name): e for e in out.entities}
    assert ents["ebenezer scrooge"].name == "Ebenezer Scrooge"  # the chunk's spelling, not the model's caps
    assert ents["london"].type == "geo"  # "location" mapped onto the knowledge base's type
    assert ents["fifteen shillings"].type == "unknown"  # relation endpoint without an entity record
    assert len(out.relations) == 4
    first, second = scripted_llm.requests
    prompt = first["body"]["messages"][0]["content"]
    assert "---Input Text---\n" + TEXT in prompt and "organization, person, geo, event, category" in prompt
    roles = [m["role"] for m in second["body"]["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert "probably left out" in last_user(second)
    assert ledger.by_phase["extract"].calls == 1 and ledger.by_phase["glean"].calls == 1
    # the same chunk again is answered from the cache: no new HTTP request
    again = x.extract(TEXT)
    assert scripted_llm.counts["chat"] == 2 and keys(again) == keys(out)


def test_gleaning_stops_when_the_check_says_no(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push(FIRST, MORE, "NO")
    out = LLMExtractor(make_chat(scripted_llm, settings), "general", TYPES, max_gleanings=3).extract(TEXT)
    assert out.llm_calls == 3 and scripted_llm.counts["chat"] == 3
    check = scripted_llm.requests[2]
    assert "answer YES or NO" in last_user(check)
    assert [m["role"] for m in check["body"]["messages"]] == ["user", "assistant", "user", "assistant", "user"]


def test_gleaning_continues_on_yes_up_to_the_limit(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    extra = '("entity"<|>Belle<|>person<|>A woman Scrooge once loved.)<|COMPLETE|>'
    scripted_llm.push(FIRST, MORE, "Yes.", extra)
    out = LLMExtractor(make_chat(scripted_llm, settings), "general", TYPES, max_gleanings=2).extract(TEXT)
    # extract, continue, check (YES), continue; no check after the last allowed gleaning
    assert out.llm_calls == 4 and scripted_llm.counts["chat"] == 4
    assert "belle" in keys(out)
    last = scripted_llm.requests[3]["body"]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
    assert "answer YES or NO" not in last[-1]["content"]


def test_no_gleaning(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push(FIRST)
    out = LLMExtractor(make_chat(scripted_llm, settings), "general", TYPES, max_gleanings=0).extract(TEXT)
    assert out.llm_calls == 1 and len(out.entities) == 3


def test_light_format_keywords(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push('("entity"<|>Bob Cratchit<|>person<|>a clerk)##("entity"<|>Scrooge<|>person<|>a miser)##'
                      '("relationship"<|>Bob Cratchit<|>Scrooge<|>clerk of<|>employment, poverty<|>8)<|COMPLETE|>')
    out = build_extractor("light", make_chat(scripted_llm, settings), TYPES, max_gleanings=0).extract(TEXT)
    assert out.relations[0].keywords == ["employment", "poverty"]
    prompt = scripted_llm.requests[0]["body"]["messages"][0]["content"]
    assert "<relationship_keywords>" in prompt


def test_garbled_answer_is_retried_past_the_cache(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push("I am sorry, I cannot help with that request.", FIRST)
    out = LLMExtractor(make_chat(scripted_llm, settings), "general", TYPES, max_gleanings=0).extract(TEXT)
    assert out.llm_calls == 2 and scripted_llm.counts["chat"] == 2
    assert len(out.entities) == 3
    first, retry = (r["body"] for r in scripted_llm.requests)
    assert first["messages"] == retry["messages"] and retry.get("temperature") == 0.7


def test_still_garbled_after_retry_raises(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push("lorem ipsum", '("entity"<|><|>)')
    x = LLMExtractor(make_chat(scripted_llm, settings), "general", TYPES, max_gleanings=1)
    with pytest.raises(ExtractionError):
        x.extract(TEXT)
    assert scripted_llm.counts["chat"] == 2


def test_explicit_empty_answer_is_not_garbled(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push("<|COMPLETE|>", "<|COMPLETE|>")
    out = LLMExtractor(make_chat(scripted_llm, settings), "general", TYPES, max_gleanings=1).extract("Page 3 of 9.")
    assert out.entities == [] and out.llm_calls == 2


def test_cancel_before_and_between_calls(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    x = LLMExtractor(make_chat(scripted_llm, settings), "general", TYPES, max_gleanings=2)
    with pytest.raises(Cancelled):
        x.extract(TEXT, cancel=lambda: True)
    assert scripted_llm.counts["chat"] == 0

    scripted_llm.push(FIRST, MORE)

    def cancel_after_first_request() -> bool:
        return scripted_llm.counts["chat"] >= 1

    with pytest.raises(Cancelled):
        x.extract(TEXT, cancel=cancel_after_first_request)
    assert scripted_llm.counts["chat"] == 1


def test_general_and_light_need_a_chat_model() -> None:
    with pytest.raises(LLMNotConfigured, match="nlp"):
        build_extractor("general", None, TYPES)
    with pytest.raises(ValueError):
        build_extractor("magic", None, TYPES)


def test_to_mentions(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push(FIRST)
    out = LLMExtractor(make_chat(scripted_llm, settings), "general", TYPES, max_gleanings=0).extract(TEXT)
    ents, rels = out.to_mentions("kb1", "doc1", "chunk1")
    assert {m.key for m in ents} == {"ebenezer scrooge", "jacob marley", "london"}
    assert all(r.src_key < r.tgt_key for r in rels)
    assert len({m.id for m in ents}) == len(ents)
