"""The kg mode's formulas (the package docstring): what crosses a relation, chunk support, the
specificity of an entity (with the chunk counts it is computed from, read once per graph state),
name overlap, and the ramp by which a seed counts as an anchor. The ppr mode and the chains use
some of them too."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from kbgraph.graph.scores import scan_entities
from kbgraph.search.graph_cache import LISTING_ENTRIES, GraphState, cached
from kbgraph.search.kg.rows import Node
from kbgraph.store.base import DocStore
from kbgraph.store.index_files import array_strings, strings_array


def hop_factor(weight: float, max_weight: float, decay: float) -> float:
    """How much of an entity's score crosses one relation: ``decay`` for its heaviest relation,
    down to half that for the lightest, so weak co-occurrences still lead somewhere."""
    return float(hop_factors(np.array([weight], dtype=np.float64), np.array([max_weight], dtype=np.float64), decay)[0])


def hop_factors(weights: np.ndarray, max_weights: np.ndarray, decay: float) -> np.ndarray:
    """``hop_factor`` of many relations at once."""
    usable = (max_weights > 0) & (weights > 0)
    share = np.divide(weights, max_weights, out=np.zeros(len(weights)), where=usable)
    return decay * (0.5 + 0.5 * np.minimum(1.0, share))


def _clipped(values: np.ndarray) -> np.ndarray:
    return np.clip(values, 0.0, 1.0)


def chunk_support(items: Iterable[tuple[float, Sequence[str]] | tuple[float, Sequence[str], dict[str, float]]],
                  power: float = 1.0, normalize: bool = True) -> dict[str, float]:
    """Chunk id -> summed ``score ** power`` of the items (entities, relations) citing it, each
    spread by 1/log2(1 + number of chunks it cites), normalized so the best chunk gets 1.

    An item may carry its prominence per chunk (chunk id -> weight, e.g. how many sentences of the
    chunk mention the entity): each chunk then gets the item's share times weight / best weight,
    so the passage *about* an entity outranks the passages that name it once in passing.

    With ``power`` > 1 a chunk holding one entity the question is surely about outranks a chunk
    holding many that each match a word of it: summed plain scores reward a chunk for naming many
    loosely relevant things (a registry of other guilds) over the one thing the question asks for.
    """
    support: dict[str, float] = defaultdict(float)
    for item in items:
        score, chunk_ids = item[0], item[1]
        if score <= 0 or not chunk_ids:
            continue
        share = score ** power / math.log2(1 + len(chunk_ids))
        prominence = item[2] if len(item) > 2 else None  # type: ignore[misc]
        top = max((prominence.get(c, 0.0) for c in chunk_ids), default=0.0) if prominence else 0.0
        for cid in chunk_ids:
            support[cid] += share * (prominence.get(cid, 0.0) / top if top > 0 else 1.0)
    if not normalize:
        return dict(support)
    top = max(support.values(), default=0.0)
    return {cid: s / top for cid, s in support.items()} if top > 0 else {}


def specificity(chunks: int, total: int) -> float:
    """IDF-like specificity in (0, 1] of an entity cited by ``chunks`` of ``total`` chunks:
    ``log(1 + total/chunks) / log(1 + total)`` is 1 for an entity of one chunk and falls to
    log 2 / log(1 + total) for one in every chunk (never 0: a question may still ask about a hub)."""
    total = max(1, total)
    chunks = min(max(1, chunks), total)
    return math.log1p(total / chunks) / math.log1p(total)


@dataclass(frozen=True)
class Citations:
    """How many chunks cite each entity, and how many chunks the graph's entities cite in all; and
    each entity's PageRank (``ranks``: the kg mode ranks a pool of entities by it before reading
    any of their rows, ``retrieval._ranked_pool``)."""

    counts: dict[Node, int]
    total: int
    ranks: dict[Node, float] = field(default_factory=dict)

    def specificity(self, node: Node) -> float:
        return specificity(self.counts.get(node, 1), self.total)

    # kept on disk by graph_cache.cached (a new process reads them instead of scanning every entity)
    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"nodes": strings_array([f"{kb}\x1f{key}" for kb, key in self.counts]),
                "counts": np.fromiter(self.counts.values(), dtype=np.int64, count=len(self.counts)),
                "ranks": np.fromiter((self.ranks.get(n, 0.0) for n in self.counts), dtype=np.float64,
                                     count=len(self.counts)),
                "total": np.array([self.total], dtype=np.int64)}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Citations:
        nodes = [tuple(n.split("\x1f", 1)) for n in array_strings(arrays["nodes"])]
        return cls(dict(zip(nodes, arrays["counts"].tolist())), int(arrays["total"][0]),
                   dict(zip(nodes, arrays["ranks"].tolist())))  # a file without ranks: KeyError, read again

    @property
    def rows(self) -> int:
        return len(self.counts)


def entity_citations(store: DocStore, tenant: str, kb_ids: Sequence[str], state: GraphState) -> Citations:
    """The chunk counts and PageRank of every entity, read once per graph state (one scan of the
    entity rows; a PageRank refresh stamps the state)."""
    def read() -> Citations:
        counts: dict[Node, int] = {}
        ranks: dict[Node, float] = {}
        chunks: set[str] = set()
        # PageRank from the score rows (kbgraph/graph/scores.py), joined as the rows are scanned
        for doc in scan_entities(store, tenant, kb_ids, fields=["id", "kb_id", "entity_key_kwd", "chunk_ids_kwd",
                                                                "pagerank_flt"]):
            cited = doc.get("chunk_ids_kwd") or []
            node = (doc.get("kb_id", ""), doc.get("entity_key_kwd", ""))
            counts[node] = len(cited)
            ranks[node] = float(doc.get("pagerank_flt", 0.0) or 0.0)
            chunks.update(cited)
        return Citations(counts, len(chunks), ranks)

    return cached(store, ("citations", tenant, tuple(sorted(kb_ids))), state, read, LISTING_ENTRIES,
                  persist=Citations)


def name_match(query_tokens: Sequence[str], name_tokens: str) -> float:
    """Jaccard overlap of a query entity's tokens with an entity's name (and alias) tokens."""
    q, e = set(query_tokens), set(name_tokens.split())
    return len(q & e) / len(q | e) if q and e else 0.0


def ramp(score: float, low: float, high: float) -> float:
    """0 up to ``low``, 1 from ``high`` on, linear between: a seed's weight as an anchor, so that a
    small change of its score makes a small change of the ranking (``low == high`` is a cut)."""
    if score >= high:
        return 1.0
    if score <= low:
        return 0.0
    return (score - low) / (high - low)


def present(weight: float, presence: float) -> float:
    """How much a fact of an anchor of this weight sets the bar of the fact filter: fully from
    ``presence`` on (a fact of an anchor at 0.8 is as much the question's best fact as one at 1)."""
    return min(1.0, weight / presence) if presence > 0 else float(weight > 0)
