"""The `kg` retrieval mode: question -> entities, relations, community reports and their chunks.

Scoring, every part in [0, 1]:

- seed relevance r(e) of an entity: probabilistic OR of its hybrid entity-search score (BM25 over
  names, boosted, and descriptions + kNN over entity vectors), an exact-name match of an analysed
  entity (1.0) and an answer-type match (BM25 of the keywords over descriptions, or the type itself);
- neighbour expansion, up to ``hops`` relations away, read from relation rows on demand: a
  neighbour b of a frontier entity a gets ``r(a) * decay * (0.5 + 0.5 * w/w_max(a))`` per path,
  the contributions of different paths OR-ed together, so an entity linking two question entities
  outranks one hanging off a single one;
- final entity score ``(1 - p) * r + p * pagerank/max_pagerank`` (a small PageRank prior);
- a relation scores by its own hybrid search score OR-ed with the score of the expansion that used
  it, plus the same small weight prior;
- a report scores by the summed scores of the chosen entities among its members (normalized)
  OR-ed with its own hybrid search score over report content;
- a chunk scores by the summed scores of the chosen entities and relations citing it, each
  damped by how many chunks it cites (an entity named everywhere says little about any one chunk).
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from kbgraph.graph.keys import normalize_key
from kbgraph.llm.base import Embedder
from kbgraph.parse.tokenize import tokenize, tokenize_query
from kbgraph.search.context import (
    Budget,
    EntityHit,
    RelationHit,
    ReportHit,
    RetrievedChunk,
    any_of_scores,
    citation_map,
    entity_row,
    fit_chunks,
    relation_row,
    render_context,
    report_block,
    within_budget,
)
from kbgraph.search.graph_cache import (
    LISTING_ENTRIES,
    Edge,
    GraphState,
    RelationAdjacency,
    cached,
    edges_in_order,
    graph_state,
    holds_kind,
    read_relations_touching,
    relation_adjacency,
)
from kbgraph.search.query_analysis import QueryAnalysis
from kbgraph.store.base import (
    Condition,
    DocStore,
    Hit,
    SearchRequest,
    TextQuery,
    VectorQuery,
    any_of,
    eq,
    vector_field,
)
from kbgraph.store.index_files import array_strings, strings_array
from kbgraph.store.records import CommunityReport, Entity, EntityMention, Relation, entity_id

ENTITY_FIELDS = ["id", "kb_id", "entity_key_kwd", "name_kwd", "entity_type_kwd", "content_with_weight",
                 "chunk_ids_kwd", "pagerank_flt", "community_ids_kwd", "mention_count_int"]
RELATION_FIELDS = ["id", "kb_id", "src_key_kwd", "tgt_key_kwd", "src_name_kwd", "tgt_name_kwd",
                   "content_with_weight", "keywords_kwd", "weight_flt", "chunk_ids_kwd"]
REPORT_FIELDS = ["id", "kb_id", "level_int", "community_kwd", "title_kwd", "content_with_weight",
                 "findings_with_weight", "rating_flt", "entity_keys_kwd"]
CHUNK_FIELDS = ["id", "kb_id", "doc_id", "docnm_kwd", "content_with_weight", "position_int", "available_int"]


@dataclass(frozen=True)
class KGParams:
    entity_top_n: int = 12
    relation_top_n: int = 12
    report_top_n: int = 3
    chunk_top_n: int = 8
    search_top_n: int = 24  # hits taken from each entity/relation/report search
    name_boost: float = 3.0
    vector_weight: float = 0.5
    exact_score: float = 1.0
    type_score: float = 0.5  # an answer-type match is weaker evidence than a name match
    question_weight: float = 0.5  # whole-question entity search, next to the per-entity lookups
    entity_matches: int = 3  # hits kept per analysed entity
    hops: int = 2
    hop_decay: float = 0.5
    frontier: int = 4  # best entities expanded per hop (more mostly adds hub noise)
    pagerank_weight: float = 0.1
    weight_prior: float = 0.1  # the same small prior for relations, from their weight
    min_score: float = 0.05
    # once the question's own entities are found, evidence that only matches the question's words
    # elsewhere in the graph counts at loose_weight. An anchored entity counts as one of the question's
    # anchors by a weight rising linearly from 0 at anchor_low to 1 at anchor_high (``ramp``), not by a
    # cut: the stores' BM25 differs in the third digit (Lucene keeps field lengths in one byte), and a
    # cut turned 0.4994 against 0.5014 into an entity scored 0.26 on one store and 0.52 on the other.
    # 0.4-0.6 lost zh-news-large kg 1.4 points of recall@5 (a seed at 0.47 half an anchor); the walk
    # takes 0.4-0.6 (PPRParams.seed_low)
    anchor_low: float = 0.45
    anchor_high: float = 0.55
    loose_weight: float = 0.5
    # a fact of an anchor weighing at least this sets the fact filter's bar in full (kg.present)
    fact_presence: float = 0.25
    relation_gain: float = 1.0  # how much an anchor relation's relevance to the question adds to a hop
    anchor_relation_top_n: int = 24  # relations of the anchors scored against the question, per side
    support_power: float = 2.0  # chunk support sums score**power: confident evidence dominates
    prominence: bool = True  # spread an entity's support over its chunks by its mention weight in each
    relation_support: float = 1.0  # weight of a chunk's best relation next to its entities' sum
    # an entity reached by expansion keeps score * specificity(its chunks)**hub_damping: the narrator of
    # a chat log or a country is a neighbour of everything and says nothing about which chunk answers
    hub_damping: float = 1.0
    # question entities named by the question are damped the same way, but softer (they were asked for)
    seed_damping: float = 0.5
    # bridge chunks: the passages about the far ends of the question's best facts (an anchor's relations
    # scored against the rest of the question), the facts kept when scoring at least fact_filter x the best
    fact_top_n: int = 3
    fact_filter: float = 0.5
    fact_min_score: float = 0.5  # a fact matching the question less is a co-occurrence, not what it asks
    budget: Budget = field(default_factory=Budget)


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


# --------------------------------------------------------------------------------------- helpers

Node = tuple[str, str]  # (kb_id, key): keys are only unique within a knowledge base


def _entity_hit(doc: dict, score: float, hops: int = 0) -> EntityHit:
    return EntityHit(id=doc["id"], kb_id=doc.get("kb_id", ""), key=doc.get("entity_key_kwd", ""),
                     name=doc.get("name_kwd", "") or doc.get("entity_key_kwd", ""),
                     type=doc.get("entity_type_kwd", ""), description=doc.get("content_with_weight", ""),
                     score=score, pagerank=float(doc.get("pagerank_flt", 0.0) or 0.0), hops=hops,
                     chunk_ids=list(doc.get("chunk_ids_kwd") or []),
                     community_ids=list(doc.get("community_ids_kwd") or []))


def _relation_hit(doc: dict, score: float) -> RelationHit:
    return RelationHit(id=doc["id"], kb_id=doc.get("kb_id", ""), src_key=doc.get("src_key_kwd", ""),
                       tgt_key=doc.get("tgt_key_kwd", ""), src_name=doc.get("src_name_kwd", "") or doc.get("src_key_kwd", ""),
                       tgt_name=doc.get("tgt_name_kwd", "") or doc.get("tgt_key_kwd", ""),
                       description=doc.get("content_with_weight", ""), score=score,
                       weight=float(doc.get("weight_flt", 0.0) or 0.0), keywords=list(doc.get("keywords_kwd") or []),
                       chunk_ids=list(doc.get("chunk_ids_kwd") or []))


def report_content(doc: dict) -> str:
    parts = [doc.get("content_with_weight", "")]
    for finding in doc.get("findings_with_weight") or []:
        if isinstance(finding, dict):
            parts.append(f"- {finding.get('summary', '')}: {finding.get('explanation', '')}".rstrip(": "))
    return "\n".join(p for p in parts if p.strip())


def _report_hit(doc: dict, score: float) -> ReportHit:
    return ReportHit(id=doc["id"], kb_id=doc.get("kb_id", ""), level=int(doc.get("level_int", 0) or 0),
                     community=doc.get("community_kwd", ""), title=doc.get("title_kwd", ""),
                     content=report_content(doc), score=score, rating=float(doc.get("rating_flt", 0.0) or 0.0))


def kind_search(store: DocStore, tenant: str, kb_ids: Sequence[str], kind: str, tokens: Sequence[str],
                fields: dict[str, float], vector: np.ndarray | None, limit: int, vector_weight: float,
                where: Sequence[Condition] = (), returned: Sequence[str] | None = None,
                floor: float = 0.0) -> list[Hit]:
    """Hybrid (or text-only / vector-only) search over one kind of graph row; ``floor`` is the
    embedding model's similarity floor (VectorQuery)."""
    if not tokens and vector is None:
        return []
    request = SearchRequest(
        kb_ids=list(kb_ids), where=[eq("knowledge_graph_kwd", kind), *where],
        text=TextQuery(tokens=list(tokens), fields=fields) if tokens else None,
        vector=VectorQuery(field=vector_field(len(vector)), vector=np.asarray(vector).tolist(), floor=floor)
        if vector is not None else None,
        vector_weight=vector_weight, candidates=max(limit * 4, 64), limit=limit, fields=returned)
    return store.search(tenant, request).hits


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


# ------------------------------------------------------------------------------------- retrieval

def specificity(chunks: int, total: int) -> float:
    """IDF-like specificity in (0, 1] of an entity cited by ``chunks`` of ``total`` chunks:
    ``log(1 + total/chunks) / log(1 + total)`` is 1 for an entity of one chunk and falls to
    log 2 / log(1 + total) for one in every chunk (never 0: a question may still ask about a hub)."""
    total = max(1, total)
    chunks = min(max(1, chunks), total)
    return math.log1p(total / chunks) / math.log1p(total)


@dataclass(frozen=True)
class Citations:
    """How many chunks cite each entity, and how many chunks the graph's entities cite in all."""

    counts: dict[Node, int]
    total: int

    def specificity(self, node: Node) -> float:
        return specificity(self.counts.get(node, 1), self.total)

    # kept on disk by graph_cache.cached (a new process reads them instead of scanning every entity)
    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"nodes": strings_array([f"{kb}\x1f{key}" for kb, key in self.counts]),
                "counts": np.fromiter(self.counts.values(), dtype=np.int64, count=len(self.counts)),
                "total": np.array([self.total], dtype=np.int64)}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Citations:
        nodes = [tuple(n.split("\x1f", 1)) for n in array_strings(arrays["nodes"])]
        return cls(dict(zip(nodes, arrays["counts"].tolist())), int(arrays["total"][0]))

    @property
    def rows(self) -> int:
        return len(self.counts)


def entity_citations(store: DocStore, tenant: str, kb_ids: Sequence[str], state: GraphState) -> Citations:
    """The chunk counts of every entity, read once per graph state (one scan of the entity rows)."""
    def read() -> Citations:
        counts: dict[Node, int] = {}
        chunks: set[str] = set()
        for doc in store.scan(tenant, list(kb_ids), [eq("knowledge_graph_kwd", Entity.KIND)],
                              fields=["kb_id", "entity_key_kwd", "chunk_ids_kwd"]):
            cited = doc.get("chunk_ids_kwd") or []
            counts[(doc.get("kb_id", ""), doc.get("entity_key_kwd", ""))] = len(cited)
            chunks.update(cited)
        return Citations(counts, len(chunks))

    return cached(store, ("citations", tenant, tuple(sorted(kb_ids))), state, read, LISTING_ENTRIES,
                  persist=Citations)


def name_match(query_tokens: Sequence[str], name_tokens: str) -> float:
    """Jaccard overlap of a query entity's tokens with an entity's name (and alias) tokens."""
    q, e = set(query_tokens), set(name_tokens.split())
    return len(q & e) / len(q | e) if q and e else 0.0


@dataclass
class Seeds:
    scores: dict[Node, float]  # seed relevance r(e)
    docs: dict[Node, dict]  # their rows
    anchored: set[Node]  # matched by an analysed entity (by key or by its own search)
    loose_factor: float = 1.0  # what question-only matches were scaled by (< 1 when anchors were found)

    def anchor_weights(self, low: float, high: float) -> dict[Node, float]:
        """Anchored entity -> how much it counts as one of the question's anchors (``ramp`` of its
        score between ``low`` and ``high``), for those above ``low``."""
        weights = {n: ramp(self.scores.get(n, 0.0), low, high) for n in self.anchored}
        return {n: w for n, w in weights.items() if w > 0}


def ramp(score: float, low: float, high: float) -> float:
    """0 up to ``low``, 1 from ``high`` on, linear between: a seed's weight as an anchor, so that a
    small change of its score makes a small change of the ranking (``low == high`` is a cut)."""
    if score >= high:
        return 1.0
    if score <= low:
        return 0.0
    return (score - low) / (high - low)


def relation_ends(doc: dict) -> tuple[Node, Node]:
    kb = doc.get("kb_id", "")
    return (kb, doc.get("src_key_kwd", "")), (kb, doc.get("tgt_key_kwd", ""))


def anchored_facts(about: Mapping[str, tuple[float, dict]], weights: Mapping[Node, float]
                   ) -> dict[str, tuple[float, dict]]:
    """The anchors' relations scored against the question (``anchor_relations``) times the anchor
    weight of their better end: a relation of an entity that is only half an anchor half counts."""
    out: dict[str, tuple[float, dict]] = {}
    for rid, (score, doc) in about.items():
        src, tgt = relation_ends(doc)
        out[rid] = (score * max(weights.get(src, 0.0), weights.get(tgt, 0.0)), doc)
    return out


def present(weight: float, presence: float) -> float:
    """How much a fact of an anchor of this weight sets the bar of the fact filter: fully from
    ``presence`` on (a fact of an anchor at 0.8 is as much the question's best fact as one at 1)."""
    return min(1.0, weight / presence) if presence > 0 else float(weight > 0)


def ranked_facts(about: Mapping[str, tuple[float, dict]], weights: Mapping[Node, float], top_n: int,
                 fact_filter: float, presence: float, min_score: float = 0.0) -> list[tuple[float, dict]]:
    """The question's facts (the anchors' relations scored against it, ``anchor_relations``) as
    HippoRAG 2 filters the retrieved facts: the best ``top_n`` by ``anchored_facts``, each kept
    (score, row) when its own score is at least ``fact_filter`` x the best and ``min_score``. The
    filter compares a fact's own score, so an anchor moving along its ramp scales its facts' part
    (``fact_leads``) without dropping one across the filter; the best is a fact's own score too,
    counted in full once its anchor's weight reaches ``presence`` (``present``): weighed by the
    anchor's weight, a best fact of an anchor at 0.8 let facts under the filter through."""
    weighted = anchored_facts(about, weights)
    ranked = sorted((rid for rid, (value, _) in weighted.items() if value > 0),
                    key=lambda rid: (-weighted[rid][0], weighted[rid][1].get("id", "")))[:top_n]
    best = max((about[rid][0] * present(weighted[rid][0] / about[rid][0], presence)
                for rid in ranked if about[rid][0] > 0), default=0.0)
    if best <= 0:
        return []
    return [about[rid] for rid in ranked if about[rid][0] >= max(fact_filter * best, min_score)]


def fact_leads(doc: dict, weights: Mapping[Node, float]) -> list[tuple[Node, Node, float]]:
    """(near, far, weight) of a fact read from one of the question's anchors to its other end: near's
    anchor weight times how much far is *not* an anchor (a fact between two of the question's own
    entities leads nowhere)."""
    src, tgt = relation_ends(doc)
    leads = [(near, far, weights.get(near, 0.0) * (1.0 - weights.get(far, 0.0)))
             for near, far in ((src, tgt), (tgt, src))]
    return [lead for lead in leads if lead[2] > 0]


def typed_entities(store: DocStore, tenant: str, kb_ids: Sequence[str], types: Sequence[str], limit: int,
                   fields: Sequence[str], state: GraphState) -> list[Hit]:
    """The ``limit`` entities of these types with the highest PageRank, best first.

    The same few answer types ("organization", "person") come back question after question and
    their listing walks the PageRank index, so it is kept until the graph changes (``graph_cache``).
    """
    def listing() -> list[Hit]:
        return store.search(tenant, SearchRequest(
            kb_ids=list(kb_ids), where=[eq("knowledge_graph_kwd", Entity.KIND), any_of("entity_type_kwd", types)],
            order_by=[("pagerank_flt", "desc")], limit=limit, fields=list(fields), count_total=False)).hits

    key = ("typed", tenant, tuple(sorted(kb_ids)), tuple(types), limit, tuple(fields))
    # callers keep the rows they are handed: each gets its own copies
    return [Hit(id=h.id, doc=dict(h.doc), score=h.score) for h in
            cached(store, key, state, listing, LISTING_ENTRIES)]


def seed_entities(store: DocStore, tenant: str, kb_ids: Sequence[str], analysis: QueryAnalysis,
                  vector: np.ndarray | None, params: KGParams, embedder: Embedder | None = None,
                  state: GraphState | None = None) -> Seeds:
    """Seed relevance r(e) of entities matched by the question.

    Each analysed entity is looked up by its key (exact, score 1) and searched on its own (its
    tokens over names, its embedding over entity vectors; the best ``entity_matches`` hits score by
    name overlap and vector similarity), so one entity of the question cannot be crowded out by
    another. The whole question is searched as well, at ``question_weight``, because an analysis
    can miss entities; generic words of the question that happen to be entity names ("country",
    "charge") then stay weak seeds. ``state`` (read when not given) lets the answer-type listing
    come from the cache.
    """
    docs: dict[Node, dict] = {}
    parts: dict[Node, list[float]] = defaultdict(list)  # question-only (loose) evidence
    anchor_parts: dict[Node, list[float]] = defaultdict(list)  # evidence from an analysed entity
    anchored: set[Node] = set()

    def note(doc: dict, score: float, anchor: bool = False) -> None:
        node = (doc.get("kb_id", ""), doc.get("entity_key_kwd", ""))
        docs.setdefault(node, doc)
        (anchor_parts if anchor else parts)[node].append(score)
        if anchor:
            anchored.add(node)

    fields = [*ENTITY_FIELDS, "name_ltks"]
    floor = embedder.similarity_floor if embedder is not None else 0.0
    tokens = tokenize_query(" ".join([analysis.question, *analysis.entities]))
    for hit in kind_search(store, tenant, kb_ids, Entity.KIND, tokens,
                           {"name_ltks": params.name_boost, "content_ltks": 1.0}, vector,
                           params.search_top_n, params.vector_weight, returned=fields, floor=floor):
        note(hit.doc, params.question_weight * hit.score)

    names = list(dict.fromkeys(n for n in analysis.entities if normalize_key(n)))
    keys = list(dict.fromkeys(normalize_key(n) for n in names))
    if keys:
        ids = [entity_id(kb, key) for kb in kb_ids for key in keys]
        for doc in store.get(tenant, list(kb_ids), ids, fields=fields):
            note(doc, params.exact_score, anchor=True)
    if names and params.entity_matches > 0:
        name_vectors = embedder.embed_query(names) if embedder is not None else [None] * len(names)
        for name, name_vector in zip(names, name_vectors):
            name_tokens = tokenize(name)
            for hit in kind_search(store, tenant, kb_ids, Entity.KIND, name_tokens, {"name_ltks": 1.0}, name_vector,
                                   params.entity_matches, params.vector_weight, returned=fields, floor=floor):
                overlap = name_match(name_tokens, hit.doc.get("name_ltks", ""))
                similarity = hit.vector_score if name_vector is not None else overlap
                note(hit.doc, 0.5 * overlap + 0.5 * similarity, anchor=True)

    if analysis.keywords:
        kw_tokens = tokenize_query(" ".join(analysis.keywords))
        for hit in kind_search(store, tenant, kb_ids, Entity.KIND, kw_tokens, {"content_ltks": 1.0}, None,
                               params.search_top_n, 0.0, returned=fields):
            note(hit.doc, params.type_score * hit.score)
        types = sorted({k.strip().lower() for k in analysis.keywords if k.strip()})
        typed = typed_entities(store, tenant, kb_ids, types, params.search_top_n, fields,
                               state if state is not None else graph_state(store, tenant, kb_ids))
        top_rank = max((float(h.doc.get("pagerank_flt", 0.0) or 0.0) for h in typed), default=0.0)
        for hit in typed:
            rank = float(hit.doc.get("pagerank_flt", 0.0) or 0.0)
            note(hit.doc, params.type_score * 0.5 * (1.0 + (rank / top_rank if top_rank > 0 else 0.0)))

    anchor_scores = {node: any_of_scores(*values) for node, values in anchor_parts.items()}
    # a question that names entities we found is about them: its other words matching entities
    # elsewhere (a registry of other guilds, every "founder") is the lexical evidence naive search
    # already has, so it counts for less than what is said about the named entities
    found = max((ramp(v, params.anchor_low, params.anchor_high) for v in anchor_scores.values()), default=0.0)
    loose = 1.0 - found * (1.0 - params.loose_weight)
    scores = {node: any_of_scores(anchor_scores.get(node, 0.0), *(loose * v for v in parts.get(node, ())))
              for node in set(parts) | set(anchor_parts)}
    return Seeds(scores, docs, anchored, loose)


def _relations_touching(store: DocStore, tenant: str, kb_ids: Sequence[str], nodes: Sequence[Node]) -> list[Edge]:
    return edges_in_order(read_relations_touching(store, tenant, kb_ids, nodes).values())


def anchor_relations(store: DocStore, tenant: str, kb_ids: Sequence[str], anchors: Mapping[Node, float],
                     analysis: QueryAnalysis, vector: np.ndarray | None, params: KGParams
                     ) -> dict[str, tuple[float, dict]]:
    """The relations of the question's anchored entities (entity -> anchor weight, ``anchor_weights``),
    scored by how well they match the rest of the question: relation id -> (hybrid score in [0, 1], row).
    The score is the relation's own; ``anchored_facts`` weighs it by its anchor.

    The text query leaves out the anchors' own names (every one of their relations says them), so
    "the guild *founded* by Mira Castell" ranks Mira Castell's founding relation above her others.
    This is what lets a retriever follow the relation the question asks about rather than whatever
    the anchor is most often mentioned with. The full anchors are searched together, an anchor on its
    ramp on its own: one that barely counts neither takes their places in the search nor its words.
    """
    if not anchors or params.anchor_relation_top_n <= 0:
        return {}
    full = {n for n, w in anchors.items() if w >= 1.0}
    groups = ([full] if full else []) + [{n} for n in sorted(set(anchors) - full)]
    out: dict[str, tuple[float, dict]] = {}
    for group in groups:
        for rid, (score, doc) in _relations_of(store, tenant, kb_ids, group, full, analysis, vector, params).items():
            if score > out.get(rid, (0.0, doc))[0]:
                out[rid] = (score, doc)
    return out


def _relations_of(store: DocStore, tenant: str, kb_ids: Sequence[str], group: set[Node], full: set[Node],
                  analysis: QueryAnalysis, vector: np.ndarray | None, params: KGParams
                  ) -> dict[str, tuple[float, dict]]:
    keys = sorted({key for _, key in group})
    named = {t for _, key in group | full for t in tokenize(key)}
    named.update(t for name in analysis.entities for t in tokenize(name))
    tokens = [t for t in tokenize_query(" ".join([analysis.question, *analysis.keywords])) if t not in named]
    if not tokens and vector is None:
        return {}
    out: dict[str, tuple[float, dict]] = {}
    for side in ("src_key_kwd", "tgt_key_kwd"):
        for hit in kind_search(store, tenant, kb_ids, Relation.KIND, tokens, {"content_ltks": 1.0}, vector,
                               params.anchor_relation_top_n, params.vector_weight, where=[any_of(side, keys)],
                               returned=RELATION_FIELDS):
            if (hit.doc.get("kb_id", ""), hit.doc.get(side, "")) not in group:
                continue
            if hit.score > out.get(hit.id, (0.0, hit.doc))[0]:
                out[hit.id] = (hit.score, hit.doc)
    return out


@dataclass
class HopSpread:
    """What one hop passes along: per reached entity (in order of first reach) the probabilistic-OR
    miss of everything it gained, and per walked relation (edge position) its best path score."""

    reached: list[Node]
    misses: np.ndarray
    best: np.ndarray


def spread_hop(edges: Sequence[Edge], frontier: dict[Node, float], relevance: Mapping[str, float],
               params: KGParams) -> HopSpread:
    """One hop of ``expand`` over the relations touching ``frontier`` (entity -> score).

    Hubs bring hundreds of relations each, so this runs on arrays: each relation is walked from
    whichever of its ends is in the frontier, passing ``score * any_of(hop_factor, gain * relevance)``.
    """
    n = len(edges)
    at = {node: i for i, node in enumerate(frontier)}
    scores = np.fromiter(frontier.values(), dtype=np.float64, count=len(frontier))
    weights = np.fromiter((e.weight for e in edges), dtype=np.float64, count=n)
    sources, targets = [e.src for e in edges], [e.tgt for e in edges]
    # walks in relation order, each relation's walk from its source first: walk 2i goes from
    # sources[i] to targets[i], walk 2i + 1 back; a walk exists where it starts in the frontier
    starts_at = np.fromiter(map(at.get, [x for pair in zip(sources, targets) for x in pair], repeat(-1)),
                            dtype=np.int64, count=2 * n)
    walks = np.flatnonzero(starts_at >= 0)
    from_at = starts_at[walks]
    relation = walks // 2
    heaviest = np.zeros(len(frontier))  # each frontier entity's heaviest relation
    np.fmax.at(heaviest, from_at, weights[relation])
    miss = 1.0 - _clipped(hop_factors(weights[relation], heaviest[from_at], params.hop_decay))
    if relevance:
        gains = np.fromiter((relevance.get(e.id, 0.0) for e in edges), dtype=np.float64, count=n)
        miss = miss * (1.0 - _clipped(params.relation_gain * gains[relation]))
    passed = np.zeros(2 * n)
    passed[walks] = scores[from_at] * (1.0 - miss)
    # the far end of each walk, numbered in order of first reach
    ends = [x for pair in zip(targets, sources) for x in pair]
    reached_nodes = [ends[i] for i in walks.tolist()]
    numbers = {node: i for i, node in enumerate(dict.fromkeys(reached_nodes))}
    far = np.fromiter(map(numbers.__getitem__, reached_nodes), dtype=np.int64, count=len(reached_nodes))
    # every walk into an entity multiplies its miss, in walk order (stable sort keeps it)
    grouped = np.argsort(far, kind="stable")
    firsts = np.flatnonzero(np.r_[True, np.diff(far[grouped]) != 0]) if len(grouped) else np.zeros(0, dtype=np.int64)
    misses = np.multiply.reduceat(1.0 - _clipped(passed[walks][grouped]), firsts) if len(grouped) else np.zeros(0)
    passed = passed.reshape(n, 2)
    return HopSpread(list(numbers), misses, passed.max(axis=1))


def expand(store: DocStore, tenant: str, kb_ids: Sequence[str], seeds: dict[Node, float], params: KGParams,
           relevance: dict[str, float] | None = None, adjacency: RelationAdjacency | None = None,
           citations: Citations | None = None
           ) -> tuple[dict[Node, float], dict[Node, int], dict[str, tuple[float, Edge]]]:
    """Spread seed relevance along relations for ``params.hops`` hops.

    ``relevance`` (relation id -> [0, 1], see ``anchor_relations``) widens a hop along a relation
    the question asks about: it passes ``any_of(hop_factor, relation_gain * relevance)`` of the
    entity's score instead of ``hop_factor`` alone.

    Returns entity scores (seeds included), the hop at which each entity was first reached, and
    for every relation walked its best path score and the relation (``relation_rows`` reads the rows
    of those that are shown). Relations come from ``adjacency`` when given (cached per graph state:
    hubs are met by question after question and have hundreds of relations), else from the store.
    With ``citations``, what a reached entity gains is scaled by its specificity to
    ``params.hub_damping``, so a hub neither ranks high nor leads the next hop.
    """
    relevance = relevance or {}
    scores = dict(seeds)
    hops = {node: 0 for node in seeds}
    walked: dict[str, tuple[float, Edge]] = {}
    frontier = sorted((n for n, s in seeds.items() if s >= params.min_score), key=lambda n: (-seeds[n], n))
    frontier = frontier[:params.frontier]
    for hop in range(1, params.hops + 1):
        if not frontier:
            break
        edges = adjacency.touching(frontier) if adjacency is not None else \
            _relations_touching(store, tenant, kb_ids, frontier)
        spread = spread_hop(edges, {node: scores[node] for node in frontier}, relevance, params)
        for edge, best in zip(edges, spread.best.tolist()):
            if best > 0:
                held = walked.get(edge.id)
                if held is None or best > held[0]:
                    walked[edge.id] = (best, edge)
        before = np.fromiter((scores.get(node, 0.0) for node in spread.reached), dtype=np.float64,
                             count=len(spread.reached))
        gained = 1.0 - spread.misses
        if citations is not None and params.hub_damping > 0:
            gained = gained * np.fromiter((citations.specificity(node) ** params.hub_damping
                                           for node in spread.reached), dtype=np.float64, count=len(spread.reached))
        scores.update(zip(spread.reached, (1.0 - (1.0 - _clipped(before)) * (1.0 - gained)).tolist()))
        reached = [node for node in spread.reached if node not in hops]
        hops.update(dict.fromkeys(reached, hop))
        # the best few of often hundreds of newly reached entities (nsmallest: sorted()[:k], without the sort)
        frontier = heapq.nsmallest(params.frontier, (n for n in reached if scores[n] >= params.min_score),
                                   key=lambda n: (-scores[n], n))
    return scores, hops, walked


def mention_weights(store: DocStore, tenant: str, kb_ids: Sequence[str], nodes: Iterable[Node]
                    ) -> dict[Node, dict[str, float]]:
    """Entity -> chunk id -> weight of its mention there (the nlp extractor's weight is the number
    of the chunk's sentences naming it; an LLM's is its own strength), read from the mention rows."""
    wanted = set(nodes)
    out: dict[Node, dict[str, float]] = defaultdict(dict)
    keys = sorted({key for _, key in wanted})
    for start in range(0, len(keys), 200):
        for doc in store.scan(tenant, list(kb_ids), [eq("knowledge_graph_kwd", EntityMention.KIND),
                                                      any_of("entity_key_kwd", keys[start:start + 200])],
                              fields=["kb_id", "entity_key_kwd", "chunk_id_kwd", "weight_flt"]):
            node = (doc.get("kb_id", ""), doc.get("entity_key_kwd", ""))
            if node in wanted:
                cid = doc.get("chunk_id_kwd", "")
                out[node][cid] = max(out[node].get(cid, 0.0), float(doc.get("weight_flt", 1.0) or 1.0))
    return dict(out)


def _fetch_entities(store: DocStore, tenant: str, kb_ids: Sequence[str], nodes: Iterable[Node]) -> dict[Node, dict]:
    ids = [entity_id(kb, key) for kb, key in nodes]
    out: dict[Node, dict] = {}
    for start in range(0, len(ids), 500):
        for doc in store.get(tenant, list(kb_ids), ids[start:start + 500], fields=ENTITY_FIELDS):
            out[(doc.get("kb_id", ""), doc.get("entity_key_kwd", ""))] = doc
    return out


def rank_entities(scores: dict[Node, float], hops: dict[Node, int], docs: dict[Node, dict],
                  pagerank_weight: float) -> list[EntityHit]:
    ranks = {n: float(d.get("pagerank_flt", 0.0) or 0.0) for n, d in docs.items()}
    top_rank = max(ranks.values(), default=0.0)
    hits = []
    for node, doc in docs.items():
        prior = ranks[node] / top_rank if top_rank > 0 else 0.0
        final = (1.0 - pagerank_weight) * scores.get(node, 0.0) + pagerank_weight * prior
        hits.append(_entity_hit(doc, round(final, 6), hops.get(node, 0)))
    hits.sort(key=lambda e: (-e.score, e.name, e.id))
    return hits


def relation_rows(store: DocStore, tenant: str, kb_ids: Sequence[str], walked: dict[str, tuple[float, Edge]],
                  found: dict[str, tuple[float, dict]]) -> dict[str, tuple[float, dict]]:
    """The walked relations with their rows: taken from ``found`` (search hits) where there, else read.
    A relation whose row has gone since it was walked is left out."""
    unread = [rid for rid in walked if rid not in found]
    rows = {doc["id"]: doc for doc in store.get(tenant, list(kb_ids), unread, fields=RELATION_FIELDS)} if unread else {}
    rows.update({rid: found[rid][1] for rid in walked if rid in found})
    return {rid: (score, rows[rid]) for rid, (score, _) in walked.items() if rid in rows}


def rank_relations(found: dict[str, tuple[float, dict]], walked: dict[str, tuple[float, dict]],
                   weight_prior: float) -> list[RelationHit]:
    rows = {rid: doc for rid, (_, doc) in found.items()}
    rows.update({rid: doc for rid, (_, doc) in walked.items() if rid not in rows})
    top_weight = max((float(d.get("weight_flt", 0.0) or 0.0) for d in rows.values()), default=0.0)
    hits = []
    for rid, doc in rows.items():
        relevance = any_of_scores(found.get(rid, (0.0, doc))[0], walked.get(rid, (0.0, doc))[0])
        prior = float(doc.get("weight_flt", 0.0) or 0.0) / top_weight if top_weight > 0 else 0.0
        hits.append(_relation_hit(doc, round((1.0 - weight_prior) * relevance + weight_prior * prior, 6)))
    hits.sort(key=lambda r: (-r.score, r.src_name, r.tgt_name, r.id))
    return hits


def rank_reports(store: DocStore, tenant: str, kb_ids: Sequence[str], entities: Sequence[EntityHit],
                 tokens: Sequence[str], vector: np.ndarray | None, params: KGParams) -> list[ReportHit]:
    member: dict[str, float] = defaultdict(float)
    docs: dict[str, dict] = {}
    by_kb: dict[str, dict[str, float]] = defaultdict(dict)
    for e in entities:
        by_kb[e.kb_id][e.key] = e.score
    for kb, keyed in by_kb.items():
        for doc in store.scan(tenant, [kb], [eq("knowledge_graph_kwd", CommunityReport.KIND),
                                             any_of("entity_keys_kwd", sorted(keyed))], fields=REPORT_FIELDS):
            docs[doc["id"]] = doc
            member[doc["id"]] = sum(keyed.get(k, 0.0) for k in doc.get("entity_keys_kwd") or [])
    top_member = max(member.values(), default=0.0)
    text: dict[str, float] = {}
    for hit in kind_search(store, tenant, kb_ids, CommunityReport.KIND, tokens, {"content_ltks": 1.0}, vector,
                           params.search_top_n, params.vector_weight, returned=REPORT_FIELDS):
        docs.setdefault(hit.id, hit.doc)
        text[hit.id] = hit.score
    hits = []
    for rid, doc in docs.items():
        relevance = any_of_scores(member.get(rid, 0.0) / top_member if top_member > 0 else 0.0, text.get(rid, 0.0))
        rating = float(doc.get("rating_flt", 0.0) or 0.0)
        # a slight preference for reports their writer rated important, never enough to beat relevance
        final = relevance * (0.9 + 0.1 * min(1.0, max(0.0, rating / 10.0)))
        hits.append(_report_hit(doc, round(final, 6)))
    hits.sort(key=lambda r: (-r.score, r.level, r.id))
    return hits


def fetch_chunks(store: DocStore, tenant: str, kb_ids: Sequence[str], scores: dict[str, float],
                 limit: int, source: str, known: Mapping[str, dict] | None = None) -> list[RetrievedChunk]:
    """The ``limit`` best-scored chunks that still exist and are visible, best first.

    ``known`` holds rows (CHUNK_FIELDS) the caller has already read, e.g. from a chunk search of the
    same question; the others are read from the store."""
    known = known or {}
    ranked = sorted(scores, key=lambda cid: (-scores[cid], cid))
    out: list[RetrievedChunk] = []
    start = 0
    # a chunk may have gone (document deleted since the graph was derived): read on until full
    while len(out) < limit and start < len(ranked):
        batch = ranked[start:start + limit - len(out)]
        start += len(batch)
        unread = [cid for cid in batch if cid not in known]
        read = {doc["id"]: doc for doc in store.get(tenant, list(kb_ids), unread, fields=CHUNK_FIELDS)} if unread else {}
        for cid in batch:
            doc = known.get(cid) or read.get(cid)
            if doc is None or doc.get("available_int", 1) != 1:
                continue
            score = round(scores[cid], 6)
            out.append(RetrievedChunk(chunk_id=doc["id"], kb_id=doc.get("kb_id", ""), doc_id=doc.get("doc_id", ""),
                                      doc_name=doc.get("docnm_kwd", ""), content=doc.get("content_with_weight", ""),
                                      position=int(doc.get("position_int", 0) or 0), score=score,
                                      graph_score=score, sources=[source]))
    return out


def bridge_scores(store: DocStore, tenant: str, kb_ids: Sequence[str], anchors: Mapping[Node, float],
                  about: dict[str, tuple[float, dict]], params: KGParams, citations: Citations | None = None,
                  seed_scores: Mapping[Node, float] | None = None) -> dict[str, float]:
    """Chunk id -> score of the bridge passages of a question; ``anchors``: the question's anchors
    and their weights (``Seeds.anchor_weights``), ``seed_scores`` their relevance (1 when not given).

    The question's facts are its anchors' relations scored against the rest of the question
    (``anchor_relations``); like HippoRAG 2's filtering of the retrieved facts, only the best
    ``fact_top_n`` scoring at least ``fact_filter`` x the best (and ``fact_min_score``) are kept, and
    a far end counts by its specificity (``citations``: a hub at the end of a fact is no bridge to any
    one passage). Each kept fact leads from its
    anchor to the entity at its far end, and the passages *about* that entity (where its mentions
    weigh most) are the bridge: "the guild *founded by* Mira Castell" leads to the guild's own page,
    not to every page that names the guild.
    """
    far: dict[Node, float] = {}
    for score, doc in ranked_facts(about, anchors, params.fact_top_n, params.fact_filter, params.fact_presence,
                                   params.fact_min_score):
        for a, b, weight in fact_leads(doc, anchors):
            damping = citations.specificity(b) ** params.hub_damping if citations is not None else 1.0
            relevance = seed_scores.get(a, 0.0) if seed_scores is not None else 1.0
            far[b] = max(far.get(b, 0.0), score * weight * relevance * damping)
    out: dict[str, float] = {}
    for node, weights in mention_weights(store, tenant, kb_ids, far).items():
        top = max(weights.values(), default=0.0)
        for cid, weight in weights.items():
            if top > 0:
                out[cid] = max(out.get(cid, 0.0), far[node] * weight / top)
    return out


def retrieve_kg(store: DocStore, tenant: str, kb_ids: Sequence[str], analysis: QueryAnalysis,
                vector: np.ndarray | None, params: KGParams = KGParams(), embedder: Embedder | None = None
                ) -> GraphResult:
    state = graph_state(store, tenant, kb_ids)
    seeds = seed_entities(store, tenant, kb_ids, analysis, vector, params, embedder, state)
    seed_docs = seeds.docs
    anchors = seeds.anchor_weights(params.anchor_low, params.anchor_high)
    about = anchor_relations(store, tenant, kb_ids, anchors, analysis, vector, params)
    facts = anchored_facts(about, anchors)
    citations = entity_citations(store, tenant, kb_ids, state)
    seed_scores = {node: score * citations.specificity(node) ** params.seed_damping
                   for node, score in seeds.scores.items()}
    scores, hops, walked = expand(store, tenant, kb_ids, seed_scores, params,
                                  {rid: score for rid, (score, _) in facts.items()},
                                  relation_adjacency(store, tenant, kb_ids, state), citations)

    pool = sorted((n for n, s in scores.items() if s >= params.min_score), key=lambda n: (-scores[n], n))
    pool = pool[:max(params.entity_top_n * 4, 32)]
    docs = {n: seed_docs[n] for n in pool if n in seed_docs}
    docs.update(_fetch_entities(store, tenant, kb_ids, [n for n in pool if n not in docs]))
    entities = rank_entities(scores, hops, docs, params.pagerank_weight)[:params.entity_top_n]
    entities = within_budget(entities, entity_row, params.budget.entities)

    tokens = tokenize_query(" ".join([analysis.question, *analysis.keywords]))
    def anchor_weight(doc: dict) -> float:
        return max(anchors.get(end, 0.0) for end in relation_ends(doc))

    def weighed(doc: dict) -> float:
        # relations matching the question's words anywhere are loose evidence, like loose entity
        # matches; a relation of an anchor counts whole (in between for an anchor on its ramp)
        return seeds.loose_factor + (1.0 - seeds.loose_factor) * anchor_weight(doc)

    found = {h.id: (weighed(h.doc) * h.score, h.doc)
             for h in kind_search(store, tenant, kb_ids, Relation.KIND, tokens, {"content_ltks": 1.0}, vector,
                                  params.search_top_n, params.vector_weight, returned=RELATION_FIELDS,
                                  floor=embedder.similarity_floor if embedder is not None else 0.0)}
    for rid, (score, doc) in facts.items():
        if score > found.get(rid, (0.0, doc))[0]:
            found[rid] = (score, doc)
    chosen = {(e.kb_id, e.key) for e in entities}
    # only walked relations that end at a chosen entity explain anything shown
    shown = {rid: v for rid, v in walked.items() if v[1].src in chosen and v[1].tgt in chosen}
    relations = rank_relations(found, relation_rows(store, tenant, kb_ids, shown, found), params.weight_prior)
    relations = [r for r in relations if r.score >= params.min_score][:params.relation_top_n]
    relations = within_budget(relations, relation_row, params.budget.relations)

    reports = rank_reports(store, tenant, kb_ids, entities, tokenize_query(analysis.question), vector, params) \
        if holds_kind(store, tenant, kb_ids, CommunityReport.KIND, state) else []
    reports = within_budget([r for r in reports if r.score >= params.min_score][:params.report_top_n],
                            report_block, params.budget.reports)

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
    support = {cid: v / top for cid, v in support.items()} if top > 0 else {}
    chunks = fit_chunks(fetch_chunks(store, tenant, kb_ids, support, params.chunk_top_n, "kg"), params.budget.chunks)
    bridged = bridge_scores(store, tenant, kb_ids, anchors, about, params, citations, seeds.scores)
    bridges = fetch_chunks(store, tenant, kb_ids, bridged, params.chunk_top_n, "kg")
    return GraphResult(bridges=bridges, entities=entities, relations=relations, reports=reports, chunks=chunks,
                       context=render_context(chunks, entities, relations, reports), citations=citation_map(chunks))
