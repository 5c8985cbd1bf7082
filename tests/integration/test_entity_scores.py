"""An entity's PageRank and communities live in its score row (records.EntityScore), and every read of
entity rows hands them out as the row's own fields (kbgraph/graph/scores.py). A knowledge base written
by a kbgraph from before score rows (PageRank and communities in the entity rows) reads the same, and
``kbgraph graph refresh --force`` moves it to score rows."""

from __future__ import annotations

from typing import Any

from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.engine import Engine
from kbgraph.graph.inspect import graph_stats
from kbgraph.graph.invariants import stored_graph
from kbgraph.graph.view import entity_detail, top_nodes
from kbgraph.meta import GraphConfig
from kbgraph.search.graph_cache import clear_caches
from kbgraph.store.base import any_of, eq
from kbgraph.store.records import EntityScore, scored_entity_id

GRAPH = GraphConfig(enabled=True, method="nlp", community=True)
QUESTION = "Who founded the Lumen Cartographers' Guild?"


def reads(engine: Engine, kb_id: str) -> dict[str, Any]:
    """What users see of PageRank and communities: the stored graph, the stats' top entities, the
    graph view's top nodes (all, and of one type), one entity's detail, and a kg query's entities."""
    clear_caches()  # a new process
    store, tenant = engine.store, engine.tenant
    graph = stored_graph(store, tenant, kb_id)
    best = max(graph.entities.values(), key=lambda e: (e.pagerank, e.key))
    kg = engine.query(["sample"], QUESTION, mode="kg")
    # a query's entities carry their score rows' PageRank and communities (BM25 on Elasticsearch
    # counts rewritten rows too, so there the entities' scores may move with the rows patched here)
    shown = {e.key: (round(e.pagerank, 9), sorted(e.community_ids)) for e in kg.entities}
    kg_rows = {key: graph.entities[key] for key in shown}
    return {
        "graph": {k: (round(e.pagerank, 9), sorted(e.community_ids)) for k, e in graph.entities.items()},
        "stats": graph_stats(store, tenant, kb_id).top_entities,
        "top": top_nodes(store, tenant, kb_id, 15),
        "typed": top_nodes(store, tenant, kb_id, 5, types=[best.type]),
        "detail": entity_detail(store, tenant, kb_id, best.key, {}),
        "kg": bool(shown) and shown == {k: (round(e.pagerank, 9), sorted(e.community_ids)) for k, e in kg_rows.items()},
        "kg_ranking": [(e.name, e.score) for e in kg.entities] if engine.store.engine == "sqlite" else None,
    }


def as_before_score_rows(engine: Engine, kb_id: str) -> None:
    """The knowledge base as a kbgraph from before score rows left it: PageRank and communities in the
    entity rows, no score rows."""
    store, tenant = engine.store, engine.tenant
    scores = list(store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", EntityScore.KIND)]))
    assert scores
    store.patch(tenant, kb_id, {scored_entity_id(d["id"]): {"pagerank_flt": d["pagerank_flt"],
                                                           "community_ids_kwd": d["community_ids_kwd"]}
                                for d in scores})
    store.delete(tenant, [kb_id], [eq("knowledge_graph_kwd", EntityScore.KIND)])


def test_an_index_from_before_score_rows_reads_the_same_and_a_forced_refresh_moves_it(settings: Settings) -> None:
    with Engine.open(settings) as engine:
        kb = engine.create_kb("sample", graph=GRAPH)
        engine.index_paths("sample", [SAMPLE_CORPUS_DIR])
        expected = reads(engine, kb.id)
        assert expected["kg"] and expected["stats"] and any(c for _, c in expected["graph"].values())

        as_before_score_rows(engine, kb.id)
        assert reads(engine, kb.id) == expected

        engine.refresh_graph("sample", force=True)
        store, tenant = engine.store, engine.tenant
        entities = store.count(tenant, [kb.id], [eq("knowledge_graph_kwd", "entity")])
        assert store.count(tenant, [kb.id], [eq("knowledge_graph_kwd", EntityScore.KIND)]) == entities
        assert reads(engine, kb.id) == expected


def test_entities_merged_since_the_last_refresh_are_listed_after_the_scored_ones(settings: Settings) -> None:
    """Between a merge and the refresh after it, a new entity has no score row: listings by PageRank
    (the graph view, the knowledge_graph endpoint, typed seeds) still show it, after every scored one."""
    from kbgraph.store.records import entity_id, entity_score_id

    with Engine.open(settings) as engine:
        kb = engine.create_kb("sample", graph=GRAPH)
        engine.index_paths("sample", [SAMPLE_CORPUS_DIR])
        store, tenant = engine.store, engine.tenant
        keys = sorted(stored_graph(store, tenant, kb.id).entities)
        newest = set(keys[:3])
        store.delete(tenant, [kb.id], [any_of("id", [entity_score_id(entity_id(kb.id, k)) for k in newest])],
                     refresh=True)
        clear_caches()
        listed = [n.key for n in top_nodes(store, tenant, kb.id, len(keys) + 10)]
        assert sorted(listed) == keys, newest - set(listed)
        assert set(listed[-len(newest):]) == newest  # PageRank 0 until the refresh: after the scored ones
        assert [n.key for n in top_nodes(store, tenant, kb.id, 5)] == listed[:5]
