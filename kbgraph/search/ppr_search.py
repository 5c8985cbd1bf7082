"""The `ppr` retrieval mode (HippoRAG-style): seed entities -> Personalized PageRank -> chunks.

The walk runs over the knowledge base's entity graph with the chunks added as nodes: every entity
is linked to the chunks that mention it, so PageRank mass flows entity -> chunk -> entity and a
chunk that sits between two question entities (the bridge passage of a two-hop question) collects
mass from both. The question's own hybrid chunk scores seed the chunk nodes with a small share of
the restart mass, so dense/BM25 relevance and graph proximity are ranked together rather than
glued on afterwards; the final score still adds a share of the naive score as a node-independent
prior, because a chunk the graph never reaches (no entity extracted from it) must stay findable.

The graph (entities, relations, entity-chunk links) is read from the store once per knowledge
base set and graph version and cached in-process; a changed graph (new ``graph_meta`` version)
rebuilds it on the next query.

The walk settles the entities of the result. The chunks are ranked by passage chains
(``kbgraph.search.chains``, ``PPRParams.chains``) over the naive hits, the walk's best chunks and the
chunks those lead to through an entity they share; with ``chains=None`` they are ranked by the
walk's mass and the naive score as above.
"""

from __future__ import annotations

import json
import math
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kbgraph.graph.ppr import SparseGraph, ppr_vector
from kbgraph.llm.base import Embedder
from kbgraph.search.chains import (
    ChainGraph,
    ChainParams,
    NeighbourFn,
    base_scores,
    chain_scores,
    chain_targets,
    naive_cosines,
    read_vectors,
    sample_ids,
)
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
from kbgraph.search.kg import (
    KGParams,
    Seeds,
    _fetch_entities,
    anchor_relations,
    fact_leads,
    present,
    fetch_chunks,
    ramp,
    rank_entities,
    ranked_facts,
    seed_entities,
)
from kbgraph.search.graph_cache import graph_state
from kbgraph.search.query_analysis import QueryAnalysis
from kbgraph.store.base import DocStore, eq
from kbgraph.store.index_files import PERSIST_MIN_ROWS, array_strings, strings_array
from kbgraph.store.records import Entity, Relation
from kbgraph.utils.top_k import largest


@dataclass(frozen=True)
class PPRParams:
    damping: float = 0.5  # HippoRAG's value: mass stays within a few hops of the seeds
    # L1 change of a step at which the walk stops; at damping 0.5 what is left to move is no more than
    # this, 0.2% of the mass. Against a fully converged walk, the chunk lists of 98 of 100 MuSiQue
    # questions came out the same, as at 1e-3, which takes one step more (~0.7 ms on a 130k-node graph).
    tol: float = 2e-3
    seed_top_n: int = 5  # a few precise seeds beat many weak ones (tuned on MuSiQue)
    # an entity seeds the walk by a weight rising linearly from 0 at seed_low to 1 at seed_high of its
    # relevance (kg.ramp), and one matched by the question's analysed entities counts as one of its
    # anchors by that weight (only anchors seed the walk once there is one): no cut that a score
    # differing in the third digit between the stores can fall either side of. Wider than kg's ramp:
    # the walk moves more with a seed's weight (an entity of the sample corpus seeded at 0.4994 and
    # 0.5014 scored 0.011 apart over 0.45-0.55, more than the stores may differ; 0.006 over 0.4-0.6)
    seed_low: float = 0.4
    seed_high: float = 0.6
    chunk_seed_share: float = 0.1  # of the restart mass given to the naive chunk hits
    naive_weight: float = 0.2  # share of the naive score in the final chunk score
    chunk_link_weight: float = 1.0  # weight of an entity-chunk edge relative to a relation of weight 1
    # seed weight = relevance / (chunks citing the entity) ** specificity. HippoRAG's node specificity is
    # the power 1; 0.5 did as well on MuSiQue and HotpotQA and leaves a named hub some pull
    specificity: float = 0.5
    # the far ends of the anchors' relations that match the question seed the walk too (HippoRAG 2's
    # fact-to-entity seeding, restricted to the facts of the entities the question names)
    relation_seed_weight: float = 1.0
    relation_seed_top_n: int = 3
    fact_filter: float = 0.5  # facts seed only when scoring at least this share of the best fact
    entity_top_n: int = 12
    chunk_top_n: int = 8
    # the chunk ranking: passage chains (kbgraph.search.chains) over the naive hits, the walk's best
    # chunks and what they lead to; None ranks by the walk's mass and the naive score alone
    chains: ChainParams | None = field(default_factory=ChainParams)
    chain_walk_candidates: int = 16  # of the walk's best chunks join the chains' candidates
    kg: KGParams = field(default_factory=KGParams)
    budget: Budget = field(default_factory=Budget)


@dataclass
class EntityGraph:
    """The walkable graph of a set of knowledge bases at given graph versions."""

    versions: tuple[tuple[str, int], ...]
    graph: SparseGraph
    chunk_nodes: np.ndarray  # node indices of the chunk nodes
    chunk_ids: list[str]  # chunk id of each chunk node, same order
    chunk_index: dict[str, int]  # chunk id -> position in chunk_nodes
    mentions: dict[str, int]  # entity node -> number of chunks citing it
    entity_nodes: np.ndarray  # node indices of the entity nodes
    # worked out from the above on first use, never persisted: the chains' view, vector samples
    derived: dict = field(default_factory=dict, repr=False, compare=False)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """For store/index_files.py: a new process maps the graph instead of reading every row."""
        arrays = {f"graph_{name}": array for name, array in self.graph.to_arrays().items()}
        arrays.update(versions=strings_array([json.dumps(self.versions)]), chunk_nodes=self.chunk_nodes,
                      chunk_ids=strings_array(self.chunk_ids), mention_nodes=strings_array(list(self.mentions)),
                      mention_counts=np.fromiter(self.mentions.values(), dtype=np.int64, count=len(self.mentions)),
                      entity_nodes=self.entity_nodes)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> EntityGraph:
        graph = SparseGraph.from_arrays({name[6:]: a for name, a in arrays.items() if name.startswith("graph_")})
        chunk_ids = array_strings(arrays["chunk_ids"])
        versions = tuple(tuple(v) for v in json.loads(array_strings(arrays["versions"])[0]))
        return cls(versions=versions, graph=graph, chunk_nodes=np.asarray(arrays["chunk_nodes"]), chunk_ids=chunk_ids,
                   chunk_index={c: i for i, c in enumerate(chunk_ids)},
                   mentions=dict(zip(array_strings(arrays["mention_nodes"]), arrays["mention_counts"].tolist())),
                   entity_nodes=np.asarray(arrays["entity_nodes"]))


def entity_node(kb_id: str, key: str) -> str:
    return f"e\x1f{kb_id}\x1f{key}"


def chunk_node(chunk_id: str) -> str:
    return f"c\x1f{chunk_id}"


def build_entity_graph(store: DocStore, tenant: str, kb_ids: Sequence[str], versions: tuple[tuple[str, int], ...],
                       chunk_link_weight: float = 1.0) -> EntityGraph:
    nodes: list[str] = []
    edges: list[tuple[str, str, float]] = []
    mentions: dict[str, int] = {}
    chunks: set[str] = set()
    for doc in store.scan(tenant, list(kb_ids), [eq("knowledge_graph_kwd", Entity.KIND)],
                          fields=["kb_id", "entity_key_kwd", "chunk_ids_kwd"]):
        node = entity_node(doc.get("kb_id", ""), doc.get("entity_key_kwd", ""))
        nodes.append(node)
        cited = list(doc.get("chunk_ids_kwd") or [])
        mentions[node] = len(cited)
        for cid in cited:
            chunks.add(cid)
            edges.append((node, chunk_node(cid), chunk_link_weight))
    for doc in store.scan(tenant, list(kb_ids), [eq("knowledge_graph_kwd", Relation.KIND)],
                          fields=["kb_id", "src_key_kwd", "tgt_key_kwd", "weight_flt"]):
        kb = doc.get("kb_id", "")
        edges.append((entity_node(kb, doc.get("src_key_kwd", "")), entity_node(kb, doc.get("tgt_key_kwd", "")),
                      float(doc.get("weight_flt", 0.0) or 0.0)))
    graph = SparseGraph.from_edges(nodes, edges, hubs_first=True, dtype=np.float32)
    chunk_ids = sorted(chunks)
    chunk_nodes = np.fromiter((graph.index[chunk_node(c)] for c in chunk_ids), dtype=np.int64, count=len(chunk_ids))
    # in name order, whatever the walk's numbering, so that equal masses rank by name
    entity_nodes = np.array([graph.index[n] for n in sorted(graph.index) if n.startswith("e\x1f")], dtype=np.int64)
    return EntityGraph(versions=versions, graph=graph, chunk_nodes=chunk_nodes, chunk_ids=chunk_ids,
                       chunk_index={c: i for i, c in enumerate(chunk_ids)}, mentions=mentions,
                       entity_nodes=entity_nodes)


_cache: weakref.WeakKeyDictionary[DocStore, dict[tuple, EntityGraph]] = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


def graph_versions(store: DocStore, tenant: str, kb_ids: Sequence[str]) -> tuple[tuple[str, int], ...]:
    return graph_state(store, tenant, kb_ids).versions


def entity_graph(store: DocStore, tenant: str, kb_ids: Sequence[str], chunk_link_weight: float = 1.0,
                 versions: tuple[tuple[str, int], ...] | None = None) -> EntityGraph:
    """The cached graph for these knowledge bases, rebuilt when any of their versions (read when not
    given) moved."""
    versions = versions if versions is not None else graph_versions(store, tenant, kb_ids)
    key = (tenant, tuple(sorted(kb_ids)), chunk_link_weight)
    with _cache_lock:
        per_store = _cache.setdefault(store, {})
        cached = per_store.get(key)
    if cached is not None and cached.versions == versions:
        return cached
    built = _graph_from_disk(store, key, versions)
    if built is None:
        built = build_entity_graph(store, tenant, kb_ids, versions, chunk_link_weight)
        _graph_to_disk(store, key, versions, built)
    with _cache_lock:
        per_store[key] = built
    return built


def _graph_from_disk(store: DocStore, key: tuple, versions: tuple[tuple[str, int], ...]) -> EntityGraph | None:
    files = store.index_files()
    if files is None or not _persistable(versions):
        return None
    loaded = files.load(key, EntityGraph, sum(v for _, v in versions))
    return loaded[1] if loaded is not None and loaded[1].versions == versions else None


def _graph_to_disk(store: DocStore, key: tuple, versions: tuple[tuple[str, int], ...], graph: EntityGraph) -> None:
    files = store.index_files()
    if files is not None and _persistable(versions) and graph.graph.size >= PERSIST_MIN_ROWS:
        files.save(key, sum(v for _, v in versions), graph)


def _persistable(versions: tuple[tuple[str, int], ...]) -> bool:
    # a graph without a graph_meta row (version -1) can change without its version moving
    return all(version > 0 for _, version in versions)


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


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
    ``kg.anchor_relations``) adds the far end of the best ``relation_seed_top_n`` of them, at anchor
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
                 params: PPRParams, confidence: float = 1.0) -> tuple[dict[str, float], np.ndarray]:
    """Final chunk scores (in [0, 1]) of the best candidates, and the raw PPR vector. The entity
    seeds take ``1 - chunk_seed_share`` of the restart mass times ``confidence`` (``ppr_seeds``: a
    seed barely over its ramp's low end must not take the walk over), the naive hits the rest."""
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
    vector = ppr_vector(graph.graph, restart, damping=params.damping, tol=params.tol) if restart \
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
    ``fact_filter`` x the best one, as ``kg.ranked_facts`` sets the bar). A fact counts by its anchor's
    weight (``kg.fact_leads``), and all of them by the best anchor's, so a fact of an anchor on its
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
        if score < params.fact_filter * best:
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
                         question: np.ndarray, naive: Sequence[ChunkHit], walked: dict[str, float],
                         params: PPRParams, vector_weight: float, floor: float,
                         facts: dict[int, dict[str, float]] | None = None, named: Mapping[int, float] | None = None
                         ) -> dict[str, float] | None:
    """Chunk scores in (0, 1) from passage chains (``kbgraph.search.chains``) over the naive hits
    and the walk's best chunks; None when no candidate has a stored vector of the question's size."""
    chains = params.chains
    assert chains is not None
    dim = len(question)
    sample = vector_sample(store, tenant, kb_ids, graph, dim, chains.sample_size)
    walk_best = sorted(walked, key=lambda c: (-walked[c], c))[:params.chain_walk_candidates]
    known = naive_cosines(naive, floor)  # naive measured these: no vector to read
    unknown = [c for c in dict.fromkeys([h.chunk_id for h in naive] + walk_best) if c not in known]
    vectors = read_vectors(store, tenant, kb_ids, unknown, dim)
    if not (vectors or known) or not len(sample):
        return None
    view = chain_graph(graph)
    base = base_scores(vectors, question, sample, naive, chains, vector_weight, floor, known)
    reached = read_vectors(store, tenant, kb_ids, sorted(chain_targets(view, base, chains, named) - set(base)), dim)
    base.update(base_scores(reached, question, sample, naive, chains, vector_weight, floor))
    final, _ = chain_scores(view, base, chains, facts, named)
    # a logistic keeps the order and gives the page a score in (0, 1)
    return {cid: 1.0 / (1.0 + math.exp(-z)) for cid, z in final.items()}


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
                known: dict[tuple[str, str], dict], limit: int) -> dict[tuple[str, str], dict]:
    """The rows ``rank_entities`` needs to rank the first ``limit`` of ``scores`` with no PageRank
    prior (by score rounded to 6 places, then name): those scoring at least the ``limit``-th, the
    others only when some of those have gone. Rows in ``known`` (read by the seed searches) are
    not read again."""
    ordered = sorted(scores, key=lambda n: -round(scores[n], 6))
    cut = round(scores[ordered[limit - 1]], 6) if len(ordered) > limit else -math.inf
    first = [n for n in ordered if round(scores[n], 6) >= cut]
    docs: dict[tuple[str, str], dict] = {}
    for group in (first, ordered[len(first):]):
        docs.update({n: known[n] for n in group if n in known})
        docs.update(_fetch_entities(store, tenant, kb_ids, [n for n in group if n not in docs]))
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


def retrieve_ppr(store: DocStore, tenant: str, kb_ids: Sequence[str], analysis: QueryAnalysis,
                 vector: np.ndarray | None, naive: Sequence[ChunkHit], params: PPRParams = PPRParams(),
                 embedder: Embedder | None = None, vector_weight: float = 0.5) -> PPRResult:
    """``vector_weight``: the knowledge base's weight of vector against text similarity (as naive
    search uses it), for the chains' scores."""
    floor = embedder.similarity_floor if embedder is not None else 0.0
    state = graph_state(store, tenant, kb_ids)
    graph = entity_graph(store, tenant, kb_ids, params.chunk_link_weight, state.versions)
    seeds = seed_entities(store, tenant, kb_ids, analysis, vector, params.kg, embedder, state)
    about = anchor_relations(store, tenant, kb_ids, anchor_weights(seeds, params), analysis, vector, params.kg)
    entity_seeds, confidence = ppr_seeds(seeds, graph, params, about)
    scores, walk = chunk_scores(graph, entity_seeds, naive, params, confidence)
    if params.chains is not None and vector is not None:
        facts = fact_ends(seeds, graph, params, about)
        named = named_weights(seeds, graph, params)
        scores = chained_chunk_scores(store, tenant, kb_ids, graph, np.asarray(vector, dtype=np.float32), naive,
                                      scores, params, vector_weight, floor, facts, named) or scores

    by_id = {h.chunk_id: h for h in naive}
    chunks = fetch_chunks(store, tenant, kb_ids, scores, params.chunk_top_n, "ppr",
                          {h.chunk_id: chunk_row(h) for h in naive})
    for chunk in chunks:
        hit = by_id.get(chunk.chunk_id)
        if hit is not None:
            chunk.similarity, chunk.vector_similarity, chunk.term_similarity = (
                hit.similarity, hit.vector_similarity, hit.term_similarity)
            chunk.sources = ["naive", "ppr"] if chunk.chunk_id in graph.chunk_index else ["naive"]
    chunks = fit_chunks(chunks, params.budget.chunks)

    # the entities the walk settled on, for the structured result and the context
    entity_mass = top_entities(graph, walk, params.entity_top_n * 3)
    top = max(entity_mass.values(), default=0.0)
    normalized = {n: m / top for n, m in entity_mass.items()} if top > 0 else {}
    docs = entity_rows(store, tenant, kb_ids, normalized, seeds.docs, params.entity_top_n)
    entities = rank_entities(normalized, {}, docs, 0.0)[:params.entity_top_n]
    entities = within_budget(entities, entity_row, params.budget.entities)
    return PPRResult(entities=entities, chunks=chunks, context=render_context(chunks, entities),
                     citations=citation_map(chunks))
