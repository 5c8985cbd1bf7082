"""One entry point for every retrieval mode: naive | kg | ppr | global | mix.

``mix`` (the default when a knowledge base has a graph) runs naive hybrid chunk search, the chains
of the ppr part and `kg` retrieval. Its chunks are naive's, in naive's order, with the later hops of
the question that passage chains reach on evidence (``kbgraph.search.chains``) placed after the
passages that match the question: those never move down, and a chunk only the graph reaches (the
second hop of a question) takes the place of naive's weaker hits. Its context holds the graph's
entities, relations and reports as well as the chunks. ``kg`` fuses that ranking with its own graph
ranking and the bridge passages of the question's facts by weighted reciprocal rank
(``kbgraph.search.fusion``), under the passages that match the question; ``ppr`` is the chains'
ranking with the entities of a Personalized PageRank walk (the kg and mix modes take theirs from
the kg part, and walk no graph).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from kbgraph.config import Settings
from kbgraph.graph.extract.base import DEFAULT_ENTITY_TYPES, Extractor
from kbgraph.llm.base import CancelCheck, ChatModel, Embedder
from kbgraph.search.chunks import ChunkHit, ChunkQuery, chunk_request, chunk_results, embed_question, retrieve_chunks
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
from kbgraph.search.batch import SearchBatch
from kbgraph.search.fusion import FusionParams, fuse_rankings, naive_chunk
from kbgraph.search.global_search import GlobalParams, KeyPoint, global_search
from kbgraph.search.graph_cache import GraphState, graph_state
from kbgraph.search.kg.params import KGParams
from kbgraph.search.kg.seeds import ask_seed_searches
from kbgraph.search.kg.retrieval import GraphResult, ask_kg_searches, retrieve_kg
from kbgraph.search.ppr_search import PPRParams, PPRResult, chunk_row, retrieve_ppr
from kbgraph.search.query_analysis import QueryAnalysis, analyze_query
from kbgraph.store.base import DocStore, Hit, SearchRequest
from kbgraph.utils.beside import side_by_side

Mode = Literal["naive", "kg", "ppr", "global", "mix"]
MODES: tuple[str, ...] = ("naive", "kg", "ppr", "global", "mix")
GRAPH_MODES = frozenset({"kg", "ppr", "global", "mix"})


@dataclass(frozen=True)
class MixParams:
    """How the graph modes rank chunks (``kbgraph.search.fusion``).

    Every graph mode starts from the ppr part's ranking: naive's own order with the passages its
    chains reach on evidence placed after the passages that match the question
    (``kbgraph.search.chains``). ``mix`` takes it as it is (kg support fused in at ``kg_weight``:
    at 0 kg gives mix its context only); ``kg`` fuses it (weight 1) with kg support at
    ``kg_mode_weight`` and the bridge passages of the question's facts at ``bridge_weight``, under
    the passages that match the question, which keep their places (``leading``). Measured on the
    whole suite with the local embedder (bench/README.md, "kg support in mix"): kg support at 0.25
    in mix lifts the larger chat logs +2.9 points recall@5 (their held-out half +5.0), MuSiQue and
    the larger Chinese news +0.9, costs the small chat logs one question (-1.0) and HotpotQA -0.5,
    and leaves the other sets and every hits@1 as they were; at 0.5 the small chat logs fall to
    naive's + 1.
    """

    candidates: int = 32  # naive and graph chunks considered before fusing
    # BM25 and kNN candidates of the graph modes' chunk search (at most the settings' top_k): their
    # page is ``candidates`` long, not a RAGFlow page of top_k. 1,024, 256 and 128 gave the same
    # rankings on every evaluation set; 256 took ~4 ms off a kg query on Elasticsearch (fewer kNN
    # candidates to score and fewer hits to send and fuse) and nothing on the embedded store
    # (bench/README.md, "The session of 2026-11-30 (2)")
    chunk_pool: int = 256
    kg_weight: float = 0.25
    # kg mode: the passages the question's facts lead to (kg.facts.bridge_scores). mix takes no bridges: the
    # chains lead there only from a passage stating the fact, where a bridge followed a fact stated
    # anywhere (the sample corpus's flood question: the Long Quay to the Glass Tower's page)
    bridge_weight: float = 0.25
    # the kg mode (asked for by name): its support beside the chains' ranking; kg's own order is too
    # coarse to lead (at 1.25 kg mode's recall@5 fell under naive's on HotpotQA and the Chinese sets)
    kg_mode_weight: float = 0.5
    fusion: FusionParams = field(default_factory=FusionParams)
    # the graph's part of the fusion (kg and mix) counts only what the graph adds: once the question's
    # entities are anchored, entities and relations that merely share the question's words (the
    # lexical evidence the naive part already holds) get this weight in it (KGParams.loose_weight)
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


@dataclass
class _GraphStart:
    """What a graph query starts from: the question's vector and analysis, the graph state it reads
    (``state()``, waited for when called; ``read_state`` when it is already read), and its chunk
    search's hits (``chunk_hits()``, waited for when called)."""

    vector: np.ndarray
    analysis: QueryAnalysis
    state: Callable[[], GraphState]
    chunk_hits: Callable[[], list[Hit]]
    read_state: GraphState | None = None


def _start_graph_query(store: DocStore, tenant: str, kb_ids: Sequence[str], batch: SearchBatch,
                       embed: Callable[[], np.ndarray], analyse: Callable[[], QueryAnalysis],
                       chunk_search: Callable[[np.ndarray], SearchRequest], *, analysis_waits: bool) -> _GraphStart:
    """The start of a graph query. In process (SQLite) one step after the other, the chunk search
    asked of ``batch`` with the graph searches. When the store's reads wait on a network, the graph
    state read and the analysis (a model call, or the nlp extractor) start at once and the chunk
    search as soon as the question's vector is there: the query's heaviest search (``chunk_pool``
    BM25 and kNN candidates, and its rows) runs on the store while the analysis runs here and the
    graph searches go out, instead of holding each of them up; and the graph searches need not wait
    for the graph state (``ask_kg_searches`` without one asks for reports whatever the graph holds):
    a round trip fewer one after the other.

    ``analysis_waits``: the analysis waits on a network (a chat model's call), so in process too it
    goes beside the embedding. Without one it is the offline extractor's (~0.4 ms of Python): a
    thread buys nothing and costs a thread start and the hand-overs of the GIL (kg p50 -4.6 to
    -6.1 ms, ppr -2.4 to -3.2 ms without it, per question on the 100k-entity benchmark:
    bench/README.md, issue 41 item 5)."""
    if not store.remote:
        vector, analysis = side_by_side(embed, analyse, concurrent=analysis_waits, name="kbgraph-query-analysis")
        state = graph_state(store, tenant, kb_ids)
        asked = batch.ask(chunk_search(vector))
        return _GraphStart(vector, analysis, lambda: state, lambda: batch.hits(asked), state)
    pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="kbgraph-query-start")
    try:
        reading = pool.submit(graph_state, store, tenant, kb_ids)
        analysing = pool.submit(analyse)
        vector = embed()
        request = chunk_search(vector)
        searching = pool.submit(lambda: store.search(tenant, request).hits)
        return _GraphStart(vector, analysing.result(), reading.result, searching.result)
    finally:
        pool.shutdown(wait=False)  # the chunk search goes on: chunk_hits() waits for it


def _graph_result(result: RetrievalResult, naive: list[ChunkHit], found_ppr: PPRResult | None,
                  graph: GraphResult | None, mix: MixParams, top_n: int, budget: Budget) -> None:
    """A graph mode's result from its parts: ppr's chunks are naive's order with the passages its
    chains reach placed among them; mix and kg fuse that ranking with the kg part's (see the
    module docstring and ``MixParams``)."""
    graph_lists: list[tuple[list[RetrievedChunk], float]] = []
    anchor: list[ChunkHit] | list[RetrievedChunk] = naive
    if found_ppr is not None:
        result.entities = found_ppr.entities
        anchor = found_ppr.chunks
        if result.mode == "ppr":
            result.chunks = fit_chunks(found_ppr.chunks[:top_n], budget.chunks)
            result.context = render_context(result.chunks, result.entities)
    if graph is not None:
        result.entities, result.relations, result.reports = graph.entities, graph.relations, graph.reports
        weight = mix.kg_weight if result.mode == "mix" else mix.kg_mode_weight
        if weight > 0:
            graph_lists.append((graph.chunks, weight))
        if result.mode == "kg" and mix.bridge_weight > 0 and graph.bridges:
            graph_lists.append((graph.bridges, mix.bridge_weight))
        fused = leading(fuse_rankings(anchor, graph_lists, mix.fusion), found_ppr.matching if found_ppr else [])
        result.chunks = fit_chunks(fused[:top_n], budget.chunks)
        result.context = render_context(result.chunks, result.entities, result.relations, result.reports)


def leading(ranked: list[RetrievedChunk], matching: Sequence[str]) -> list[RetrievedChunk]:
    """``ranked`` with the naive hits that match the question first, in naive's order: graph
    evidence orders what follows them, never pushes one of them down."""
    first = {cid: i for i, cid in enumerate(matching)}
    return sorted(ranked, key=lambda c: first.get(c.chunk_id, len(first)))


def _side_by_side(ppr_part: Callable[[], PPRResult] | None, kg_part: Callable[[], GraphResult] | None,
                  concurrent: bool) -> tuple[PPRResult | None, GraphResult | None]:
    """The ppr and kg parts of a query, on two threads when the store's reads wait on a network
    (their round trips then overlap)."""
    return side_by_side(lambda: ppr_part() if ppr_part is not None else None,
                        lambda: kg_part() if kg_part is not None else None,
                        concurrent=concurrent and ppr_part is not None and kg_part is not None, name="kbgraph-kg-part")


def _ppr_params(given: PPRParams | None, mix: MixParams, top_n: int, budget: Budget, s: Settings) -> PPRParams:
    """The ppr part's parameters in a query: a page of candidates for fusion, no chunk budget (the
    fused page is fitted), the chains told the page asked for."""
    params = replace(given or PPRParams(), chunk_top_n=max(top_n, mix.candidates), budget=replace(budget, chunks=1 << 30))
    return replace(params, chains=replace(params.chains, page=top_n)) if params.chains is not None else params


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
    if mode in ("naive", "global"):
        vector = embed_question(embedder, question)
    result = RetrievalResult(mode=mode, question=question)

    def chunk_query(limit: int, top_k: int = s.top_k) -> ChunkQuery:
        return ChunkQuery(question=question, kb_ids=list(kb_ids), top_n=limit, top_k=top_k,
                          vector_similarity_weight=s.hybrid_vector_weight,
                          similarity_threshold=s.similarity_threshold, doc_ids=tuple(doc_ids), aggregate=False)

    if mode == "global":
        found = global_search(store, tenant, kb_ids, question, chat, vector, params=global_params or GlobalParams(),
                              language=s.language, empty_response=s.empty_response, cancel=cancel)
        result.answer, result.points, result.reports, result.context = (
            found.answer, found.points, found.reports, found.context)
    elif mode == "naive":
        naive = retrieve_chunks(store, tenant, chunk_query(top_n), embedder, question_vector=vector).chunks
        result.chunks = fit_chunks([naive_chunk(h) for h in naive], budget.chunks)
        result.context = render_context(result.chunks)
    else:
        mix = mix_params or MixParams()
        ppr = _ppr_params(ppr_params, mix, top_n, budget, s) if mode in ("ppr", "mix", "kg") else None
        kg = replace(kg_params or KGParams(), chunk_top_n=max(top_n, mix.candidates),
                     budget=replace(budget, chunks=1 << 30), loose_weight=mix.graph_loose_weight) \
            if mode in ("kg", "mix") else None
        # one graph state and one batch of searches for the query's graph parts: the searches that
        # depend on nothing found first go to the store together (with the chunk search, or beside
        # it: _start_graph_query), and the kg part's seed and fact searches are the ppr part's,
        # answered once
        batch = SearchBatch(store, tenant)
        query = chunk_query(max(top_n, mix.candidates), min(s.top_k, mix.chunk_pool))
        given = analysis
        start = _start_graph_query(
            store, tenant, kb_ids, batch, lambda: embed_question(embedder, question),
            lambda: given if given is not None else analyze_query(question, chat, extractor, entity_types=entity_types),
            lambda v: chunk_request(query, v, embedder.similarity_floor),
            analysis_waits=given is None and chat is not None)
        vector, analysis = start.vector, start.analysis
        result.analysis = analysis
        if ppr is not None:
            ask_seed_searches(batch, kb_ids, analysis, vector, ppr.kg, embedder)
        if kg is not None:
            ask_kg_searches(batch, store, tenant, kb_ids, analysis, vector, kg, embedder, start.read_state)
        batch.send()
        state = start.state()

        def naive_hits() -> list[ChunkHit]:
            return chunk_results(query, start.chunk_hits()).chunks

        def kg_part() -> GraphResult:
            assert kg is not None
            # the chunk search's rows are wanted last of all: the kg part starts without waiting for it
            return retrieve_kg(store, tenant, kb_ids, analysis, vector, kg, embedder, batch, state,
                               with_chunks=mode == "kg" or mix.kg_weight > 0,
                               known_chunks=lambda: {h.chunk_id: chunk_row(h) for h in naive_hits()})

        def ppr_part() -> PPRResult:
            assert ppr is not None
            # the kg and mix modes take their entities from the kg part: their ppr part needs no walk
            return retrieve_ppr(store, tenant, kb_ids, analysis, vector, naive_hits(), ppr, embedder, batch=batch,
                                state=state, walk=mode == "ppr")

        found_ppr, graph = _side_by_side(ppr_part if ppr is not None else None, kg_part if kg is not None else None,
                                         store.remote)
        _graph_result(result, naive_hits(), found_ppr, graph, mix, top_n, budget)
    result.citations = citation_map(result.chunks)
    result.elapsed_ms = round((time.perf_counter() - started) * 1000.0, 2)
    return result
