"""The `ppr` retrieval mode (HippoRAG-style): seed entities -> Personalized PageRank -> chunks.

The walk runs over the knowledge base's entity graph with the chunks added as nodes: every entity
is linked to the chunks that mention it, so PageRank mass flows entity -> chunk -> entity and a
chunk that sits between two question entities (the bridge passage of a two-hop question) collects
mass from both. The question's own hybrid chunk scores seed the chunk nodes with a small share of
the restart mass, so dense/BM25 relevance and graph proximity are ranked together rather than
glued on afterwards; the final score still adds a share of the naive score as a node-independent
prior, because a chunk the graph never reaches (no entity extracted from it) must stay findable.

The graph (entities, relations, entity-chunk links) and its cache are in ``kbgraph.search.ppr_graph``.

The walk settles the entities of the result. The chunks are ranked by passage chains
(``kbgraph.search.chains``, ``PPRParams.chains``) over the naive hits, the walk's best chunks and the
chunks those lead to through an entity they share; with ``chains=None`` they are ranked by the
walk's mass and the naive score as above.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kbgraph.graph.ppr import ppr_vector
from kbgraph.llm.base import Embedder
from kbgraph.search.chains import (
    Chain,
    ChainGraph,
    ChainParams,
    NeighbourFn,
    Step,
    best_chains,
    chain_starts,
    chain_steps,
    described_entities,
    naive_cosines,
    place_chains,
    read_vectors,
    reference,
    sample_ids,
    unit,
    with_context,
)
from kbgraph.search.batch import SearchBatch
from kbgraph.search.chunks import ChunkHit
from kbgraph.search.context import (
    Budget,
    EntityHit,
    RetrievedChunk,
    citation_map,
    entity_row,
    fit_chunks,
    render_context,
    within_budget,
)
from kbgraph.search.graph_cache import EntityScores, GraphState, entity_scores, graph_state
from kbgraph.search.kg.facts import anchor_relations, fact_leads, ranked_facts
from kbgraph.search.kg.params import KGParams
from kbgraph.search.kg.ranking import rank_entities
from kbgraph.search.kg.rows import CHUNK_FIELDS, ENTITY_FIELDS, _fetch_entities, fetch_chunks
from kbgraph.search.kg.scoring import present, ramp
from kbgraph.search.kg.seeds import Seeds, seed_entities
from kbgraph.search.ppr_graph import EntityGraph, chunk_node, entity_graph, entity_node
from kbgraph.search.query_analysis import QueryAnalysis
from kbgraph.store.base import DocStore, vector_field
from kbgraph.utils.beside import side_by_side
from kbgraph.utils.top_k import largest


@dataclass(frozen=True)
class PPRParams:
    """The walk's parameters; one line each says what it is for, and what the defaults were measured
    against is in bench/README.md, "Retrieval parameters: what the kg and ppr defaults rest on"."""

    damping: float = 0.5  # HippoRAG's value: mass stays within a few hops of the seeds
    tol: float = 2e-3  # L1 change of a step at which the walk stops: 0.2% of the mass left to move at damping 0.5
    # ... when the walk settles only the result's entities (the chains rank the chunks): 1% of the
    # mass left to move changed none of the first 12 entities, nor their order, on 105 questions of
    # bench/query_latency.py's 100k-entity graph (all 100 MuSiQue questions: the same set, 95% the
    # same order, as at 2e-3), for two whole-graph steps less
    entity_tol: float = 1e-2
    seed_top_n: int = 5  # a few precise seeds beat many weak ones
    # an entity seeds the walk by a weight rising from 0 at seed_low to 1 at seed_high of its relevance
    # (kg's ``ramp``; an analysed entity's match counts as an anchor by it, and only anchors seed once
    # there is one): no cut the stores' scores may fall either side of; wider than kg's ramp, as the
    # walk moves more with a seed's weight
    seed_low: float = 0.4
    seed_high: float = 0.6
    chunk_seed_share: float = 0.1  # of the restart mass given to the naive chunk hits
    naive_weight: float = 0.2  # share of the naive score in the final chunk score
    chunk_link_weight: float = 1.0  # weight of an entity-chunk edge relative to a relation of weight 1
    specificity: float = 0.5  # seed weight = relevance / (chunks citing the entity) ** this: a hub points nowhere
    # the far ends of the anchors' relations that match the question seed the walk too (HippoRAG 2's
    # fact-to-entity seeding, restricted to the facts of the entities the question names)
    relation_seed_weight: float = 1.0  # their seed weight, times the anchor's and the fact's score
    relation_seed_top_n: int = 3  # how many of the best facts seed
    fact_filter: float = 0.5  # facts seed only when scoring at least this share of the best fact
    entity_top_n: int = 12  # entities in the result (the walk's heaviest)
    chunk_top_n: int = 8  # chunks in the result
    # the chunk ranking: passage chains (kbgraph.search.chains) over the naive hits, the walk's best
    # chunks and what they lead to; None ranks by the walk's mass and the naive score alone
    chains: ChainParams | None = field(default_factory=ChainParams)
    chain_walk_candidates: int = 16  # of the walk's best chunks join the chains' candidates
    kg: KGParams = field(default_factory=KGParams)  # the seed and fact searches, shared with the kg mode
    budget: Budget = field(default_factory=Budget)  # token budgets of the rendered context


def _normalized(values: dict[str, float]) -> dict[str, float]:
    top = max(values.values(), default=0.0)
    return {k: v / top for k, v in values.items()} if top > 0 else {}


def seed_divisor(graph: EntityGraph, node: str, params: PPRParams) -> float:
    """The divisor of an entity's seed weight: the number of chunks citing it to ``params.specificity``."""
    return float(max(1, graph.mentions.get(node, 1))) ** params.specificity


def ppr_seeds(seeds: Seeds, graph: EntityGraph, params: PPRParams,
              about: dict[str, tuple[float, dict]] | None = None) -> tuple[dict[str, float], float]:
    """Entity restart weights: relevance times specificity (an entity cited by few chunks points
    somewhere; one cited by every chunk does not), the best ``seed_top_n`` only; and how much the
    walk may lean on them (the best seed's ramp weight, ``chunk_scores``).

    When the question's analysed entities matched something, only those matches seed the walk:
    entities found by the whole-question search alone are mostly generic words of the question
    ("guild", "country") and pull the walk toward every chunk that shares them. Each seed counts by
    its ramp weight (``seed_low`` .. ``seed_high``), the other entities by what the anchors leave
    (1 - the best anchor's weight). ``about`` (the anchors' relations scored against the question,
    ``kg.facts.anchor_relations``) adds the far end of the best ``relation_seed_top_n`` of them, at anchor
    score x relation score: the entity the question reaches through the relation it asks about ("the
    guild *founded by* Mira Castell").
    """
    anchors = anchor_weights(seeds, params)
    strength = max(anchors.values(), default=0.0)
    far: dict[str, float] = {}
    if about and anchors and params.relation_seed_weight > 0:
        # a fact far below the best one is not what the question asks (HippoRAG 2's fact filter)
        for score, doc in ranked_facts(about, anchors, params.relation_seed_top_n, params.fact_filter,
                                       params.kg.fact_presence):
            for a, b, weight in fact_leads(doc, anchors):
                node = entity_node(*b)
                if node in graph.graph.index:
                    w = params.relation_seed_weight * seeds.scores.get(a, 0.0) * score * weight
                    far[node] = max(far.get(node, 0.0), w / seed_divisor(graph, node, params))
    weighted: dict[str, float] = {}
    confidence = 0.0
    for (kb, key), score in seeds.scores.items():
        node = entity_node(kb, key)
        weight = ramp(score, params.seed_low, params.seed_high)
        if (kb, key) not in seeds.anchored:
            weight *= 1.0 - strength
        if weight <= 0 or node not in graph.graph.index:
            continue
        weighted[node] = weight * score / seed_divisor(graph, node, params)
        confidence = max(confidence, weight)
    best = sorted(weighted, key=lambda n: (-weighted[n], n))[:params.seed_top_n]
    out = {n: weighted[n] for n in best}
    for node, w in far.items():
        out[node] = max(out.get(node, 0.0), w)
    return out, confidence


def anchor_weights(seeds: Seeds, params: PPRParams) -> dict[tuple[str, str], float]:
    return seeds.anchor_weights(params.seed_low, params.seed_high)


# chunk candidates kept from a walk: enough to fill a page when some of the best have gone since
_CANDIDATE_FACTOR, _CANDIDATE_FLOOR = 8, 64


def chunk_scores(graph: EntityGraph, entity_seeds: dict[str, float], naive: Sequence[ChunkHit],
                 params: PPRParams, confidence: float = 1.0, tol: float | None = None
                 ) -> tuple[dict[str, float], np.ndarray]:
    """Final chunk scores (in [0, 1]) of the best candidates, and the raw PPR vector. The entity
    seeds take ``1 - chunk_seed_share`` of the restart mass times ``confidence`` (``ppr_seeds``: a
    seed barely over its ramp's low end must not take the walk over), the naive hits the rest.
    ``tol``: where the walk stops (``params.tol`` when not given)."""
    restart: dict[str, float] = {}
    entity_mass = sum(entity_seeds.values())
    naive_scores = {h.chunk_id: h.similarity for h in naive if h.similarity > 0}
    naive_mass = sum(naive_scores.values())
    entity_share = (1.0 - params.chunk_seed_share) * min(1.0, confidence) if entity_mass > 0 else 0.0
    if entity_mass > 0:
        restart.update({n: entity_share * w / entity_mass for n, w in entity_seeds.items()})
    if naive_mass > 0:
        share = 1.0 - entity_share
        for cid, s in naive_scores.items():
            node = chunk_node(cid)
            if node in graph.graph.index:
                restart[node] = restart.get(node, 0.0) + share * s / naive_mass
    stop = params.tol if tol is None else tol
    vector = ppr_vector(graph.graph, restart, damping=params.damping, tol=stop) if restart \
        else np.zeros(graph.graph.size)
    walked = vector[graph.chunk_nodes].astype(np.float64) if len(graph.chunk_nodes) else np.zeros(0)
    top_walked = float(walked.max()) if len(walked) else 0.0
    # the walk reaches most chunks of a large graph: score them as one array, keep the best few
    combined = (1.0 - params.naive_weight) * walked / top_walked if top_walked > 0 else np.zeros(len(walked))
    final: dict[str, float] = {}
    for cid, s in _normalized(naive_scores).items():
        position = graph.chunk_index.get(cid)
        if position is None:
            final[cid] = params.naive_weight * s
        else:
            combined[position] += params.naive_weight * s
    keep = max(_CANDIDATE_FLOOR, _CANDIDATE_FACTOR * params.chunk_top_n)
    reached = np.flatnonzero(combined > 0)
    # every candidate tied with the last kept one too, so that which of them is shown goes by id
    best = reached[largest(combined[reached], keep)]
    final.update({graph.chunk_ids[i]: float(combined[i]) for i in best})
    return final, vector


def fact_ends(seeds: Seeds, graph: EntityGraph, params: PPRParams,
              about: dict[str, tuple[float, dict]] | None) -> dict[int, dict[str, float]]:
    """Node -> {chunk stating the fact: score relative to the best fact} of the entities at the far
    end of the question's facts (the anchors' relations to other entities scoring at least
    ``fact_filter`` x the best one, as ``kg.facts.ranked_facts`` sets the bar, and kg's
    ``fact_min_score``). A fact counts by its anchor's
    weight (``kg.facts.fact_leads``), and all of them by the best anchor's, so a fact of an anchor on its
    ramp's low end adds little."""
    anchors = anchor_weights(seeds, params)
    if not about or not anchors:
        return {}
    leads: list[tuple[float, float, str, int, list[str]]] = []
    for score, doc in about.values():
        for _, far, weight in fact_leads(doc, anchors):
            node = graph.graph.index.get(entity_node(*far))
            if node is not None:
                leads.append((score * weight, score, doc.get("id", ""), node, list(doc.get("chunk_ids_kwd") or [])))
    best = max((lead[1] * present(lead[0] / lead[1], params.kg.fact_presence) for lead in leads if lead[1] > 0),
               default=0.0)
    if best <= 0:
        return {}
    strength = max(anchors.values())
    out: dict[int, dict[str, float]] = {}
    for value, score, _, node, chunks in sorted(leads, key=lambda lead: (-lead[0], lead[2])):
        # a fact matching the rest of the question less than kg's bar is a co-occurrence, not what it asks
        if score < max(params.fact_filter * best, params.kg.fact_min_score):
            continue
        stated = out.setdefault(node, {})
        for chunk in chunks:
            stated[chunk] = max(stated.get(chunk, 0.0), strength * value / best)
    return out


def named_weights(seeds: Seeds, graph: EntityGraph, params: PPRParams) -> dict[int, float]:
    """Graph node -> anchor weight of the entities the question names (no chain runs through one)."""
    return {graph.graph.index[entity_node(*n)]: w for n, w in anchor_weights(seeds, params).items()
            if entity_node(*n) in graph.graph.index}


def chain_graph(graph: EntityGraph) -> ChainGraph:
    """The chains' view of the walk graph (made once per cached graph)."""
    found = graph.derived.get("chains")
    if found is None:
        size = graph.graph.size
        mentions = np.zeros(size, dtype=np.int64)
        for name, count in graph.mentions.items():
            node = graph.graph.index.get(name)
            if node is not None:
                mentions[node] = count
        nodes = graph.chunk_nodes.tolist()
        found = ChainGraph(neighbours=NeighbourFn(graph.graph.matrix.indices, graph.graph.matrix.indptr),
                           chunk_of_node=dict(zip(nodes, graph.chunk_ids)),
                           node_of_chunk=dict(zip(graph.chunk_ids, nodes)), mentions=mentions)
        graph.derived["chains"] = found
    return found


def vector_sample(store: DocStore, tenant: str, kb_ids: Sequence[str], graph: EntityGraph, dim: int,
                  size: int) -> np.ndarray:
    """Vectors of an even spread of the graph's chunks: the reference a question's cosines are
    z-scored against (read once per cached graph and vector size)."""
    key = ("sample", dim, size)
    found = graph.derived.get(key)
    if found is None:
        vectors = read_vectors(store, tenant, kb_ids, sample_ids(graph.chunk_ids, size), dim)
        found = np.stack(list(vectors.values())) if vectors else np.zeros((0, dim), dtype=np.float32)
        graph.derived[key] = found
    return found


def chained_chunk_scores(store: DocStore, tenant: str, kb_ids: Sequence[str], graph: EntityGraph,
                         question: np.ndarray, naive: Sequence[ChunkHit], params: PPRParams, floor: float,
                         facts: dict[int, dict[str, float]] | None = None,
                         named: Mapping[int, float] | None = None,
                         question_words: set[str] | None = None,
                         rows: dict[str, dict] | None = None, leading: list[str] | None = None
                         ) -> dict[str, float] | None:
    """Chunk scores in (0, 1] that rank naive's hits in naive's order with the passages chains
    reach (``kbgraph.search.chains``) placed among them; None when no chain reaches a passage.
    ``floor``: the embedder's cosine of unrelated texts (naive's vector scores are rescaled from it);
    ``rows``: chunk rows read on the way go here (CHUNK_FIELDS); ``leading``: the ranking's head that
    matches the question, chains along its facts included (``place_chains``)."""
    rows = rows if rows is not None else {}
    chains = params.chains
    assert chains is not None
    starts = chain_starts(naive, chains)
    steps = chain_steps(chain_graph(graph), starts, chains, named)
    if not steps:
        return None
    sample = vector_sample(store, tenant, kb_ids, graph, len(question), chains.sample_size)
    if not len(sample):
        return None
    known = naive_cosines(naive, floor)  # naive measured these: none to measure
    unknown = sorted(({t for step in steps for t in step.targets} | set(starts)) - set(known))
    measured = store.vector_cosines(tenant, kb_ids, unknown, vector_field(len(question)), unit(question)) \
        if unknown else {}
    top = naive[0].similarity if naive else 0.0
    shares = {h.chunk_id: h.similarity / top for h in naive} if top > 0 else {}
    mean, spread = reference(sample, unit(question))
    target_z = {c: (cos - mean) / spread for c, cos in {**known, **measured}.items()}
    described = described_entities(steps, _entity_names(graph, steps), question_words or set()) \
        if chains.described_bonus else set()
    found = best_chains(steps, target_z, shares, chains, facts, described)
    if not found:
        return None
    if chains.context_weight > 0 and question_words:
        found = _with_context(store, tenant, kb_ids, graph, found, naive, chains, question_words, rows)
    placed = place_chains([h.chunk_id for h in naive], starts, found, chains, leading)
    return naive_order(placed)


def _with_context(store: DocStore, tenant: str, kb_ids: Sequence[str], graph: EntityGraph, found: list[Chain],
                  naive: Sequence[ChunkHit], chains: ChainParams, words: set[str],
                  rows: dict[str, dict]) -> list[Chain]:
    """``found`` with the best ``context_top`` weighed by what their passages say of their entity
    (``chains.with_context``); the rows of those passages naive did not find are read into ``rows``
    (the ranking's chunk rows: its placed chains are among them)."""
    head = found[:chains.context_top]
    texts = {h.chunk_id: h.content for h in naive}
    unread = sorted(({c.target for c in head} | {c.start for c in head}) - set(texts))
    if unread:
        for doc in store.get(tenant, list(kb_ids), unread, fields=CHUNK_FIELDS):
            rows[doc["id"]] = doc
            if doc.get("available_int", 1) == 1:
                texts[doc["id"]] = doc.get("content_with_weight", "")
    names = {c.entity: _entity_name(graph, c.entity) for c in head}
    return with_context(head, texts, names, words, chains) + found[chains.context_top:]


def _entity_names(graph: EntityGraph, steps: Sequence[Step]) -> dict[int, str]:
    """Entity node -> its key (the normalized name), for the entities the steps go through."""
    return {s.entity: _entity_name(graph, s.entity) for s in steps}


def _entity_name(graph: EntityGraph, node: int) -> str:
    return graph.graph.nodes[node].split("\x1f", 2)[2]


def naive_order(order: Sequence[str]) -> dict[str, float]:
    """Scores in (0, 1] that keep this order."""
    return {cid: 1.0 - i / (len(order) + 1) for i, cid in enumerate(order)}


def top_entities(graph: EntityGraph, walk: np.ndarray, limit: int) -> dict[tuple[str, str], float]:
    """(kb_id, key) -> PPR mass of the ``limit`` entity nodes with the most mass."""
    if not len(graph.entity_nodes) or not walk.any():
        return {}
    mass = walk[graph.entity_nodes]
    candidates = largest(mass, limit)
    candidates = candidates[mass[candidates] > 0]
    order = candidates[np.lexsort((candidates, -mass[candidates]))][:limit]
    out: dict[tuple[str, str], float] = {}
    for i in order:
        _, kb, key = graph.graph.nodes[graph.entity_nodes[i]].split("\x1f", 2)
        out[(kb, key)] = float(mass[i])
    return out


def entity_rows(store: DocStore, tenant: str, kb_ids: Sequence[str], scores: dict[tuple[str, str], float],
                known: dict[tuple[str, str], dict], limit: int,
                ranks: EntityScores | None = None) -> dict[tuple[str, str], dict]:
    """The rows ``rank_entities`` needs to rank the first ``limit`` of ``scores`` with no PageRank
    prior (by score rounded to 6 places, then name): those scoring at least the ``limit``-th, the
    others only when some of those have gone. Rows in ``known`` (read by the seed searches) are
    not read again. ``ranks``: the rows are also given their PageRank and communities, read with them."""
    ordered = sorted(scores, key=lambda n: -round(scores[n], 6))
    cut = round(scores[ordered[limit - 1]], 6) if len(ordered) > limit else -math.inf
    first = [n for n in ordered if round(scores[n], 6) >= cut]
    docs: dict[tuple[str, str], dict] = {}
    for group in (first, ordered[len(first):]):
        part = {n: known[n] for n in group if n in known}
        if ranks is not None:
            ranks.complete(part, [n for n in group if n not in part], ENTITY_FIELDS)
        else:
            part.update(_fetch_entities(store, tenant, kb_ids, [n for n in group if n not in part]))
        docs.update(part)
        if len(docs) >= limit:
            break
    return docs


def chunk_row(hit: ChunkHit) -> dict:
    """A chunk search hit as the row ``fetch_chunks`` would read (the search only finds visible chunks)."""
    return {"id": hit.chunk_id, "kb_id": hit.kb_id, "doc_id": hit.doc_id, "docnm_kwd": hit.doc_name,
            "content_with_weight": hit.content, "position_int": hit.position, "available_int": 1}


@dataclass
class PPRResult:
    entities: list[EntityHit] = field(default_factory=list)
    chunks: list[RetrievedChunk] = field(default_factory=list)
    context: str = ""
    citations: dict[int, str] = field(default_factory=dict)
    # the ranking's first chunks through the last naive hit that matches the question (the chains'
    # starts, with any chain along the question's facts placed among them): kg's and mix's fused
    # rankings keep them first
    matching: list[str] = field(default_factory=list)


def retrieve_ppr(store: DocStore, tenant: str, kb_ids: Sequence[str], analysis: QueryAnalysis,
                 vector: np.ndarray | None, naive: Sequence[ChunkHit], params: PPRParams = PPRParams(),
                 embedder: Embedder | None = None, batch: SearchBatch | None = None,
                 state: GraphState | None = None, walk: bool = True) -> PPRResult:
    """``naive``: the question's chunk search hits, whose order the chunks keep (with the passages
    chains reach placed among them; the walk's own ranking only when there are none and no chains);
    ``batch``: the query's searches (shared with its kg part); ``state``: the graph state the query
    read (read here when not given). ``walk=False`` leaves the walk out when the chains rank the
    chunks: the result then has no entities (the kg and mix modes take theirs from the kg part)."""
    state = state if state is not None else graph_state(store, tenant, kb_ids)
    graph = entity_graph(store, tenant, kb_ids, params.chunk_link_weight, state.versions)
    batch = batch if batch is not None else SearchBatch(store, tenant)
    seeds = seed_entities(store, tenant, kb_ids, analysis, vector, params.kg, embedder, state, batch)
    # alone (the walk's own entities shown), the anchors' relations are read for where they lead; beside
    # the kg part, as it reads them (whole, to show them): one search for both when their anchors agree
    about = anchor_relations(store, tenant, kb_ids, anchor_weights(seeds, params), analysis, vector, params.kg,
                             batch, keys_only=walk)
    chaining = params.chains is not None and vector is not None and bool(naive)
    walked: np.ndarray | None = None
    scores: dict[str, float] = {}
    if walk or not chaining:
        entity_seeds, confidence = ppr_seeds(seeds, graph, params, about)
        scores, walked = chunk_scores(graph, entity_seeds, naive, params, confidence,
                                      params.entity_tol if chaining else params.tol)

    leading: list[str] = []  # ranked() fills it

    def ranked() -> list[RetrievedChunk]:
        chunk_scores_ = scores
        rows: dict[str, dict] = {}
        if chaining:
            assert vector is not None
            chained = chained_chunk_scores(store, tenant, kb_ids, graph, np.asarray(vector, dtype=np.float32), naive,
                                           params, embedder.similarity_floor if embedder is not None else 0.0,
                                           fact_ends(seeds, graph, params, about), named_weights(seeds, graph, params),
                                           analysis.own_words(), rows, leading)
            chunk_scores_ = chained if chained is not None else naive_order([h.chunk_id for h in naive])
        return _ranked_chunks(store, tenant, kb_ids, graph, naive, chunk_scores_, params, rows)

    def entities_walked() -> list[EntityHit]:
        return _walked_entities(store, tenant, kb_ids, graph, walked, seeds, params, state) \
            if walked is not None else []

    # the chunks (the chains' cosines, their rows) and the walked entities' rows are independent reads:
    # side by side on a store in another process
    chunks, entities = side_by_side(ranked, entities_walked, concurrent=walked is not None and store.remote,
                                    name="kbgraph-ppr-entities")
    return PPRResult(entities=entities, chunks=chunks, context=render_context(chunks, entities),
                     citations=citation_map(chunks),
                     matching=_leading(chunks, [*chain_starts(naive, params.chains), *leading]
                                       if params.chains is not None else []))


def _leading(chunks: Sequence[RetrievedChunk], starts: Sequence[str]) -> list[str]:
    """The ranking's first chunks up to the last passage that matches the question or that a chain
    along one of its facts placed among or right after them (``starts``)."""
    wanted, out = set(starts) & {chunk.chunk_id for chunk in chunks}, []
    for chunk in chunks:
        if not wanted:
            break
        out.append(chunk.chunk_id)
        wanted.discard(chunk.chunk_id)
    return out


def _ranked_chunks(store: DocStore, tenant: str, kb_ids: Sequence[str], graph: EntityGraph,
                   naive: Sequence[ChunkHit], scores: dict[str, float], params: PPRParams,
                   rows: Mapping[str, dict] | None = None) -> list[RetrievedChunk]:
    """The best-scored chunks with naive's similarity parts where naive found them (``rows``: chunk
    rows read already, besides naive's)."""
    by_id = {h.chunk_id: h for h in naive}
    chunks = fetch_chunks(store, tenant, kb_ids, scores, params.chunk_top_n, "ppr",
                          {**(rows or {}), **{h.chunk_id: chunk_row(h) for h in naive}})
    for chunk in chunks:
        hit = by_id.get(chunk.chunk_id)
        if hit is not None:
            chunk.similarity, chunk.vector_similarity, chunk.term_similarity = (
                hit.similarity, hit.vector_similarity, hit.term_similarity)
            chunk.sources = ["naive", "ppr"] if chunk.chunk_id in graph.chunk_index else ["naive"]
    return fit_chunks(chunks, params.budget.chunks)


def _walked_entities(store: DocStore, tenant: str, kb_ids: Sequence[str], graph: EntityGraph, walked: np.ndarray,
                     seeds: Seeds, params: PPRParams, state: GraphState) -> list[EntityHit]:
    """The entities the walk settled on, for the structured result and the context."""
    entity_mass = top_entities(graph, walked, params.entity_top_n * 3)
    top = max(entity_mass.values(), default=0.0)
    normalized = {n: m / top for n, m in entity_mass.items()} if top > 0 else {}
    # with their PageRank and communities, shown
    docs = entity_rows(store, tenant, kb_ids, normalized, seeds.docs, params.entity_top_n,
                       entity_scores(store, tenant, kb_ids, state))
    entities = rank_entities(normalized, {}, docs, 0.0)[:params.entity_top_n]
    return within_budget(entities, entity_row, params.budget.entities)
