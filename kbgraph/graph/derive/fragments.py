"""The description fragments of a row's mentions, each kept once where it first occurs, in mention
order (so that derivation depends only on the set of mentions), and what is asked of the describer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache

from kbgraph.graph.describe import Describer
from kbgraph.store.records import EntityMention, RelationMention

# Turns (what, name, fragments) into one description; see kbgraph.graph.describe.
Describe = Callable[[str, str, Sequence[str]], str]

Order = tuple[str, str]  # where a fragment first occurs: (doc_id, chunk_id)


def _mention_order(doc_id: str, chunk_id: str) -> Order:
    return (doc_id, chunk_id)


def _most_common(counts: Mapping[str, int], *, avoid: set[str] = frozenset()) -> str:
    counts = {v: c for v, c in counts.items() if v and c > 0}
    preferred = {v: c for v, c in counts.items() if v.lower() not in avoid} or counts
    if not preferred:
        return ""
    # highest count wins; ties go to the lexicographically smallest, so order never matters
    return min(preferred, key=lambda v: (-preferred[v], v))


@lru_cache(maxsize=65536)
def _squeezed(fragment: str) -> str:
    # a frequent entity's fragments are trimmed again every time a new mention re-derives it
    return " ".join(fragment.split())


def _first_fragments(ordered: Sequence[EntityMention] | Sequence[RelationMention]) -> list[tuple[Order, str]]:
    """The mentions' descriptions, trimmed, each kept once where it first occurs, in mention order."""
    seen: set[str] = set()
    out: list[tuple[Order, str]] = []
    for m in ordered:
        text = _squeezed(m.description)
        if text and text not in seen:
            seen.add(text)
            out.append((_mention_order(m.doc_id, m.chunk_id), text))
    return out


def _in_order(mentions: Sequence[EntityMention] | Sequence[RelationMention]) -> list:
    return sorted(mentions, key=lambda m: _mention_order(m.doc_id, m.chunk_id))


def _prefetch_summaries(describe: Describe, inputs: Iterable[tuple[str, str, list[str]]]) -> None:
    # only a describer that can ask the LLM several things at once gains from knowing them ahead
    if isinstance(describe, Describer) and describe.chat is not None and describe.concurrency > 1:
        describe.prefetch(list(inputs))


def _truncates(describe: Describe) -> bool:
    """Whether a description too long for the budget is its first fragments (no LLM summary, or
    the summary left for the KB's summary pass)."""
    return isinstance(describe, Describer) and (describe.chat is None or describe.deferred)


def _pending(describe: Describe, fragments: Sequence[str]) -> bool:
    return isinstance(describe, Describer) and describe.pending(fragments)
