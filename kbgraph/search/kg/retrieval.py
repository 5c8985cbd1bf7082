"""``retrieve_kg``, the kg mode's entry point: seeds and the question's facts, expansion along
relations, then the entities, relations, reports and chunks of the result ranked and fitted into
the context's token budgets, and the bridge chunks the facts lead to."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kbgraph.graph.scores import SCORE_FIELDS, join_scores
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
from kbgraph.search.batch import RowsTicket, SearchBatch, Ticket
from kbgraph.search.graph_cache import Edge, GraphState, entity_scores, graph_state, holds_kind, relation_adjacency
from kbgraph.search.kg.expand import expand, first_frontier
from kbgraph.search.kg.facts import anchor_relations, anchored_facts, bridge_chunks, bridge_ends
from kbgraph.search.kg.params import KGParams
from kbgraph.search.kg.ranking import (
    ask_member_reports, rank_entities, rank_relations, rank_reports, relation_rows, unread_relations,
)
from kbgraph.search.kg.rows import (
    CHUNK_FIELDS, ENTITY_FIELDS, RELATION_FIELDS, REPORT_FIELDS, Node, ask_mentions, fetch_chunks, first_reads,
    kind_request, mention_weights, relation_ends,
)
from kbgraph.search.kg.scoring import Citations, chunk_support, entity_citations
from kbgraph.search.kg.seeds import Seeds, ask_seed_searches, seed_entities
from kbgraph.search.query_analysis import QueryAnalysis
from kbgraph.search.ppr_graph import walked_relations
from kbgraph.store.base import DocStore, Hit, SearchRequest
from kbgraph.store.records import (
    CommunityReport, EntityMention, Relation, entity_id, entity_score_id, graph_text_fields, scored_entity_id,
)


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
                with_chunks: bool = True,
                known_chunks: Mapping[str, dict] | Callable[[], Mapping[str, dict]] | None = None) -> GraphResult:
    """``batch``: the query's searches (shared with its ppr part, whose seed and fact searches are
    the same); ``state``: the graph state the query read (read here when not given);
    ``with_chunks=False`` leaves out the chunks the graph supports and the bridges (the mix mode
    does not rank by them: its entities, relations and reports are what it takes); ``known_chunks``:
    chunk rows (rows.CHUNK_FIELDS) the query has read already (its chunk search's hits), not read again,
    or what gives them (called when they are needed, the last step: a chunk search still on its way
    holds nothing up before)."""
    batch = batch if batch is not None else SearchBatch(store, tenant)
    state = state if state is not None else graph_state(store, tenant, kb_ids)
    question_relations, asked_reports = ask_kg_searches(batch, store, tenant, kb_ids, analysis, vector, params,
                                                        embedder, state)
    seeds = seed_entities(store, tenant, kb_ids, analysis, vector, params, embedder, state, batch)
    anchors = seeds.anchor_weights(params.anchor_low, params.anchor_high)
    citations = entity_citations(store, tenant, kb_ids, state)
    seed_scores = {node: score * citations.specificity(node) ** params.seed_damping
                   for node, score in seeds.scores.items()}
    # relations from the walk graph's table once this process holds it (a query's ppr part loads it)
    adjacency = relation_adjacency(store, tenant, kb_ids, state,
                                   walked_relations(store, tenant, kb_ids, state.versions))
    # the first hop's relations depend on the seeds alone: read with the anchors' relation searches
    adjacency.ask(batch, first_frontier(seed_scores, params))
    about = anchor_relations(store, tenant, kb_ids, anchors, analysis, vector, params, batch)
    facts = anchored_facts(about, anchors)
    scores, hops, walked = expand(store, tenant, kb_ids, seed_scores, params,
                                  {rid: score for rid, (score, _) in facts.items()}, adjacency, citations, batch)
    searched = batch.hits(question_relations) if question_relations is not None else []
    found = _found_relations(seeds, anchors, facts, searched)
    far = bridge_ends(anchors, about, params, citations, seeds.scores) if with_chunks else {}
    prominent = with_chunks and params.prominence and holds_kind(store, tenant, kb_ids, EntityMention.KIND, state)
    entities, reads, around = _entities_and_around(store, tenant, kb_ids, scores, hops, seeds, citations, params,
                                                   walked, found, far, asked_reports is not None, prominent, state)
    shown = _shown_relations(walked, entities)
    relation_read, member_reports, mentions, far_mentions = (
        around.relations, around.reports, around.mentions, around.far_mentions)
    nodes = [(e.kb_id, e.key) for e in entities]

    relations = rank_relations(found, relation_rows(store, tenant, kb_ids, shown, found,
                                                    reads.rows(relation_read) if relation_read is not None else []),
                               params.weight_prior)
    relations = [r for r in relations if r.score >= params.min_score][:params.relation_top_n]
    relations = within_budget(relations, relation_row, params.budget.relations)
    reports = rank_reports(store, tenant, kb_ids, entities, batch.hits(asked_reports), params, reads, member_reports) \
        if asked_reports is not None else []
    reports = within_budget([r for r in reports if r.score >= params.min_score][:params.report_top_n],
                            report_block, params.budget.reports)

    chunks: list[RetrievedChunk] = []
    bridges: list[RetrievedChunk] = []
    if with_chunks:
        prominence = mention_weights(store, tenant, kb_ids, nodes, reads, mentions) if prominent else {}
        support = _chunk_support(entities, relations, params, prominence)
        bridged = bridge_chunks(far, mention_weights(store, tenant, kb_ids, far, reads, far_mentions)) if far else {}
        # the first rows of both rankings in one read; fetch_chunks reads on only where rows have gone
        read = known_chunks() if callable(known_chunks) else known_chunks
        known = _first_chunk_rows(store, tenant, kb_ids, [support, bridged], params.chunk_top_n, read or {})
        chunks = fit_chunks(fetch_chunks(store, tenant, kb_ids, support, params.chunk_top_n, "kg", known),
                            params.budget.chunks)
        bridges = fetch_chunks(store, tenant, kb_ids, bridged, params.chunk_top_n, "kg", known)
    return GraphResult(bridges=bridges, entities=entities, relations=relations, reports=reports, chunks=chunks,
                       context=render_context(chunks, entities, relations, reports), citations=citation_map(chunks))


def _entities_and_around(store: DocStore, tenant: str, kb_ids: Sequence[str], scores: dict[Node, float],
                         hops: dict[Node, int], seeds: Seeds, citations: Citations, params: KGParams,
                         walked: dict[str, tuple[float, Edge]], found: dict[str, tuple[float, dict]],
                         far: Mapping[Node, float], reports: bool, prominent: bool, state: GraphState
                         ) -> tuple[list[EntityHit], SearchBatch, _Around]:
    """The chosen entities, and what they lead to asked of a batch (``_ask_around``). Their rows and
    those reads go in one batch (a round trip or two on a remote store, where one read after the
    other took six): the rows of the entities that can be chosen (``_ranked_pool``: ranked by score
    and the PageRank held with the citations) and what those lead to; when the citations hold no
    PageRank or a row has gone since, the pool's rows first, then what the chosen lead to."""
    likely, top_rank = _ranked_pool(scores, citations, params)
    if likely is not None:
        reads = SearchBatch(store, tenant)
        unseen = [n for n in likely if n not in seeds.docs]
        entity_read = reads.ask_rows(kb_ids, [entity_id(kb, key) for kb, key in unseen], ENTITY_FIELDS) \
            if unseen else None
        # PageRank and communities live in score rows (kbgraph/graph/scores.py): read beside the rows
        score_read = reads.ask_rows(kb_ids, [entity_score_id(entity_id(kb, key)) for kb, key in likely], SCORE_FIELDS)
        around = _ask_around(reads, kb_ids, likely, walked, found, far, reports, prominent)
        docs = {n: dict(seeds.docs[n]) for n in likely if n in seeds.docs}
        docs.update({(d.get("kb_id", ""), d.get("entity_key_kwd", "")): d
                     for d in (reads.rows(entity_read) if entity_read is not None else [])})
        join_scores(docs.values(), {scored_entity_id(d["id"]): d for d in reads.rows(score_read)})
        if set(docs) >= set(likely):
            entities = within_budget(rank_entities(scores, hops, docs, params.pagerank_weight, top_rank)
                                     [:params.entity_top_n], entity_row, params.budget.entities)
            return entities, reads, around
    entities = _chosen_entities(store, tenant, kb_ids, scores, hops, seeds.docs, params, state)
    reads = SearchBatch(store, tenant)
    return entities, reads, _ask_around(reads, kb_ids, [(e.kb_id, e.key) for e in entities], walked, found, far,
                                        reports, prominent)


def _first_chunk_rows(store: DocStore, tenant: str, kb_ids: Sequence[str], rankings: Sequence[dict[str, float]],
                      limit: int, known: Mapping[str, dict]) -> dict[str, dict]:
    """The rows ``fetch_chunks`` reads first for each ranking (chunk id -> score; ``rows.first_reads``):
    ``known`` and the others, read at once (none when the question's chunk search found them all)."""
    wanted = list(dict.fromkeys(cid for scores in rankings for cid in first_reads(scores, limit) if cid not in known))
    read = store.get(tenant, list(kb_ids), wanted, fields=CHUNK_FIELDS) if wanted else []
    return {**known, **{doc["id"]: doc for doc in read}}


@dataclass
class _Around:
    """What the chosen entities lead to, asked of a batch (``_ask_around``)."""

    relations: RowsTicket | None
    reports: list[tuple[SearchRequest, Ticket]] | None
    mentions: list[tuple[SearchRequest, Ticket]]
    far_mentions: list[tuple[SearchRequest, Ticket]]


def _ask_around(reads: SearchBatch, kb_ids: Sequence[str], nodes: Sequence[Node],
                walked: dict[str, tuple[float, Edge]], found: dict[str, tuple[float, dict]], far: Mapping[Node, float],
                reports: bool, prominent: bool) -> _Around:
    """Ask ``reads`` for what entities ``nodes`` (those chosen, or a set holding them) lead to: the
    rows of the walked relations between them not found already, the reports of their communities,
    their mention rows, and the mention rows of the facts' far ends ``far``."""
    among = set(nodes)
    unread = unread_relations({r: v for r, v in walked.items() if v[1].src in among and v[1].tgt in among}, found)
    return _Around(reads.ask_rows(kb_ids, unread, RELATION_FIELDS) if unread else None,
                   ask_member_reports(reads, kb_ids, nodes) if reports else None,
                   ask_mentions(reads, kb_ids, nodes) if prominent else [],
                   ask_mentions(reads, kb_ids, far) if far else [])


def _ranked_pool(scores: dict[Node, float], citations: Citations, params: KGParams
                 ) -> tuple[list[Node] | None, float]:
    """The entities ``_chosen_entities`` can choose, ranked as it ranks them (score and PageRank
    prior, ``ranking.rank_entities``) from the PageRank held with the citations: those scoring at
    least the ``entity_top_n``-th best (ties included), and the pool's highest PageRank; None when
    the citations hold no PageRank. An entity without a row there has none in the store either."""
    pool = sorted((n for n, s in scores.items() if s >= params.min_score), key=lambda n: (-scores[n], n))
    pool = pool[:max(params.entity_top_n * 4, 32)]
    if pool and not citations.ranks:
        return None, 0.0
    known = [n for n in pool if n in citations.ranks]
    top_rank = max((citations.ranks[n] for n in known), default=0.0)
    w = params.pagerank_weight
    final = {n: round((1.0 - w) * scores.get(n, 0.0) + w * (citations.ranks[n] / top_rank if top_rank > 0 else 0.0), 6)
             for n in known}
    ordered = sorted(known, key=lambda n: -final[n])
    cut = final[ordered[params.entity_top_n - 1]] if len(ordered) >= params.entity_top_n else -math.inf
    return [n for n in ordered if final[n] >= cut], top_rank


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
                    embedder: Embedder | None, state: GraphState | None) -> tuple[Ticket | None, Ticket | None]:
    """Ask the batch for the kg mode's searches that depend on nothing found first (the question's
    relations and, when the knowledge bases hold reports, its reports) and the seed searches: asked
    early, with the query's other searches, they go to the store together. ``state`` None: the
    graph state is not read yet, and the reports are asked for whatever the graph holds (a graph
    without reports finds none; the caller asks again with the state and reads the reports only
    when there are some)."""
    ask_seed_searches(batch, kb_ids, analysis, vector, params, embedder)
    tokens = tokenize_query(" ".join([analysis.question, *analysis.keywords]))
    relations = kind_request(kb_ids, Relation.KIND, tokens, graph_text_fields(), vector, params.search_top_n,
                             params.vector_weight, returned=RELATION_FIELDS,
                             floor=embedder.similarity_floor if embedder is not None else 0.0)
    reports = kind_request(kb_ids, CommunityReport.KIND, tokenize_query(analysis.question), graph_text_fields(),
                           vector, params.search_top_n, params.vector_weight, returned=REPORT_FIELDS) \
        if state is None or holds_kind(store, tenant, kb_ids, CommunityReport.KIND, state) else None
    # read at the kg part's end, and their rows (descriptions, multi-valued fields) cost a round trip
    # more than the seed searches' keys on Elasticsearch: asked ``later``, the seeds do not wait for it
    return (batch.ask(relations, later=True) if relations is not None else None,
            batch.ask(reports, later=True) if reports is not None else None)


def _found_relations(seeds: Seeds, anchors: Mapping[Node, float], facts: Mapping[str, tuple[float, dict]],
                     searched: Sequence[Hit]) -> dict[str, tuple[float, dict]]:
    """The relations found by their own search (``searched``) or among the question's facts, scored."""

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
    return found


def _shown_relations(walked: dict[str, tuple[float, Edge]], entities: Sequence[EntityHit]
                     ) -> dict[str, tuple[float, Edge]]:
    """The walked relations between chosen entities: only those explain anything shown."""
    chosen = {(e.kb_id, e.key) for e in entities}
    return {rid: v for rid, v in walked.items() if v[1].src in chosen and v[1].tgt in chosen}


def _chunk_support(entities: Sequence[EntityHit], relations: Sequence[RelationHit], params: KGParams,
                   prominence: Mapping[Node, dict[str, float]]) -> dict[str, float]:
    """Chunk id -> support from the chosen entities (spread by their mention weights, ``prominence``)
    and the best relation citing it, normalized so the best chunk gets 1."""
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
