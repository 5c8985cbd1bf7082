"""Descriptions: joined while short, summarized by the LLM when long; a merge's summaries asked for
several at a time (over real HTTP, scripted model)."""

from __future__ import annotations

import re
import time
from typing import Any

from support.scripted_llm import ScriptedLLM  # tests/ is on sys.path (conftest)

from kbgraph.config import Settings
from kbgraph.graph.describe import Describer
from kbgraph.llm import build_chat

LONG = [f"Fragment {i} says something rather long about the subject, with detail number {i}." for i in range(8)]


def summarizing(llm: ScriptedLLM, delay_s: float = 0.0) -> None:
    def answer(request: dict[str, Any]) -> str:
        time.sleep(delay_s)  # a slow model: requests in flight together show up at the server
        prompt = request["messages"][-1]["content"]
        subject = re.search(r"Fragment (\d+)", prompt)
        return f"Summary of {len(re.findall('Fragment', prompt))} fragments from {subject.group(1) if subject else '?'}."
    llm.responder = answer


def inputs() -> list[tuple[str, str, list[str]]]:
    return [("entity", f"Subject {n}", LONG[n:] + LONG[:n]) for n in range(5)] + [("entity", "Short", ["tiny"])]


def test_short_descriptions_are_joined_long_ones_summarized(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    summarizing(scripted_llm)
    describe = Describer(build_chat(scripted_llm.settings(settings), cache=False), max_tokens=40)
    assert describe("entity", "Short", ["one", "two"]) == "one\ntwo"
    assert scripted_llm.counts["chat"] == 0
    assert describe("entity", "Subject", LONG).startswith("Summary of 8 fragments")
    assert scripted_llm.counts["chat"] == 1 and describe.summaries == 1


def test_prefetch_asks_together_and_answers_as_asked_one_by_one(scripted_llm: ScriptedLLM,
                                                                 settings: Settings) -> None:
    summarizing(scripted_llm)
    chat = build_chat(scripted_llm.settings(settings), cache=False)
    one_by_one = [Describer(chat, max_tokens=40)(*item) for item in inputs()]
    assert scripted_llm.counts["chat"] == 5  # the short one needs no summary

    scripted_llm.reset()
    summarizing(scripted_llm, delay_s=0.2)
    describe = Describer(chat, max_tokens=40, concurrency=3)
    describe.prefetch(inputs())
    assert scripted_llm.counts["chat"] == 5 and scripted_llm.max_in_flight == 3
    assert [describe(*item) for item in inputs()] == one_by_one
    assert scripted_llm.counts["chat"] == 5  # every later call was answered from what was fetched
    assert describe.summaries == 5


def test_prefetch_without_concurrency_asks_nothing_ahead(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    summarizing(scripted_llm)
    describe = Describer(build_chat(scripted_llm.settings(settings), cache=False), max_tokens=40)
    describe.prefetch(inputs())
    assert scripted_llm.counts["chat"] == 0


def test_budget_is_fragment_tokens_plus_line_breaks_without_a_model() -> None:
    from kbgraph.parse.token_count import count_tokens

    fragments = [f"Fragment {i} tells one more thing about the lighthouse keeper and the storm." for i in range(6)]
    cost = [count_tokens(f) for f in fragments]
    exactly_three = sum(cost[:3]) + 2  # three fragments and the two line breaks between them
    describe = Describer(None, max_tokens=exactly_three)
    assert describe("entity", "Keeper", fragments[:3]) == "\n".join(fragments[:3])
    # without a model, a description over the budget keeps the first fragments that fit, in order
    assert describe("entity", "Keeper", fragments) == "\n".join(fragments[:3])
    assert Describer(None, max_tokens=exactly_three - 1)("entity", "Keeper", fragments) == "\n".join(fragments[:2])


MANY = [f"Fragment {i} tells of the subject's deed number {i} in the year {1700 + i} at length." for i in range(60)]


def test_summary_prompts_stay_bounded_and_new_fragments_reask_only_their_group(scripted_llm: ScriptedLLM,
                                                                               settings: Settings) -> None:
    prompts: list[str] = []

    def answer(request: dict[str, Any]) -> str:
        prompt = request["messages"][-1]["content"]
        prompts.append(prompt)
        return f"Summary of {len(re.findall(r'^- ', prompt, re.M))} descriptions."

    scripted_llm.responder = answer
    chat = build_chat(scripted_llm.settings(settings))  # with the answer cache, as indexing runs
    describe = Describer(chat, max_tokens=30, prompt_tokens=400)
    first = describe.summary("entity", "Subject", MANY)
    fragment_lines = [len(re.findall(r"^- ", p, re.M)) for p in prompts]
    assert len(prompts) > 2 and max(fragment_lines) < len(MANY)  # grouped, then the groups' summaries
    assert all(len(p) < 400 * 6 for p in prompts)  # every prompt within its token budget (~4-6 chars a token)
    # a function of the set of fragments: another order asks nothing new and gives the same summary
    asked = len(prompts)
    assert describe.summary("entity", "Subject", list(reversed(MANY))) == first and len(prompts) == asked
    # one new fragment: its group and the summaries above it are asked again, not every group
    describe.summary("entity", "Subject", MANY + ["Fragment 99 tells of one more deed."])
    assert 1 <= len(prompts) - asked < asked


def test_a_deferred_describer_writes_a_stand_in_and_marks_it_pending(scripted_llm: ScriptedLLM,
                                                                     settings: Settings) -> None:
    summarizing(scripted_llm)
    chat = build_chat(scripted_llm.settings(settings), cache=False)
    deferred = Describer(chat, max_tokens=40, deferred=True)
    stand_in = deferred("entity", "Subject", LONG)
    assert scripted_llm.counts["chat"] == 0 and deferred.pending(LONG) and not deferred.pending(["tiny"])
    assert stand_in == Describer(None, max_tokens=40)("entity", "Subject", LONG)  # the first fragments
    assert deferred.summary("entity", "Subject", LONG).startswith("Summary of 8 fragments")
