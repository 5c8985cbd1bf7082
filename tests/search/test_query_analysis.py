"""Query analysis: robust parsing of model answers, the nlp fallback, one cached LLM call."""

from __future__ import annotations

import pytest
from support.scripted_llm import ScriptedError, ScriptedLLM

from kbgraph.config import Settings
from kbgraph.llm import build_chat
from kbgraph.search.query_analysis import analyze_query, nlp_analysis, parse_analysis

QUESTION = "Which comet was discovered at the observatory funded by the Brightwater Trading Company?"


@pytest.mark.parametrize("answer", [
    '{"entities": ["Brightwater Trading Company"], "keywords": ["comet", "observatory"]}',
    '```json\n{"entities": ["Brightwater Trading Company"], "keywords": ["comet", "observatory"]}\n```',
    ('<think>The user asks about {a comet}.</think>Sure! Here it is:\n'
     '{"entities": ["Brightwater Trading Company"], "keywords": ["comet", "observatory"]} Hope it helps.'),
    "{'entities': ['Brightwater Trading Company'], 'keywords': ['comet', 'observatory',],}",
    '{"entities_from_query": ["Brightwater Trading Company"], "answer_type_keywords": "comet, observatory"}',
])
def test_parse_tolerates_messy_answers(answer: str) -> None:
    assert parse_analysis(answer) == (["Brightwater Trading Company"], ["comet", "observatory"])


@pytest.mark.parametrize("answer", ["", "I don't know.", "[1, 2, 3]", '{"answer": "Ashen Lantern"}', "{broken"])
def test_parse_gives_none_on_garbage(answer: str) -> None:
    assert parse_analysis(answer) is None


def test_parse_drops_duplicates_and_non_strings() -> None:
    assert parse_analysis('{"entities": ["A", "a", 3, {"name": "B"}, " "], "keywords": []}') == (["A", "B"], [])


def test_nlp_analysis_without_llm() -> None:
    found = analyze_query(QUESTION, None)
    assert found.source == "nlp"
    assert "Brightwater Trading Company" in found.entities
    assert "comet" in found.keywords and "observatory" in found.keywords
    assert not {"brightwater", "trading", "company"} & set(found.keywords)  # entity tokens are not keywords
    assert "the" not in found.keywords and "which" not in found.keywords


def test_nlp_analysis_of_chinese_question() -> None:
    found = nlp_analysis("南屿商会的创办人年轻时在哪所书院求学？")
    assert found.source == "nlp" and (found.entities or found.keywords)


def test_nlp_analysis_of_chinese_question_names_firms_and_titles_as_passages_do() -> None:
    a = nlp_analysis("谁牵头了青禾科技这轮融资？")
    assert a.entities == ["青禾科技"]
    assert nlp_analysis("《海棠依旧》的生产商，其创始人毕业于哪所大学？").entities == ["海棠依旧"]


def test_llm_analysis_is_one_cached_call(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    chat = build_chat(scripted_llm.settings(settings), backoff_base=0.01, backoff_max=0.02)
    scripted_llm.push('{"entities": ["Brightwater Trading Company"], "keywords": ["comet", "organization"]}')
    first = analyze_query(QUESTION, chat)
    second = analyze_query(QUESTION, chat)
    assert first.source == second.source == "llm"
    assert first.entities == ["Brightwater Trading Company"] and first.keywords == ["comet", "organization"]
    assert scripted_llm.counts["chat"] == 1  # the second answer came from the cache
    prompt = scripted_llm.requests[0]["body"]["messages"][-1]["content"]
    assert QUESTION in prompt


def test_llm_garbage_or_failure_falls_back_to_nlp(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    chat = build_chat(scripted_llm.settings(settings, llm_max_retries=0), cache=False, backoff_base=0.01,
                      backoff_max=0.02)
    scripted_llm.push("Sorry, I can't help with that.")
    assert analyze_query(QUESTION, chat).source == "nlp"
    scripted_llm.push(ScriptedError(500))
    found = analyze_query(QUESTION, chat)
    assert found.source == "nlp" and "Brightwater Trading Company" in found.entities


def test_nlp_analysis_keeps_a_name_whole_not_its_part_after_of() -> None:
    # a passage about the Bank of England also names England, a question about the bank is not about England
    assert nlp_analysis("Who was the first governor of the Bank of England?").entities == ["Bank of England"]
    assert set(nlp_analysis("Did England borrow from the Bank of Scotland?").entities) == {"England", "Bank of Scotland"}
