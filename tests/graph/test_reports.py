"""Community reports: extractive, and LLM-written over the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.scripted_llm import ScriptedLLM

from kbgraph.config import Settings
from kbgraph.graph.communities import Community, community_label
from kbgraph.graph.reports import (
    ReportContent, build_tables, extractive_report, llm_report, parse_report, report_text,
)
from kbgraph.llm import ChatModel, UsageLedger, build_chat
from kbgraph.parse.token_count import count_tokens
from kbgraph.store.records import Entity, Finding, Relation

KB = "kb1"


def entity(key: str, name: str, type_: str, description: str, pagerank: float, mentions: int = 1) -> Entity:
    return Entity(KB, key, name, type_, description, name.lower(), description.lower(),
                  mention_count=mentions, pagerank=pagerank)


def relation(a: str, b: str, description: str, weight: float) -> Relation:
    low, high = sorted((a, b))
    return Relation(KB, low, high, low.title(), high.title(), description, description.lower(), weight=weight)


ENTITIES = [
    entity("scrooge", "Scrooge", "person", "A miserly old businessman in London. He hates Christmas.", 0.4, 30),
    entity("marley", "Marley", "person", "Scrooge's dead business partner, who returns as a ghost.", 0.2, 10),
    entity("cratchit", "Bob Cratchit", "person", "Scrooge's underpaid, good-hearted clerk.", 0.3, 12),
    entity("london", "London", "location", "The city where the story takes place.", 0.05, 4),
    entity("outsider", "Outsider", "person", "Not a member of this community.", 0.9, 99),
]
RELATIONS = [
    relation("scrooge", "marley", "Marley was Scrooge's partner; his ghost warns Scrooge.", 9.0),
    relation("scrooge", "cratchit", "Cratchit works for Scrooge as a clerk.", 7.0),
    relation("scrooge", "london", "Scrooge runs his counting-house in London.", 2.0),
    relation("scrooge", "outsider", "An edge leaving the community.", 20.0),
]
MEMBERS = ["cratchit", "london", "marley", "scrooge"]
COMMUNITY = Community(0, community_label(0, MEMBERS), "", MEMBERS)

GOOD = {
    "title": "Scrooge and his partners",
    "summary": "Scrooge, Marley and Cratchit form the business core of the story.",
    "rating": 8.5,
    "rating_explanation": "Central to the plot.",
    "findings": [{"summary": "Marley warns Scrooge", "explanation": "His ghost returns."},
                 {"summary": "Cratchit is underpaid", "explanation": "He works as a clerk."}],
}


def make_chat(llm: ScriptedLLM, settings: Settings, ledger: UsageLedger | None = None) -> ChatModel:
    chat = build_chat(llm.settings(settings), ledger, True, backoff_base=0.01, backoff_max=0.05)
    assert chat is not None
    return chat


def prompt_of(request: dict[str, Any]) -> str:
    return request["body"]["messages"][-1]["content"]


# -- extractive --------------------------------------------------------------------------------


def test_extractive_report_is_deterministic_and_ordered_by_centrality() -> None:
    report = extractive_report(COMMUNITY, ENTITIES, RELATIONS)
    assert report == extractive_report(COMMUNITY, list(reversed(ENTITIES)), list(reversed(RELATIONS)))
    assert report.title.startswith("Scrooge, Bob Cratchit, Marley")
    assert "Outsider" not in report.title and "Outsider" not in report.summary
    assert report.summary.startswith("Scrooge (person): A miserly")
    assert report.findings[0] == Finding("Marley — Scrooge", "Marley was Scrooge's partner; his ghost warns Scrooge.")
    assert all("leaving" not in f.explanation for f in report.findings)  # only internal relations
    assert 0 < report.rating <= 10 and "4 entities, 3 relations" in report.rating_explanation
    assert not report.fallback


def test_extractive_report_bounds_and_degenerate_inputs() -> None:
    long = [entity(f"e{i}", f"E{i}", "thing", "word " * 200, 1.0 / (i + 1)) for i in range(50)]
    community = Community(0, "x", "", [e.key for e in long])
    report = extractive_report(community, long, [], max_summary_chars=500)
    assert 0 < len(report.summary) <= 500
    assert report.findings  # no relations: the central entities stand in
    bare = extractive_report(Community(0, "y", "", ["ghost"]), [], [])
    assert bare.title == "ghost" and bare.summary == "ghost" and bare.findings == []


def test_report_text() -> None:
    text = report_text(ReportContent("T", "S", [Finding("F1", "because"), Finding("F2", "")], 5.0, "r"))
    assert text == "# T\n\nS\n\n## F1\nbecause\n\n## F2"


# -- parsing -----------------------------------------------------------------------------------

GOOD_JSON = json.dumps(GOOD)


@pytest.mark.parametrize("answer", [
    GOOD_JSON,
    f"```json\n{GOOD_JSON}\n```",
    f"<think>Let me think about {{braces}} first.</think>\n{GOOD_JSON}",
    f"Here is the report:\n{GOOD_JSON}\nI hope this helps! {{not json}}",
    f"reasoning whose opening tag was cut off</think>{GOOD_JSON}",
    GOOD_JSON.replace('"rating": 8.5', '"rating": "8.5/10"'),
    GOOD_JSON.replace('}]}', '},]}').replace('"rating": 8.5,', '"rating": 8.5, '),
    repr(GOOD),  # a Python dict: single quotes
    json.dumps({k.upper(): v for k, v in GOOD.items()}),
])
def test_parse_report_nasties(answer: str) -> None:
    parsed = parse_report(answer)
    assert parsed is not None
    assert parsed.title == GOOD["title"] and parsed.summary == GOOD["summary"]
    assert parsed.rating == 8.5
    assert [f.summary for f in parsed.findings] == ["Marley warns Scrooge", "Cratchit is underpaid"]


def test_parse_report_lenient_fields() -> None:
    parsed = parse_report('{"title": "T", "summary": "S", "rating": "high", "findings": ["one", {"title": "two",'
                          ' "description": "d"}, 3, {}]}')
    assert parsed is not None and parsed.rating == -1  # unknown: the caller fills it in
    assert parsed.findings == [Finding("one", ""), Finding("two", "d"), Finding("3", "")]
    assert parse_report('{"rating": 99, "title": "T"}').rating == 10.0


@pytest.mark.parametrize("answer", ["", "I cannot help with that.", '{"title": ', '{"foo": 1}', "[1, 2]",
                                    '{"title": "", "summary": ""}', "<think>{\"title\": \"hidden\"}</think>"])
def test_parse_report_rejects_garbage(answer: str) -> None:
    assert parse_report(answer) is None


# -- LLM ---------------------------------------------------------------------------------------


def test_llm_report_prompt_and_answer(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    ledger = UsageLedger()
    scripted_llm.push(f"```json\n{GOOD_JSON}\n```")
    report = llm_report(make_chat(scripted_llm, settings, ledger), COMMUNITY, ENTITIES, RELATIONS, language="French")
    assert report.title == GOOD["title"] and report.rating == 8.5 and not report.fallback
    assert len(report.findings) == 2
    prompt = prompt_of(scripted_llm.requests[0])
    assert "id,entity,type,description\n0,Scrooge,person," in prompt
    assert "id,source,target,description,weight\n0,Marley,Scrooge," in prompt
    assert "French" in prompt and "Outsider,person" not in prompt
    assert ledger.by_phase["report"].calls == 1


def test_llm_report_retries_a_garbled_answer_past_the_cache(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push("Sure! The community is about Scrooge.", json.dumps({**GOOD, "rating": None}))
    report = llm_report(make_chat(scripted_llm, settings), COMMUNITY, ENTITIES, RELATIONS)
    assert scripted_llm.counts["chat"] == 2  # the retry was not answered from the cache
    assert not report.fallback and report.title == GOOD["title"]
    assert report.rating == extractive_report(COMMUNITY, ENTITIES, RELATIONS).rating  # missing rating filled in


def test_llm_report_falls_back_to_extractive(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push("no json here", '{"title": "cut off mid')
    report = llm_report(make_chat(scripted_llm, settings), COMMUNITY, ENTITIES, RELATIONS)
    assert scripted_llm.counts["chat"] == 2
    assert report.fallback
    expected = extractive_report(COMMUNITY, ENTITIES, RELATIONS)
    expected.fallback = True
    assert report == expected


def test_tables_fit_the_token_budget() -> None:
    many = [entity(f"e{i:03d}", f"Entity {i}", "thing", f"Description number {i} " * 20, 1.0 / (i + 1))
            for i in range(200)]
    rels = [relation(f"e{i:03d}", f"e{i + 1:03d}", f"Link {i} " * 20, 200 - i) for i in range(199)]
    community = Community(0, "big", "", [e.key for e in many])
    entities_csv, relations_csv = build_tables(community, many, rels, max_tokens=1000)
    assert count_tokens(entities_csv) + count_tokens(relations_csv) <= 1000
    assert entities_csv.splitlines()[1].startswith("0,Entity 0,")  # most central first
    assert relations_csv.splitlines()[1].startswith("0,E000,E001,")  # heaviest first
    assert len(relations_csv.splitlines()) > 2 and len(entities_csv.splitlines()) > 2
    # a tiny budget still gets one row of each
    tiny_e, tiny_r = build_tables(community, many, rels, max_tokens=10)
    assert len(tiny_e.splitlines()) == 2 and len(tiny_r.splitlines()) == 2


def test_tables_over_the_budget_in_bytes_but_not_in_tokens_keep_every_row() -> None:
    # long English words: several bytes a token, so the bytes pass the budget and the tokens do not
    many = [entity(f"e{i:03d}", f"Entity {i}", "thing", "extraordinarily unremarkable circumstances " * 6, 0.5)
            for i in range(12)]
    rels = [relation(f"e{i:03d}", f"e{i + 1:03d}", "notwithstanding considerable correspondence " * 6, 1.0)
            for i in range(11)]
    community = Community(0, "mid", "", [e.key for e in many])
    entities_csv, relations_csv = build_tables(community, many, rels, max_tokens=1500)
    assert len((entities_csv + relations_csv).encode()) > 1500
    assert count_tokens(entities_csv + relations_csv) <= 1500
    assert len(entities_csv.splitlines()) == 13 and len(relations_csv.splitlines()) == 12


_JSON_TEXT = st.lists(st.sampled_from(list("ab {}[]\"'\\:,`\n") + ["it's", "```", "é"]), max_size=12).map("".join)
_JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | _JSON_TEXT,
                            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_JSON_TEXT, inner, max_size=3),
                            max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_JSON_TEXT, _JSON_VALUES, max_size=5), st.sampled_from(["", " ", "\n"]))
def test_plain_json_answers_read_as_the_balanced_scan_reads_them(obj, pad) -> None:
    import json

    from kbgraph.graph.reports import _balanced_object, _load, _plain_object

    text = pad + json.dumps(obj, ensure_ascii=False) + pad
    fast = _plain_object(text)
    if fast is not None:  # declined answers go the long way, which is what this compares against
        assert fast == _load(_balanced_object(text))


def test_plain_json_with_a_fenced_object_inside_goes_the_long_way() -> None:
    # the long way reads fenced blocks first, and this one holds a (Python-style) object
    from kbgraph.graph.reports import _plain_object

    answer = json.dumps({"title": "```{'a': 1}```", "summary": "s"})
    assert _plain_object(answer) is None
    assert parse_report(answer) is None


def test_a_put_together_report_is_written_again_when_the_order_it_tells_its_members_in_changes() -> None:
    # a deletion elsewhere moves PageRank: the community's rows stay the same, but a put-together
    # report lists its members most central first, so its title and summary change with the order
    from kbgraph.graph.reports import extractive_order
    from kbgraph.index.reports import _report_input_hash

    community = COMMUNITY
    before = [entity(e.key, e.name, e.type, e.description, e.pagerank, e.mention_count)
              for e in ENTITIES if e.key in MEMBERS]
    after = [entity(e.key, e.name, e.type, e.description, 0.5 if e.key == "london" else e.pagerank, e.mention_count)
             for e in ENTITIES if e.key in MEMBERS]
    assert extractive_report(community, before, RELATIONS).title != extractive_report(community, after, RELATIONS).title

    def input_hash(members: list[Entity], by_llm: bool) -> str:
        order = None if by_llm else extractive_order(community, members, RELATIONS)
        return _report_input_hash(members, RELATIONS, by_llm, order)

    assert input_hash(before, by_llm=False) != input_hash(after, by_llm=False)
    # the model's report is not asked again for a PageRank shift: its rows are what it was written from
    assert input_hash(before, by_llm=True) == input_hash(after, by_llm=True)
