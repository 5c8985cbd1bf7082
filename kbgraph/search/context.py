"""What every retrieval mode returns, and how it becomes the text put in front of the LLM.

Chunks are cited as ``[ID:n]`` with n counting from 0 in rank order, so the citation map
``{n: chunk_id}`` is a pure function of the ranked chunk list: the same retrieval gives the same
numbers. Entities, relations and reports are listed in their own blocks (CSV-like, one row each)
and are not cited; answers cite the chunks they came from.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from kbgraph.parse.token_count import count_tokens


@dataclass
class RetrievedChunk:
    chunk_id: str
    kb_id: str
    doc_id: str
    doc_name: str
    content: str
    score: float
    position: int = 0
    # the parts the score came from, where known (None: this source did not score the chunk)
    similarity: float | None = None  # the naive hybrid score
    vector_similarity: float | None = None
    term_similarity: float | None = None
    graph_score: float | None = None  # kg support or PPR mass, normalized to [0, 1]
    sources: list[str] = field(default_factory=list)  # "naive" | "kg" | "ppr"


@dataclass
class EntityHit:
    id: str
    kb_id: str
    key: str
    name: str
    type: str
    description: str
    score: float
    pagerank: float = 0.0
    hops: int = 0  # 0: matched by the question; n: reached through n relations
    chunk_ids: list[str] = field(default_factory=list)
    community_ids: list[str] = field(default_factory=list)


@dataclass
class RelationHit:
    id: str
    kb_id: str
    src_key: str
    tgt_key: str
    src_name: str
    tgt_name: str
    description: str
    score: float
    weight: float = 0.0
    keywords: list[str] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)


@dataclass
class ReportHit:
    id: str
    kb_id: str
    level: int
    community: str
    title: str
    content: str
    score: float
    rating: float = 0.0


@dataclass(frozen=True)
class Budget:
    """Token budgets per context section (counted with the chunker's tokenizer)."""

    entities: int = 1500
    relations: int = 1500
    reports: int = 1500
    chunks: int = 6000


T = TypeVar("T")


def within_budget(items: Iterable[T], render: Callable[[T], str], budget: int) -> list[T]:
    """The leading items whose rendered rows fit in ``budget`` tokens together.

    Stops at the first item that does not fit (rather than skipping to smaller ones) so that a
    lower-ranked item is never shown while a better one was dropped. The first item is always
    kept when the budget is positive, so one long description cannot empty a section.
    """
    if budget <= 0:
        return []
    return _leading_that_fit(items, lambda _, item: render(item), budget)


def _leading_that_fit(items: Iterable[T], render: Callable[[int, T], str], budget: int) -> list[T]:
    """The leading items whose blocks (``render(position, item)``) fit in ``budget`` tokens, the
    first always. A token holds at least one byte, so while the blocks' UTF-8 sizes add up to no
    more than the budget nothing needs tokenizing (~40 us a block); after that, counts are exact."""
    kept: list[T] = []
    texts: list[str] = []
    size = 0  # UTF-8 bytes of the kept blocks: a bound on their tokens
    used: int | None = None  # their exact token count, once the bound no longer settles it
    for item in items:
        text = render(len(kept), item)
        if used is None:
            nbytes = len(text.encode("utf-8"))
            if size + nbytes <= budget:
                kept.append(item)
                texts.append(text)
                size += nbytes
                continue
            used = sum(count_tokens(t) for t in texts)
        cost = count_tokens(text)
        if kept and used + cost > budget:
            break
        kept.append(item)
        used += cost
    return kept


def _csv_row(values: Sequence[Any]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(values)
    return out.getvalue().rstrip("\n")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def entity_row(e: EntityHit) -> str:
    return _csv_row([e.name, e.type, f"{e.score:.3f}", _one_line(e.description)])


def relation_row(r: RelationHit) -> str:
    return _csv_row([r.src_name, r.tgt_name, f"{r.score:.3f}", _one_line(r.description)])


def report_block(r: ReportHit) -> str:
    return f"## {r.title}\n{r.content.strip()}"


def chunk_block(n: int, c: RetrievedChunk) -> str:
    return f"[ID:{n}] {c.doc_name}\n{c.content.strip()}"


def citation_map(chunks: Sequence[RetrievedChunk]) -> dict[int, str]:
    return {n: c.chunk_id for n, c in enumerate(chunks)}


def fit_chunks(chunks: Sequence[RetrievedChunk], budget: int) -> list[RetrievedChunk]:
    return _leading_that_fit(chunks, chunk_block, budget)


def render_context(chunks: Sequence[RetrievedChunk], entities: Sequence[EntityHit] = (),
                   relations: Sequence[RelationHit] = (), reports: Sequence[ReportHit] = ()) -> str:
    """The context text. Callers fit each section to its budget first (``within_budget``)."""
    parts: list[str] = []
    if entities:
        parts.append("---- Entities ----\n" + "\n".join(
            [_csv_row(["entity", "type", "score", "description"])] + [entity_row(e) for e in entities]))
    if relations:
        parts.append("---- Relations ----\n" + "\n".join(
            [_csv_row(["source", "target", "score", "description"])] + [relation_row(r) for r in relations]))
    if reports:
        parts.append("---- Community reports ----\n" + "\n\n".join(report_block(r) for r in reports))
    if chunks:
        parts.append("---- Chunks ----\n" + "\n\n".join(chunk_block(n, c) for n, c in enumerate(chunks)))
    return "\n\n".join(parts)


def normalize_scores(scores: dict[str, float]) -> dict[str, float]:
    """Divide by the largest score so the best is 1 (all-zero or empty stays as it is)."""
    top = max(scores.values(), default=0.0)
    if top <= 0:
        return dict(scores)
    return {k: v / top for k, v in scores.items()}


def any_of_scores(*scores: float) -> float:
    """Probabilistic OR of [0, 1] scores: agreement between sources raises the score, never past 1."""
    miss = 1.0
    for s in scores:
        miss *= 1.0 - min(1.0, max(0.0, s))
    return 1.0 - miss


def to_plain(value: Any) -> Any:
    """Dataclasses (and lists/dicts of them) as JSON-ready values."""
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value
