"""What the interactive graph view reads: a sample of a big graph, one entity in full, its
neighbours on demand, name suggestions and community reports.

A 100k-entity knowledge base cannot be sent to a browser whole; the view opens on the top
entities by PageRank (optionally of some types or one community) and the relations among them,
and grows as the user expands nodes. Every read here is an indexed query (ordered top-k, key
lookups), never a scan of the whole graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kbgraph.graph.scores import get_entities, join_scores, ranked_entities, score_rows
from kbgraph.parse.tokenize import tokenize_query
from kbgraph.store.base import Condition, DocStore, SearchRequest, TextQuery, any_of, eq
from kbgraph.store.records import (
    CommunityReport, Entity, GraphMeta, Relation, entity_id, graph_meta_id, relation_id,
)

NODE_FIELDS = ["entity_key_kwd", "name_kwd", "entity_type_kwd", "pagerank_flt", "mention_count_int",
               "community_ids_kwd"]
EDGE_FIELDS = ["src_key_kwd", "tgt_key_kwd", "weight_flt", "keywords_kwd"]
# up to this many entities, the relations among them are fetched by their ids (n*(n-1)/2 of them)
_PAIRS_BY_ID = 400


@dataclass
class ViewNode:
    key: str
    name: str
    type: str
    pagerank: float
    mentions: int
    communities: list[str]


@dataclass
class ViewEdge:
    source: str
    target: str
    weight: float
    keywords: list[str]


@dataclass
class CommunityInfo:
    label: str
    level: int
    title: str
    size: int
    rating: float


@dataclass
class GraphSample:
    nodes: list[ViewNode] = field(default_factory=list)
    edges: list[ViewEdge] = field(default_factory=list)
    total_entities: int = 0
    total_relations: int = 0
    version: int = 0  # the graph version sampled (facets stay valid while it does)
    types: list[tuple[str, int]] = field(default_factory=list)
    communities: list[CommunityInfo] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _node(doc: dict[str, Any]) -> ViewNode:
    return ViewNode(key=doc["entity_key_kwd"], name=doc.get("name_kwd", ""), type=doc.get("entity_type_kwd", ""),
                    pagerank=float(doc.get("pagerank_flt", 0.0)), mentions=int(doc.get("mention_count_int", 0)),
                    communities=list(doc.get("community_ids_kwd") or []))


def _edge(doc: dict[str, Any]) -> ViewEdge:
    return ViewEdge(source=doc["src_key_kwd"], target=doc["tgt_key_kwd"], weight=float(doc.get("weight_flt", 0.0)),
                    keywords=list(doc.get("keywords_kwd") or [])[:5])


def top_nodes(store: DocStore, tenant: str, kb_id: str, limit: int, *, types: Sequence[str] = (),
              community: str = "") -> list[ViewNode]:
    if community:
        return _community_nodes(store, tenant, kb_id, community, limit, types)
    where = [any_of("entity_type_kwd", list(types))] if types else []  # the selective condition drives: first
    # one numeric sort key: the store walks its index from the top instead of sorting every entity
    return [_node(d) for d in ranked_entities(store, tenant, [kb_id], limit, where=where, fields=NODE_FIELDS)]


def _community_nodes(store: DocStore, tenant: str, kb_id: str, community: str, limit: int,
                     types: Sequence[str]) -> list[ViewNode]:
    """A community's members, from its report's member list (entities' community ids are not an
    indexed field), top ``limit`` by PageRank."""
    reports = store.scan(tenant, [kb_id], [eq("community_kwd", community), eq("knowledge_graph_kwd", CommunityReport.KIND)],
                         fields=["entity_keys_kwd"])
    keys = sorted({k for r in reports for k in r.get("entity_keys_kwd") or []})
    nodes = [n for n in nodes_by_key(store, tenant, kb_id, keys) if not types or n.type in types]
    nodes.sort(key=lambda n: (-n.pagerank, n.key))
    return nodes[:limit]


def edges_among(store: DocStore, tenant: str, kb_id: str, keys: Sequence[str], *, min_weight: float = 0.0,
                limit: int = 20_000) -> list[ViewEdge]:
    """Relations with both ends in ``keys`` (weight at least ``min_weight``), heaviest first.

    Few keys: every pair's relation id is known (ids are derived from the ends), so the rows are
    fetched by id. More: one query with both ends filtered, driven by the source-key index (hubs
    have thousands of relations, of which few end inside the sample)."""
    wanted = sorted(set(keys))
    if len(wanted) <= _PAIRS_BY_ID:
        ids = [relation_id(kb_id, a, b) for i, a in enumerate(wanted) for b in wanted[i + 1:]]
        docs = store.get(tenant, [kb_id], ids, fields=EDGE_FIELDS) if ids else []
    else:
        where = [any_of("src_key_kwd", wanted), any_of("tgt_key_kwd", wanted), eq("knowledge_graph_kwd", Relation.KIND)]
        docs = [h.doc for h in store.search(tenant, SearchRequest(
            kb_ids=[kb_id], where=where, fields=EDGE_FIELDS, limit=limit * 4, count_total=False)).hits]
    edges = [_edge(d) for d in docs if d.get("weight_flt", 0.0) >= min_weight and d["src_key_kwd"] != d["tgt_key_kwd"]]
    edges.sort(key=lambda e: (-e.weight, e.source, e.target))
    return edges[:limit]


def level0_communities(store: DocStore, tenant: str, kb_id: str, limit: int = 500) -> list[CommunityInfo]:
    """The top-level communities (largest first), as their reports name them."""
    hits = store.search(tenant, SearchRequest(
        kb_ids=[kb_id], where=[eq("knowledge_graph_kwd", CommunityReport.KIND), eq("level_int", 0)], limit=limit,
        fields=["community_kwd", "level_int", "title_kwd", "member_count_int", "rating_flt"],
        order_by=[("member_count_int", "desc")], count_total=False)).hits
    return [CommunityInfo(label=h.doc.get("community_kwd", ""), level=int(h.doc.get("level_int", 0)),
                          title=h.doc.get("title_kwd", ""), size=int(h.doc.get("member_count_int", 0)),
                          rating=float(h.doc.get("rating_flt", 0.0))) for h in hits]


def sample_graph(store: DocStore, tenant: str, kb_id: str, *, limit: int = 300, types: Sequence[str] = (),
                 community: str = "", min_weight: float = 0.0, include: Sequence[str] = (),
                 facets: bool = True) -> GraphSample:
    """The top ``limit`` entities by PageRank (after the filters), plus the entities in ``include``
    (those the user expanded), and the relations among them; with ``facets``, also the entity types
    and top-level communities there are (for the filters and legend; a page asks once)."""
    found = store.get(tenant, [kb_id], [graph_meta_id(kb_id)])
    meta = GraphMeta.from_doc(found[0]) if found else GraphMeta(kb_id=kb_id)
    nodes = top_nodes(store, tenant, kb_id, limit, types=types, community=community)
    have = {n.key for n in nodes}
    extra = [k for k in dict.fromkeys(include) if k not in have]
    if extra:
        nodes += nodes_by_key(store, tenant, kb_id, extra)
    edges = edges_among(store, tenant, kb_id, [n.key for n in nodes], min_weight=min_weight)
    sample = GraphSample(nodes=nodes, edges=edges, total_entities=meta.entity_count,
                         total_relations=meta.relation_count, version=meta.version)
    if facets:
        sample.types, sample.communities = graph_facets(store, tenant, kb_id)
    return sample


def graph_facets(store: DocStore, tenant: str, kb_id: str) -> tuple[list[tuple[str, int]], list[CommunityInfo]]:
    """The entity types (with counts) and top-level communities, for the filters and the legend."""
    counts = store.aggregate(tenant, [kb_id], "entity_type_kwd", [eq("knowledge_graph_kwd", Entity.KIND)], 50)
    return [(str(t), int(c)) for t, c in counts], level0_communities(store, tenant, kb_id)


def nodes_by_key(store: DocStore, tenant: str, kb_id: str, keys: Sequence[str]) -> list[ViewNode]:
    docs = get_entities(store, tenant, [kb_id], [entity_id(kb_id, k) for k in keys], fields=NODE_FIELDS)
    return [_node(d) for d in docs]


def neighbourhood(store: DocStore, tenant: str, kb_id: str, key: str, *, limit: int = 50,
                  min_weight: float = 0.0) -> tuple[list[ViewNode], list[ViewEdge]]:
    """An entity's heaviest ``limit`` relations and the entities at their other ends."""
    edges: dict[tuple[str, str], ViewEdge] = {}
    for side in ("src_key_kwd", "tgt_key_kwd"):
        where = [eq("knowledge_graph_kwd", Relation.KIND), eq(side, key)]
        if min_weight > 0:
            where.append(Condition("weight_flt", "gte", min_weight))
        for h in store.search(tenant, SearchRequest(kb_ids=[kb_id], where=where, limit=limit, fields=EDGE_FIELDS,
                                                    order_by=[("weight_flt", "desc")], count_total=False)).hits:
            edge = _edge(h.doc)
            if edge.source != edge.target:
                edges[(edge.source, edge.target)] = edge
    kept = sorted(edges.values(), key=lambda e: (-e.weight, e.source, e.target))[:limit]
    others = list(dict.fromkeys(e.target if e.source == key else e.source for e in kept))
    return nodes_by_key(store, tenant, kb_id, [key, *others]), kept


def suggest(store: DocStore, tenant: str, kb_id: str, text: str, limit: int = 10) -> list[ViewNode]:
    """Entities whose name (or an alias) holds the typed words, best match first."""
    tokens = tokenize_query(text)
    if not tokens:
        return []
    hits = store.search(tenant, SearchRequest(
        kb_ids=[kb_id], where=[eq("knowledge_graph_kwd", Entity.KIND)],
        text=TextQuery(tokens=tokens, fields={"name_ltks": 1.0}, minimum_should_match=1.0), limit=limit,
        fields=["id", *NODE_FIELDS])).hits
    docs = [h.doc for h in hits]
    join_scores(docs, score_rows(store, tenant, [kb_id], [d["id"] for d in docs]))
    return [_node(d) for d in docs]


@dataclass
class ChunkRef:
    id: str
    doc_id: str
    doc_name: str
    content: str


@dataclass
class ReportView:
    community: str
    level: int
    title: str
    summary: str
    rating: float
    findings: list[dict[str, str]]
    size: int


@dataclass
class EntityDetail:
    key: str
    name: str
    type: str
    description: str
    aliases: list[str]
    pagerank: float
    mentions: int
    communities: list[str]
    documents: list[dict[str, str]]
    chunks: list[ChunkRef]
    reports: list[ReportView]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def community_reports(store: DocStore, tenant: str, kb_id: str, labels: Sequence[str]) -> list[ReportView]:
    if not labels:
        return []
    docs = store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", CommunityReport.KIND),
                                        any_of("community_kwd", list(labels))])
    reports = [CommunityReport.from_doc(d) for d in docs]
    reports.sort(key=lambda r: (r.level, -r.rating, r.community))
    return [ReportView(community=r.community, level=r.level, title=r.title, summary=r.summary, rating=r.rating,
                       findings=[{"summary": f.summary, "explanation": f.explanation} for f in r.findings],
                       size=len(r.member_keys)) for r in reports]


def entity_detail(store: DocStore, tenant: str, kb_id: str, key: str, doc_names: dict[str, str], *,
                  max_chunks: int = 8) -> EntityDetail | None:
    found = get_entities(store, tenant, [kb_id], [entity_id(kb_id, key)])
    if not found:
        return None
    e = Entity.from_doc(found[0])
    chunks = [ChunkRef(id=d["id"], doc_id=d.get("doc_id", ""), doc_name=d.get("docnm_kwd", ""),
                       content=d.get("content_with_weight", ""))
              for d in store.get(tenant, [kb_id], e.chunk_ids[:max_chunks],
                                 fields=["id", "doc_id", "docnm_kwd", "content_with_weight"])]
    return EntityDetail(key=e.key, name=e.name, type=e.type, description=e.description, aliases=list(e.aliases),
                        pagerank=e.pagerank, mentions=e.mention_count, communities=list(e.community_ids),
                        documents=[{"id": d, "name": doc_names.get(d, d)} for d in e.doc_ids],
                        chunks=chunks, reports=community_reports(store, tenant, kb_id, e.community_ids))
