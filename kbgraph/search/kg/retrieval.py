"""``retrieve_kg``, the kg mode's entry point: seeds and the question's facts, expansion along
relations, then the entities, relations, reports and chunks of the result ranked and fitted into
the context's token budgets, and the bridge chunks the facts lead to."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kbgraph.llm.base import Embedder
from kbgraph.parse.tokenize import tokenize_query
from kbgraph.search.context import (
    EntityHit,
    RelationHit,
    ReportHit,
    RetrievedChunk,
    citation_map,
    entity_row,
    fit_chunks,
    relation_row,
    render_context,
    report_block,
    within_budget,
)
from kbgraph.search.batch import SearchBatch, Ticket
from kbgraph.search.graph_cache import Edge, GraphState, entity_scores, graph_state, holds_kind, relation_adjacency
from kbgraph.search.kg.expand import expand
from kbgraph.search.kg.facts import anchor_relations, anchored_facts, bridge_scores
from kbgraph.search.kg.params import KGParams
from kbgraph.search.kg.ranking import rank_entities, rank_relations, rank_reports, relation_rows
from kbgraph.search.kg.rows import (
    ENTITY_FIELDS, RELATION_FIELDS, REPORT_FIELDS, Node, fetch_chunks, kind_request, mention_weights, relation_ends,
)
from kbgraph.search.kg.scoring import chunk_support, entity_citations
from kbgraph.search.kg.seeds import Seeds, ask_seed_searches, seed_entities
from kbgraph.search.query_analysis import QueryAnalysis
from kbgraph.store.base import DocStore, Hit
from kbgraph.store.records import CommunityReport, EntityMention, Relation


@dataclass
class GraphResult:
    # the passages about the entities the question reaches through the facts it asks about, best first
    bridges: list[RetrievedChunk] = field(default_factory=list)
    entities: list[EntityHit] = field(default_factory=list)
    relations: list[RelationHit] = field(default_factory=list)
    reports: list[ReportHit] = field(default_factory=list)
    chunks: list[RetrievedChunk] = field(default_factory=list)
    context: str = ""
    citations: dict[int, str] = field(default_factory=dict)


def retrieve_kg(store: DocStore, tenant: str, kb_ids: Sequence[str], analysis: QueryAnalysis,
                vector: np.ndarray | None, params: KGParams = KGParams(), embedder: Embedder | None = None,
                batch: SearchBatch | None = None, state: GraphState | None = None,
                with_chunks: bool = True) -> GraphResult:
    """``batch``: the query's searches (shared with its ppr part, whose seed and fact searches are
    the same); ``state``: the graph state the query read (read here when not given);
    ``with_chunks=False`` leaves out the chunks the graph supports and the bridges (the mix mode
    does not rank by them: its entities, relations and reports are what it takes)."""
    batch = batch if batch is not None else SearchBatch(store, tenant)
    state = state if state is not None else graph_state(store, tenant, kb_ids)
    question_relations, asked_reports = ask_kg_searches(batch, store, tenant, kb_ids, analysis, vector, params,
                                                        embedder, state)
    seeds = seed_entities(store, tenant, kb_ids, analysis, vector, params, embedder, state, batch)
    anchors = seeds.anchor_weights(params.anchor_low, params.anchor_high)
    about = anchor_relations(store, tenant, kb_ids, anchors, analysis, vector, params, batch)
    facts = anchored_facts(about, anchors)
    citations = entity_citations(store, tenant, kb_ids, state)
    seed_scores = {node: score * citations.specificity(node) ** params.seed_damping
                   for node, score in seeds.scores.items()}
    scores, hops, walked = expand(store, tenant, kb_ids, seed_scores, params,
                                  {rid: score for rid, (score, _) in facts.items()},
                                  relation_adjacency(store, tenant, kb_ids, state), citations)
    entities = _chosen_entities(store, tenant, kb_ids, scores, hops, seeds.docs, params, state)
    relations = _chosen_relations(store, tenant, kb_ids, params, seeds, anchors, facts, walked, entities,
                                  batch.hits(question_relations) if question_relations is not None else [])

    reports = rank_reports(store, tenant, kb_ids, entities, batch.hits(asked_reports), params) \
        if asked_reports is not None else []
    reports = within_budget([r for r in reports if r.score >= params.min_score][:params.report_top_n],
                            report_block, params.budget.reports)

    chunks: list[RetrievedChunk] = []
    bridges: list[RetrievedChunk] = []
    if with_chunks:
        support = _chunk_support(store, tenant, kb_ids, entities, relations, params, state)
        chunks = fit_chunks(fetch_chunks(store, tenant, kb_ids, support, params.chunk_top_n, "kg"), params.budget.chunks)
        bridged = bridge_scores(store, tenant, kb_ids, anchors, about, params, citations, seeds.scores)
        bridges = fetch_chunks(store, tenant, kb_ids, bridged, params.chunk_top_n, "kg")
    return GraphResult(bridges=bridges, entities=entities, relations=relations, reports=reports, chunks=chunks,
                       context=render_context(chunks, entities, relations, reports), citations=citation_map(chunks))


def _chosen_entities(store: DocStore, tenant: str, kb_ids: Sequence[str], scores: dict[Node, float],
                     hops: dict[Node, int], seed_docs: dict[Node, dict], params: KGParams,
                     state: GraphState) -> list[EntityHit]:
    """The best-scored entities, their rows read where the seeds did not, with their PageRank and
    communities (score rows, kept by the graph cache), within the budget."""
    pool = sorted((n for n, s in scores.items() if s >= params.min_score), key=lambda n: (-scores[n], n))
    pool = pool[:max(params.entity_top_n * 4, 32)]
    docs = {n: seed_docs[n] for n in pool if n in seed_docs}
    # the rows not read yet and the score rows not known yet: one read
    entity_scores(store, tenant, kb_ids, state).complete(docs, [n for n in pool if n not in docs], ENTITY_FIELDS)
    entities = rank_entities(scores, hops, docs, params.pagerank_weight)[:params.entity_top_n]
    return within_budget(entities, entity_row, params.budget.entities)


def ask_kg_searches(batch: SearchBatch, store: DocStore, tenant: str, kb_ids: Sequence[str],
                    analysis: QueryAnalysis, vector: np.ndarray | None, params: KGParams,
                    embedder: Embedder | None, state: GraphState) -> tuple[Ticket | None, Ticket | None]:
    """Ask the batch for the kg mode's searches that depend on nothing found first (the question's
    relations and, when the knowledge bases hold reports, its reports) and the seed searches: asked
    early, with the query's other searches, they go to the store together."""
    ask_seed_searches(batch, kb_ids, analysis, vector, params, embedder)
    tokens = tokenize_query(" ".join([analysis.question, *analysis.keywords]))
    relations = kind_request(kb_ids, Relation.KIND, tokens, {"content_ltks": 1.0}, vector, params.search_top_n,
                             params.vector_weight, returned=RELATION_FIELDS,
                             floor=embedder.similarity_floor if embedder is not None else 0.0)
    reports = kind_request(kb_ids, CommunityReport.KIND, tokenize_query(analysis.question), {"content_ltks": 1.0},
                           vector, params.search_top_n, params.vector_weight, returned=REPORT_FIELDS) \
        if holds_kind(store, tenant, kb_ids, CommunityReport.KIND, state) else None
    return (batch.ask(relations) if relations is not None else None,
            batch.ask(reports) if reports is not None else None)


def _chosen_relations(store: DocStore, tenant: str, kb_ids: Sequence[str], params: KGParams, seeds: Seeds,
                      anchors: Mapping[Node, float], facts: Mapping[str, tuple[float, dict]],
                      walked: dict[str, tuple[float, Edge]], entities: Sequence[EntityHit],
                      searched: Sequence[Hit]) -> list[RelationHit]:
    """The relations found by their own search (``searched``: ``_question_relations``) or the
    question's facts, and the walked ones between chosen entities, ranked (within the budget)."""

    def anchor_weight(doc: dict) -> float:
        return max(anchors.get(end, 0.0) for end in relation_ends(doc))

    def weighed(doc: dict) -> float:
        # relations matching the question's words anywhere are loose evidence, like loose entity
        # matches; a relation of an anchor counts whole (in between for an anchor on its ramp)
        return seeds.loose_factor + (1.0 - seeds.loose_factor) * anchor_weight(doc)

    found = {h.id: (weighed(h.doc) * h.score, h.doc) for h in searched}
    for rid, (score, doc) in facts.items():
        if score > found.get(rid, (0.0, doc))[0]:
            found[rid] = (score, doc)
    chosen = {(e.kb_id, e.key) for e in entities}
    # only walked relations that end at a chosen entity explain anything shown
    shown = {rid: v for rid, v in walked.items() if v[1].src in chosen and v[1].tgt in chosen}
    relations = rank_relations(found, relation_rows(store, tenant, kb_ids, shown, found), params.weight_prior)
    relations = [r for r in relations if r.score >= params.min_score][:params.relation_top_n]
    return within_budget(relations, relation_row, params.budget.relations)


def _chunk_support(store: DocStore, tenant: str, kb_ids: Sequence[str], entities: Sequence[EntityHit],
                   relations: Sequence[RelationHit], params: KGParams, state: GraphState) -> dict[str, float]:
    """Chunk id -> support from the chosen entities (spread by their mention weights) and the best
    relation citing it, normalized so the best chunk gets 1."""
    prominence = mention_weights(store, tenant, kb_ids, [(e.kb_id, e.key) for e in entities]) \
        if params.prominence and holds_kind(store, tenant, kb_ids, EntityMention.KIND, state) else {}
    support = chunk_support([(e.score, e.chunk_ids, prominence.get((e.kb_id, e.key), {})) for e in entities],
                            params.support_power, normalize=False)
    # a chunk's relations mostly restate one sentence (co-occurrence relations share it) and their
    # endpoints' scores already count above: the chunk gets its best relation, not their sum
    facts: dict[str, float] = defaultdict(float)
    for r in relations:
        for cid, share in chunk_support([(r.score, r.chunk_ids)], params.support_power, normalize=False).items():
            facts[cid] = max(facts[cid], share * params.relation_support)
    for cid, share in facts.items():
        support[cid] = support.get(cid, 0.0) + share
    top = max(support.values(), default=0.0)
    return {cid: v / top for cid, v in support.items()} if top > 0 else {}
