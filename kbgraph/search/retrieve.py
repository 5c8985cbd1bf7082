"""One entry point for every retrieval mode: naive | kg | ppr | global | mix.

``mix`` (the default when a knowledge base has a graph) runs naive hybrid chunk search and `kg`
retrieval and fuses their chunk lists by normalized score, so a chunk found by both rises and a
chunk only the graph reaches (the second hop of a question) can enter the list; its context
holds the graph's entities, relations and reports as well as the chunks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from kbgraph.config import Settings
from kbgraph.graph.extract import DEFAULT_ENTITY_TYPES, Extractor
from kbgraph.llm.base import CancelCheck, ChatModel, Embedder
from kbgraph.search.chunks import ChunkHit, ChunkQuery, embed_question, retrieve_chunks
from kbgraph.search.context import (
    Budget,
    EntityHit,
    RelationHit,
    ReportHit,
    RetrievedChunk,
    citation_map,
    fit_chunks,
    render_context,
    to_plain,
)
from kbgraph.search.global_search import GlobalParams, KeyPoint, global_search
from kbgraph.search.kg import KGParams, retrieve_kg
from kbgraph.search.ppr_search import PPRParams, retrieve_ppr
from kbgraph.search.query_analysis import QueryAnalysis, analyze_query
from kbgraph.store.base import DocStore

Mode = Literal["naive", "kg", "ppr", "global", "mix"]
MODES: tuple[str, ...] = ("naive", "kg", "ppr", "global", "mix")
GRAPH_MODES = frozenset({"kg", "ppr", "global", "mix"})


@dataclass(frozen=True)
class MixParams:
    naive_weight: float = 0.25  # the graph's chunk support gets the rest
    candidates: int = 32  # naive and graph chunks considered before fusing
    # the graph's part of the fusion counts only what the graph adds: once the question's entities are
    # anchored, entities and relations that merely share the question's words (the lexical evidence
    # the naive part already holds) get this weight in it (KGParams.loose_weight)
    graph_loose_weight: float = 0.25


@dataclass
class RetrievalResult:
    mode: str
    question: str
    chunks: list[RetrievedChunk] = field(default_factory=list)
    entities: list[EntityHit] = field(default_factory=list)
    relations: list[RelationHit] = field(default_factory=list)
    reports: list[ReportHit] = field(default_factory=list)
    context: str = ""
    citations: dict[int, str] = field(default_factory=dict)
    answer: str | None = None  # global mode only
    points: list[KeyPoint] = field(default_factory=list)  # global mode only
    analysis: QueryAnalysis | None = None
    elapsed_ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        data = to_plain(self)
        data["citations"] = {str(k): v for k, v in self.citations.items()}
        return data


def naive_chunk(hit: ChunkHit) -> RetrievedChunk:
    return RetrievedChunk(chunk_id=hit.chunk_id, kb_id=hit.kb_id, doc_id=hit.doc_id, doc_name=hit.doc_name,
                          content=hit.content, position=hit.position, score=hit.similarity,
                          similarity=hit.similarity, vector_similarity=hit.vector_similarity,
                          term_similarity=hit.term_similarity, sources=["naive"])


def fuse_chunks(naive: Sequence[ChunkHit], graph: Sequence[RetrievedChunk], naive_weight: float) -> list[RetrievedChunk]:
    """Naive and graph chunks ranked by ``w * naive/max_naive + (1 - w) * graph/max_graph``."""
    top_naive = max((h.similarity for h in naive), default=0.0) or 1.0
    top_graph = max((c.score for c in graph), default=0.0) or 1.0
    merged: dict[str, RetrievedChunk] = {}
    for hit in naive:
        merged[hit.chunk_id] = naive_chunk(hit)
    for chunk in graph:
        known = merged.get(chunk.chunk_id)
        if known is None:
            merged[chunk.chunk_id] = replace(chunk, similarity=None, sources=list(chunk.sources))
        else:
            known.graph_score = chunk.graph_score
            known.sources = known.sources + [s for s in chunk.sources if s not in known.sources]
    for chunk in merged.values():
        naive_part = (chunk.similarity or 0.0) / top_naive
        graph_part = (chunk.graph_score or 0.0) / top_graph
        chunk.score = round(naive_weight * naive_part + (1.0 - naive_weight) * graph_part, 6)
    return sorted(merged.values(), key=lambda c: (-c.score, c.chunk_id))


def retrieve(store: DocStore, tenant: str, kb_ids: Sequence[str], question: str, mode: str = "mix", *,
             embedder: Embedder, chat: ChatModel | None = None, settings: Settings | None = None,
             top_n: int | None = None, extractor: Extractor | None = None,
             entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES, doc_ids: Sequence[str] = (),
             budget: Budget | None = None, kg_params: KGParams | None = None, ppr_params: PPRParams | None = None,
             global_params: GlobalParams | None = None, mix_params: MixParams | None = None,
             analysis: QueryAnalysis | None = None, cancel: CancelCheck | None = None) -> RetrievalResult:
    """Retrieve for ``question`` from the knowledge bases ``kb_ids`` in ``mode``.

    ``chat`` is used for query analysis (graph modes; the `nlp` extractor stands in without one)
    and is required by ``global``. ``doc_ids`` narrows naive chunk search only.
    """
    if mode not in MODES:
        raise ValueError(f"unknown retrieval mode {mode!r}; expected one of {', '.join(MODES)}")
    started = time.perf_counter()
    s = settings or Settings()
    top_n = top_n or s.top_n
    budget = budget or Budget()
    vector: np.ndarray = embed_question(embedder, question)
    result = RetrievalResult(mode=mode, question=question)

    def naive_hits(limit: int) -> list[ChunkHit]:
        query = ChunkQuery(question=question, kb_ids=list(kb_ids), top_n=limit, top_k=s.top_k,
                           vector_similarity_weight=s.vector_similarity_weight,
                           similarity_threshold=s.similarity_threshold, doc_ids=tuple(doc_ids), aggregate=False)
        return retrieve_chunks(store, tenant, query, embedder, question_vector=vector).chunks

    if mode == "global":
        found = global_search(store, tenant, kb_ids, question, chat, vector, params=global_params or GlobalParams(),
                              language=s.language, empty_response=s.empty_response, cancel=cancel)
        result.answer, result.points, result.reports, result.context = (
            found.answer, found.points, found.reports, found.context)
    elif mode == "naive":
        result.chunks = fit_chunks([naive_chunk(h) for h in naive_hits(top_n)], budget.chunks)
        result.context = render_context(result.chunks)
    else:
        result.analysis = analysis or analyze_query(question, chat, extractor, entity_types=entity_types)
        if mode == "ppr":
            params = ppr_params or PPRParams()
            params = replace(params, chunk_top_n=top_n, budget=budget)
            found_ppr = retrieve_ppr(store, tenant, kb_ids, result.analysis, vector,
                                     naive_hits(max(top_n, (mix_params or MixParams()).candidates)), params, embedder)
            result.chunks, result.entities = found_ppr.chunks, found_ppr.entities
            result.context = found_ppr.context
        else:
            kg = kg_params or KGParams()
            mix = mix_params or MixParams()
            if mode == "kg":
                kg = replace(kg, chunk_top_n=top_n, budget=budget)
            else:  # the fused list is fitted to the chunk budget, not the graph's candidates
                kg = replace(kg, chunk_top_n=max(top_n, mix.candidates), budget=replace(budget, chunks=1 << 30),
                             loose_weight=mix.graph_loose_weight)
            graph = retrieve_kg(store, tenant, kb_ids, result.analysis, vector, kg, embedder)
            result.entities, result.relations, result.reports = graph.entities, graph.relations, graph.reports
            if mode == "kg":
                result.chunks, result.context = graph.chunks, graph.context
            else:
                fused = fuse_chunks(naive_hits(max(top_n, mix.candidates)), graph.chunks, mix.naive_weight)
                result.chunks = fit_chunks(fused[:top_n], budget.chunks)
                result.context = render_context(result.chunks, result.entities, result.relations, result.reports)
    result.citations = citation_map(result.chunks)
    result.elapsed_ms = round((time.perf_counter() - started) * 1000.0, 2)
    return result
