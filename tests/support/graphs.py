"""A knowledge base's graph in a form two runs can be compared by: entities and relations by name,
with document names for document ids (ids differ between knowledge bases) and description fragments
sorted (they are joined in chunk-id order, and chunk ids derive from document ids)."""

from __future__ import annotations

from typing import Any

from kbgraph.config import Settings
from kbgraph.store import open_store
from kbgraph.store.base import any_of
from kbgraph.store.records import Entity, Relation

Graph = tuple[dict[str, Any], dict[tuple[str, ...], Any]]


def graph_by_names(settings: Settings, tenant: str, kb_id: str, names: dict[str, str]) -> Graph:
    store = open_store(settings)
    try:
        rows = list(store.scan(tenant, [kb_id], [any_of("knowledge_graph_kwd", [Entity.KIND, Relation.KIND])]))
    finally:
        store.close()
    entities = [Entity.from_doc(d) for d in rows if d["knowledge_graph_kwd"] == Entity.KIND]
    by_key = {e.key: e.name for e in entities}
    nodes = {e.name: (e.type, sorted(e.description.split("\n")), sorted(names[d] for d in e.doc_ids))
             for e in entities}
    edges = {}
    for doc in rows:
        if doc["knowledge_graph_kwd"] == Relation.KIND:
            r = Relation.from_doc(doc)
            edges[tuple(sorted((by_key[r.src_key], by_key[r.tgt_key])))] = (
                sorted(r.description.split("\n")), r.weight, sorted(names[d] for d in r.doc_ids))
    return nodes, edges
