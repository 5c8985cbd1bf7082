"""Extending a stored entity row with one new document's mentions gives exactly the row that
deriving it from all its mentions gives (DESIGN.md principle 1), state included, whatever the
mentions: duplicate fragments, fragments sorting before, between and past the ones the description
shows, descriptions over the budget, with a describer that truncates and with one that summarizes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from hypothesis import given, settings, strategies as st

from kbgraph.graph.derive.entities import _entity_from_facts, derive_entity, extended_facts
from kbgraph.graph.describe import Describer
from kbgraph.llm.base import Message
from kbgraph.store.records import EntityMention

SENTENCES = [
    "Keeps the lighthouse.",
    "Keeps the lighthouse.",  # the same fragment from two mentions
    "Rowed out to the wreck in the storm of the winter solstice and brought three sailors home.",
    "Was born in Varrow.",
    "Wrote letters to the harbour master about the lamp oil, the broken shutters and the pay.",
    "  Was   born in Varrow. ",  # the same after trimming
    "Sings.",
    "",
    "Is said to have met the Tidewarden Order twice, once in Kestrel Bay and once on the cliffs.",
]
NAMES = ["Mira Castell", "Mira castell", "M. Castell", ""]
TYPES = ["person", "Person", "unknown", "", "organization"]
DOCS = ["doc-a", "doc-b", "doc-c", "doc-d", "doc-e"]


class _SummarizingChat:
    """Stands in for a model: a summary that names its fragments, so a different set shows."""

    def chat(self, messages: Sequence[Message], **_: object) -> str:
        return "summary " + hashlib.sha1(messages[-1].content.encode()).hexdigest()[:12]


mention = st.builds(
    lambda doc, chunk, name, type_, sentence: EntityMention("kb", doc, f"{doc}/chunk{chunk}", "mira castell",
                                                             name, type_, sentence),
    st.sampled_from(DOCS), st.integers(0, 3), st.sampled_from(NAMES), st.sampled_from(TYPES),
    st.sampled_from(SENTENCES))


def _one_per_chunk(mentions: list[EntityMention]) -> list[EntityMention]:
    # a chunk holds one mention of a key (the mention id is the chunk and the key)
    return list({m.chunk_id: m for m in mentions}.values())


def _doc(mentions: Sequence[EntityMention], describe: Describer) -> dict:
    return derive_entity("kb", "mira castell", mentions, describe).to_doc()


@settings(max_examples=400, deadline=None)
@given(mentions=st.lists(mention, min_size=2, max_size=30), budget=st.integers(3, 80),
       summarize=st.booleans(), order=st.permutations(DOCS))
def test_extending_equals_deriving_from_all_mentions(mentions: list[EntityMention], budget: int, summarize: bool,
                                                     order: list[str]) -> None:
    describe = Describer(_SummarizingChat() if summarize else None, max_tokens=budget)  # type: ignore[arg-type]
    mentions = _one_per_chunk(mentions)
    seen: list[EntityMention] = []
    row: dict | None = None
    for doc in order:  # documents arrive one at a time, each merged as it comes
        added = [m for m in mentions if m.doc_id == doc]
        if not added:
            continue
        seen += added
        facts = extended_facts(row, added, describe) if row is not None else None
        if facts is not None:
            row = _entity_from_facts("kb", "mira castell", facts, describe, lambda text: text).to_doc()
            expected = derive_entity("kb", "mira castell", seen, describe, lambda text: text).to_doc()
            assert row == expected
        else:
            row = _doc(seen, describe)
        state = row.get("derivation_with_weight") or {}
        assert "" not in state.get("names", {}) and "" not in state.get("types", {})  # no empty field names


def test_a_frequent_entity_is_extended_while_its_description_is_its_first_fragments() -> None:
    describe = Describer(None, max_tokens=30)
    mentions = [EntityMention("kb", f"doc{n:03d}", f"doc{n:03d}/0", "mira castell", "Mira Castell", "person",
                              f"Mira Castell appears in document {n}.") for n in range(40)]
    row = _doc(mentions[:39], describe)
    assert row["derivation_with_weight"]["next"] is not None  # the budget cut the description short
    facts = extended_facts(row, mentions[39:], describe)
    assert facts is not None and facts.mention_count == 40
    extended = _entity_from_facts("kb", "mira castell", facts, describe, lambda text: text).to_doc()
    assert extended == derive_entity("kb", "mira castell", mentions, describe, lambda text: text).to_doc()


def test_rows_that_cannot_be_extended_are_refused() -> None:
    truncating = Describer(None, max_tokens=12)
    mentions = [EntityMention("kb", f"doc{n}", f"doc{n}/0", "k", "K", "person", f"K did thing number {n} today.")
                for n in range(5)]
    row = _doc(mentions[:4], truncating)
    # the row already cites the document: its old mentions are inside the row
    assert extended_facts(row, [mentions[0]], truncating) is None
    # a summarizing describer would need the fragments past the ones the row shows
    summarizing = Describer(_SummarizingChat(), max_tokens=12)  # type: ignore[arg-type]
    assert extended_facts(row, mentions[4:], summarizing) is None
    # a row whose description is a summary keeps no state
    summarized = _doc(mentions[:4], summarizing)
    assert summarized["content_with_weight"].startswith("summary ") and "derivation_with_weight" not in summarized
    assert extended_facts(summarized, mentions[4:], summarizing) is None
    # rows written before rows kept a state
    old = {k: v for k, v in row.items() if k != "derivation_with_weight"}
    assert extended_facts(old, mentions[4:], truncating) is None
