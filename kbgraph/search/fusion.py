"""Fusing the naive chunk ranking with graph rankings so that the graph never makes answers worse.

Graph scores and hybrid search scores live on different scales (PPR mass, summed entity support,
BM25 + cosine), and a linear mix of normalized scores lets one confident graph signal (a hub entity
cited by every document) push the lexically relevant chunks out of the page. Weighted reciprocal
rank fusion uses ranks only:

    fused(c) = sum over rankings L of  w_L / (k + rank_L(c))        (rank from 1)

with the naive ranking at weight 1 and each graph ranking at its own weight, so a chunk the graph
and the question's words agree on rises, a chunk only the graph reaches (the second hop) can enter
the page, and the naive ranking anchors the order: a graph score however large moves a chunk by
ranks, never past the whole naive page (the held-out chat logs lost 30 points of recall@5 to a
linear score mix). Weak graph support is cut before ranking (``graph_floor``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kbgraph.search.chunks import ChunkHit
from kbgraph.search.context import RetrievedChunk


@dataclass(frozen=True)
class FusionParams:
    rrf_k: float = 5.0  # small: the first ranks of each list matter most (tuned on the dev sets and our own)
    # graph chunks scoring under this share of their list's best are left out of its ranking: weak
    # graph support is mostly the question's words echoed by loosely matched entities, which the
    # naive ranking already holds, and as ranks they would count like real evidence
    graph_floor: float = 0.1


def naive_chunk(hit: ChunkHit) -> RetrievedChunk:
    return RetrievedChunk(chunk_id=hit.chunk_id, kb_id=hit.kb_id, doc_id=hit.doc_id, doc_name=hit.doc_name,
                          content=hit.content, position=hit.position, score=hit.similarity,
                          similarity=hit.similarity, vector_similarity=hit.vector_similarity,
                          term_similarity=hit.term_similarity, sources=["naive"])


def rank_fusion(rankings: Sequence[Sequence[str]], weights: Sequence[float], k: float) -> dict[str, float]:
    """Chunk id -> weighted reciprocal-rank score over ``rankings`` (each best first, ids distinct)."""
    if len(rankings) != len(weights):
        raise ValueError("one weight per ranking")
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights):
        for rank, cid in enumerate(ranking, start=1):
            fused[cid] = fused.get(cid, 0.0) + weight / (k + rank)
    return fused


def supported(ranked: Sequence[RetrievedChunk], floor: float) -> list[str]:
    """The ids of the chunks scoring at least ``floor`` times the best, in order."""
    top = max((c.score for c in ranked), default=0.0)
    return [c.chunk_id for c in ranked if c.score >= floor * top]


def fuse_rankings(naive: Sequence[ChunkHit | RetrievedChunk], graph: Sequence[tuple[Sequence[RetrievedChunk], float]],
                  params: FusionParams = FusionParams()) -> list[RetrievedChunk]:
    """The naive hits (weight 1; or a ranking that keeps naive's order, as ppr's does) and each graph
    chunk list (at its weight) fused by rank.

    A returned chunk keeps its naive similarity parts where naive found it and the best graph score
    of the lists that hold it; ``score`` is the fused score scaled so the first chunk has 1.
    """
    chunks: dict[str, RetrievedChunk] = {
        h.chunk_id: replace(h, sources=list(h.sources)) if isinstance(h, RetrievedChunk) else naive_chunk(h)
        for h in naive}
    for ranked, _ in graph:
        for chunk in ranked:
            known = chunks.get(chunk.chunk_id)
            if known is None:
                chunks[chunk.chunk_id] = replace(chunk, similarity=None, sources=list(chunk.sources))
                continue
            if chunk.graph_score is not None:
                known.graph_score = max(known.graph_score or 0.0, chunk.graph_score)
            known.sources = known.sources + [s for s in chunk.sources if s not in known.sources]
    naive_order = [h.chunk_id for h in naive]
    fused = rank_fusion([naive_order, *[supported(ranked, params.graph_floor) for ranked, _ in graph]],
                        [1.0, *[w for _, w in graph]], params.rrf_k)
    top = max(fused.values(), default=0.0) or 1.0
    out = []
    ties = _tie_breaks(naive_order, graph, chunks)
    for cid in sorted(fused, key=lambda cid: (-fused[cid], ties[cid])):
        chunk = chunks[cid]
        chunk.score = round(fused[cid] / top, 6)
        out.append(chunk)
    return out


def _tie_breaks(naive_order: Sequence[str], graph: Sequence[tuple[Sequence[RetrievedChunk], float]],
                chunks: dict[str, RetrievedChunk]) -> dict[str, tuple]:
    """What orders chunks of equal fused score: naive's rank (the anchor), then the best rank a graph
    list gives, then the document's name and the chunk's place in it. Not the chunk id alone, which
    derives from the document's random id: two builds of one corpus ordered the same ties differently
    (a point of recall@5 on a 105-question set, bench/README.md)."""
    absent = len(chunks)
    naive_rank = {cid: i for i, cid in enumerate(naive_order)}
    graph_rank: dict[str, int] = {}
    for ranked, _ in graph:
        for i, chunk in enumerate(ranked):
            graph_rank[chunk.chunk_id] = min(graph_rank.get(chunk.chunk_id, absent), i)
    return {cid: (naive_rank.get(cid, absent), graph_rank.get(cid, absent), c.doc_name, c.position, cid)
            for cid, c in chunks.items()}
