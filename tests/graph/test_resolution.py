"""Entity resolution: candidate blocking, LLM judgement over the scripted server, merge planning."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from support.scripted_llm import ScriptedLLM

from kbgraph.config import Settings
from kbgraph.graph.resolution import (
    Decision, candidate_pairs, compatible_types, judge_pairs, loose_key, parse_answers, plan_merges,
)
from kbgraph.llm import ChatModel, UsageLedger, build_chat
from kbgraph.store.records import Entity


def entity(key: str, type_: str = "person", name: str | None = None, mentions: int = 1,
           description: str = "") -> Entity:
    return Entity("kb", key, name or key, type_, description, "", "", mention_count=mentions)


def make_chat(llm: ScriptedLLM, settings: Settings, ledger: UsageLedger | None = None) -> ChatModel:
    chat = build_chat(llm.settings(settings), ledger, True, backoff_base=0.01, backoff_max=0.05)
    assert chat is not None
    return chat


# -- candidates --------------------------------------------------------------------------------


def test_loose_keys() -> None:
    assert loose_key("J. Smith") == loose_key("J Smith") == "j smith"
    assert loose_key("The Acme Corp.") == loose_key("ACME") == "acme"
    assert loose_key("Mr. Scrooge") == "scrooge"
    assert loose_key("华为技术有限公司") == "华为技术"
    assert loose_key("The") == "the"  # never strip a name down to nothing


def test_candidates_by_key_ngrams_and_types() -> None:
    entities = [
        entity("j. smith"), entity("j smith"),
        entity("北京大学", "organization"), entity("北京大學", "organisation"),
        entity("jacob marley"), entity("marley", "character"),
        entity("apple", "organization"), entity("apple ", "fruit", name="Apple"),
        entity("paris", "location"), entity("london", "location"),
        entity("acme inc", "organization"), entity("acme", ""),  # an empty type is compatible with any
    ]
    pairs = candidate_pairs(entities, None, max_pairs=100)
    assert ("j smith", "j. smith") in pairs
    assert ("北京大学", "北京大學") in pairs
    assert ("jacob marley", "marley") in pairs  # person ~ character
    assert ("acme", "acme inc") in pairs
    assert not {("apple", "apple "), ("apple ", "apple")} & set(pairs)  # organization vs fruit
    assert ("london", "paris") not in pairs
    assert all(a < b for a, b in pairs)
    # exact loose-key matches rank above n-gram guesses
    assert pairs.index(("j smith", "j. smith")) < pairs.index(("jacob marley", "marley"))
    assert candidate_pairs(list(reversed(entities)), None, max_pairs=100) == pairs
    assert candidate_pairs(entities, None, max_pairs=2) == pairs[:2]
    skipped = candidate_pairs(entities, None, max_pairs=100, skip=[("j. smith", "j smith")])
    assert ("j smith", "j. smith") not in skipped and len(skipped) == len(pairs) - 1


def test_candidates_by_embedding_neighbours() -> None:
    entities = [entity("big apple", "location"), entity("new york city", "location"), entity("tokyo", "location"),
                entity("nyc person")]
    rng = np.random.default_rng(0)
    base = rng.normal(size=32)
    vectors = {"big apple": base + rng.normal(scale=0.05, size=32), "new york city": base,
               "tokyo": rng.normal(size=32), "nyc person": base}
    pairs = candidate_pairs(entities, vectors, max_pairs=10)
    assert pairs == [("big apple", "new york city")]  # "nyc person" is close but a person
    assert candidate_pairs(entities, None, max_pairs=10) == []


def test_compatible_types() -> None:
    assert compatible_types("PERSON", "character")
    assert compatible_types("organization", "Organisation")
    assert compatible_types("unknown", "event")
    assert compatible_types("category", "person")  # the nlp method's catch-all: a name of no known kind
    assert not compatible_types("person", "location")


def test_candidate_blocking_respects_max_pairs() -> None:
    import random
    rng = random.Random(0)
    syllables = ["ka", "lo", "mi", "ren", "tos", "vi", "dar", "el", "sun", "ox", "pe", "qui"]
    names = {" ".join("".join(rng.choice(syllables) for _ in range(3)) for _ in range(2)) for _ in range(20000)}
    entities = [entity(n) for n in sorted(names)]
    pairs = candidate_pairs(entities, None, max_pairs=5000)
    assert len(pairs) <= 5000


# -- judging -----------------------------------------------------------------------------------

PAIR_LINE = re.compile(r"^(\d+)\. A: (.*?) \(", re.MULTILINE)


def responder(body: dict[str, Any]) -> str:
    """Says yes when the two names share their last word, and leaves pairs named 'skip' unanswered."""
    prompt = body["messages"][-1]["content"]
    lines = []
    for n, a_name in PAIR_LINE.findall(prompt):
        b_name = re.search(rf"^{n}\. A: .*\n\s+B: (.*?) \(", prompt, re.MULTILINE).group(1)
        if "skip" in a_name:
            continue
        same = a_name.split()[-1].lower() == b_name.split()[-1].lower()
        lines.append(f"{n}: {'yes' if same else 'no'}")
    return "Here you go:\n" + "\n".join(lines)


def test_judge_pairs(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.responder = responder
    ledger = UsageLedger()
    by_key = {e.key: e for e in [entity("jacob marley", description="A ghost. " * 50), entity("marley"),
                                  entity("bob cratchit"), entity("tiny tim"), entity("skip me"), entity("skip you")]}
    pairs = [("jacob marley", "marley"), ("bob cratchit", "tiny tim"), ("skip me", "skip you"),
             ("marley", "tiny tim"), ("bob cratchit", "marley")]
    decisions = judge_pairs(make_chat(scripted_llm, settings, ledger), pairs, by_key, batch_size=2)
    assert scripted_llm.counts["chat"] == 3 and ledger.by_phase["resolution"].calls == 3
    assert decisions == [Decision("jacob marley", "marley", True), Decision("bob cratchit", "tiny tim", False),
                         Decision("marley", "tiny tim", False), Decision("bob cratchit", "marley", False)]
    prompt = scripted_llm.requests[0]["body"]["messages"][-1]["content"]
    assert "1. A: jacob marley (person): A ghost." in prompt and "…" in prompt  # descriptions are cut short


def test_parse_answers() -> None:
    answer = ("<noise>\n1: yes\n2. No\n**3**: YES\n4) no\n5 - same\nPair 6: false\n7: yes\n7: no\n9: yes\n"
              "10: maybe\n8：是")
    assert parse_answers(answer, 9) == {1: True, 2: False, 3: True, 4: False, 5: True, 6: False, 8: True, 9: True}
    assert parse_answers("", 3) == {} and parse_answers("1: yes", 0) == {}


def test_decision_pairs_are_sorted() -> None:
    assert Decision("b", "a", True) == Decision("a", "b", True)


# -- merge planning ----------------------------------------------------------------------------


def test_plan_merges_union_find() -> None:
    decisions = [Decision("a", "b", True), Decision("c", "b", True), Decision("d", "e", True),
                 Decision("a", "f", False), Decision("x", "f", True)]
    assert plan_merges(decisions) == {"b": "a", "c": "a", "e": "d", "x": "f"}  # canonical = smallest key
    # dropping a decision undoes its merge
    assert plan_merges(decisions[1:]) == {"c": "b", "e": "d", "x": "f"}
    assert plan_merges([]) == {}


def test_plan_merges_respects_cannot_link() -> None:
    decisions = [Decision("a", "b", True), Decision("b", "c", True), Decision("a", "c", False)]
    merges = plan_merges(decisions)
    assert merges == {"b": "a"}  # joining c would put a and c together, which was judged wrong
    assert plan_merges(list(reversed(decisions))) == merges


@pytest.mark.parametrize("count", [2, 50])
def test_plan_merges_chain(count: int) -> None:
    keys = [f"k{i:03d}" for i in range(count)]
    decisions = [Decision(keys[i], keys[i + 1], True) for i in range(count - 1)]
    merges = plan_merges(decisions)
    assert set(merges) == set(keys[1:]) and set(merges.values()) == {keys[0]}
