"""Reading a knowledge base's graph back: statistics, one entity with its neighbours, export."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from io import BytesIO

import networkx as nx

from kbgraph.graph.keys import normalize_key
from kbgraph.graph.scores import get_entities, ranked_entities, scan_entities
from kbgraph.store.base import DocStore, SearchRequest, TextQuery, eq
from kbgraph.parse.tokenize import tokenize_query
from kbgraph.store.records import CommunityReport, Entity, GraphMeta, Relation, entity_id, graph_meta_id

@dataclass
class GraphStats:
    version: int
    entities: int
    relations: int
    entity_mentions: int
    relation_mentions: int
    communities: int
    reports: int
    phases: dict[str, dict[str, object]]
    top_entities: list[dict[str, object]] = field(default_factory=list)
    entity_types: list[tuple[str, int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _count(store: DocStore, tenant: str, kb_id: str, kind: str) -> int:
    return store.count(tenant, [kb_id], [eq("knowledge_graph_kwd", kind)])


def graph_stats(store: DocStore, tenant: str, kb_id: str, top: int = 10) -> GraphStats:
    found = store.get(tenant, [kb_id], [graph_meta_id(kb_id)])
    meta = GraphMeta.from_doc(found[0]) if found else GraphMeta(kb_id=kb_id)
    top_rows = ranked_entities(store, tenant, [kb_id], top, order_by=[("pagerank_flt", "desc"), ("mention_count_int", "desc")],
                               fields=["name_kwd", "entity_type_kwd", "pagerank_flt", "mention_count_int"])
    communities = store.aggregate(tenant, [kb_id], "community_kwd", [eq("knowledge_graph_kwd", CommunityReport.KIND)],
                                  size=100_000)
    return GraphStats(
        version=meta.version, entities=_count(store, tenant, kb_id, Entity.KIND),
        relations=_count(store, tenant, kb_id, Relation.KIND),
        entity_mentions=_count(store, tenant, kb_id, "entity_mention"),
        relation_mentions=_count(store, tenant, kb_id, "relation_mention"),
        communities=len(communities), reports=_count(store, tenant, kb_id, CommunityReport.KIND),
        phases={p: {"version": meta.phase_versions.get(p, -1), "status": meta.phase_status.get(p, "never"),
                    "stale": meta.is_stale(p)} for p in ("pagerank", "communities")},
        top_entities=[{"name": d.get("name_kwd"), "type": d.get("entity_type_kwd"),
                       "pagerank": round(float(d.get("pagerank_flt", 0.0)), 6),
                       "mentions": int(d.get("mention_count_int", 0))} for d in top_rows],
        entity_types=store.aggregate(tenant, [kb_id], "entity_type_kwd", [eq("knowledge_graph_kwd", Entity.KIND)], 20),
    )


def to_networkx(store: DocStore, tenant: str, kb_id: str) -> nx.Graph:
    graph = nx.Graph()
    for doc in scan_entities(store, tenant, [kb_id]):
        e = Entity.from_doc(doc)
        graph.add_node(e.key, name=e.name, type=e.type, description=e.description, pagerank=e.pagerank,
                       mentions=e.mention_count, aliases="|".join(e.aliases), doc_ids="|".join(e.doc_ids),
                       chunk_ids="|".join(e.chunk_ids), communities="|".join(e.community_ids))
    for doc in store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", Relation.KIND)]):
        r = Relation.from_doc(doc)
        graph.add_edge(r.src_key, r.tgt_key, description=r.description, weight=r.weight,
                       keywords="|".join(r.keywords), mentions=r.mention_count, doc_ids="|".join(r.doc_ids),
                       chunk_ids="|".join(r.chunk_ids))
    return graph


def export_graph(store: DocStore, tenant: str, kb_id: str, fmt: str) -> bytes:
    """The graph as GraphML or as node-link JSON (networkx's formats, so other tools read it)."""
    graph = to_networkx(store, tenant, kb_id)
    if fmt == "graphml":
        out = BytesIO()
        nx.write_graphml(graph, out, encoding="utf-8")
        return out.getvalue()
    if fmt == "json":
        return json.dumps(nx.node_link_data(graph, edges="edges"), ensure_ascii=False, indent=1).encode("utf-8")
    raise ValueError(f"unknown export format {fmt!r}: choose graphml or json")


@dataclass
class EntityView:
    entity: Entity
    neighbours: list[tuple[Relation, str]]  # (relation, the other end's display name)
    doc_names: dict[str, str]


def find_entity(store: DocStore, tenant: str, kb_id: str, name: str) -> Entity | None:
    """The entity with this name (exactly, after normalization), else the best name match."""
    exact = get_entities(store, tenant, [kb_id], [entity_id(kb_id, normalize_key(name))])
    if exact:
        return Entity.from_doc(exact[0])
    tokens = tokenize_query(name)
    if not tokens:
        return None
    hits = store.search(tenant, SearchRequest(
        kb_ids=[kb_id], where=[eq("knowledge_graph_kwd", Entity.KIND)],
        text=TextQuery(tokens=tokens, fields={"name_ltks": 1.0}, minimum_should_match=1.0), limit=1)).hits
    found = get_entities(store, tenant, [kb_id], [hits[0].id]) if hits else []
    return Entity.from_doc(found[0]) if found else None


def entity_names(store: DocStore, tenant: str, kb_id: str) -> list[str]:
    """Every entity name of a knowledge base (for suggestions when a name is not found)."""
    return [d.get("name_kwd", "") for d in store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", Entity.KIND)],
                                                       fields=["name_kwd"])]


def entity_view(store: DocStore, tenant: str, kb_id: str, entity: Entity, doc_names: dict[str, str],
                limit: int = 50) -> EntityView:
    relations: list[Relation] = []
    for side in ("src_key_kwd", "tgt_key_kwd"):
        relations += [Relation.from_doc(d) for d in store.scan(
            tenant, [kb_id], [eq("knowledge_graph_kwd", Relation.KIND), eq(side, entity.key)])]
    relations.sort(key=lambda r: (-r.weight, r.id))
    neighbours = [(r, r.tgt_name if r.src_key == entity.key else r.src_name) for r in relations[:limit]]
    return EntityView(entity, neighbours, {d: doc_names.get(d, d) for d in entity.doc_ids})
