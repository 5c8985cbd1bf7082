"""The knowledge graph routes in process (the Flask app and the engine it holds, real Redis, the
embedded SQLite store, Elasticsearch when KBGRAPH_ES_URL is set): DELETE /datasets/<id>/knowledge_graph
drops the graph through the engine, so its version moves on and its rebuild mark goes; after a
rebuild, the graph served (GET .../knowledge_graph, and retrieval through the caches keyed by graph
version, kbgraph/search/graph_cache.py and the PPR walk's graph) is the new graph, never the old one."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from kbgraph.config import load_settings
from kbgraph.meta.schemas import GraphConfig
from kbgraph.search.graph_cache import graph_state, read_relations_touching, relation_adjacency
from kbgraph.search.ppr_search import entity_graph, entity_node
from kbgraph.store.base import eq
from kbgraph.store.records import Entity
from conftest import REDIS_URL, scratch_redis_prefix, store_overrides

pytestmark = pytest.mark.services

# the document that changes while the graph is gone: Mira Castell stays, her relations do not
BEFORE = ("Mira Castell travelled to Varrow with the Lumen Guild. "
          "Mira Castell and the Lumen Guild mapped the coast of Varrow.")
AFTER = ("Mira Castell sailed to Kestrel Bay with Tobias Wren. "
         "Tobias Wren and Mira Castell charted the reefs of Kestrel Bay.")
# the document that stays as it is (left out of the graph by its drop, extracted again by the build)
OTHER = "Ada Quill founded the Glass Tower in Ashgrove. Ada Quill taught in Ashgrove for years."


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Flask]:
    from web import create_app

    with scratch_redis_prefix() as prefix:
        settings = load_settings(data_dir=tmp_path / "data", **store_overrides(), embedding_provider="hash",
                                 embedding_dim=64, redis_url=REDIS_URL, redis_prefix=prefix)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        app = create_app(settings)
        yield app
        app.extensions["kbgraph"].close()


def _entity_keys(store: Any, tenant: str, kb_id: str) -> set[str]:
    return {d["entity_key_kwd"] for d in store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", Entity.KIND)],
                                                    fields=["entity_key_kwd"])}


def _served(store: Any, tenant: str, kb_id: str) -> tuple[set[str], set[str]]:
    """What the graph caches give for every entity now stored: the relation ids the adjacency cache
    hands the kg expansion, and the entities of the PPR walk's graph."""
    nodes = [(kb_id, key) for key in sorted(_entity_keys(store, tenant, kb_id))]
    adjacency = relation_adjacency(store, tenant, [kb_id], graph_state(store, tenant, [kb_id]))
    walk = entity_graph(store, tenant, [kb_id])
    return ({edge.id for edge in adjacency.touching(nodes)},
            {name for name in walk.graph.index if name.startswith("e\x1f")})


def test_a_dropped_graph_is_never_served_from_a_cache_after_its_rebuild(app: Flask, tmp_path: Path) -> None:
    svc = app.extensions["kbgraph"]
    tenant = f"kg{uuid.uuid4().hex[:8]}"
    svc.meta.ensure_tenant(tenant)
    auth = {"Authorization": f"Bearer {svc.meta.create_api_key(tenant)[1]}"}
    client = app.test_client()

    def call(method: str, path: str, **kwargs: Any) -> Any:
        body = client.open(f"/api/v1{path}", method=method, headers=auth, **kwargs).get_json()
        assert body["code"] == 0, body
        return body.get("data")

    ds = call("POST", "/datasets", json={"name": "lore", "parser_config": {"graphrag": {"use_graphrag": True,
                                                                                       "method": "nlp"}}})
    engine = svc.engine(tenant)
    store = engine.store
    lore, other = tmp_path / "lore.txt", tmp_path / "other.txt"
    lore.write_text(BEFORE, encoding="utf-8")
    other.write_text(OTHER, encoding="utf-8")
    engine.index_paths("lore", [lore])  # one merge each: versions 1 and 2
    engine.index_paths("lore", [other])
    old_keys = _entity_keys(store, tenant, ds["id"])
    assert {"mira castell", "varrow"} <= old_keys
    question = {"question": "Where did Mira Castell travel?", "dataset_ids": [ds["id"]], "use_kg": True}
    assert "Varrow" in call("POST", "/retrieval", json=question)["chunks"][0]["content"]
    old_state = graph_state(store, tenant, [ds["id"]])
    _served(store, tenant, ds["id"])  # the caches hold the old graph now

    # new extraction settings leave the graph to be rebuilt; a client drops it first, then rebuilds
    assert engine.set_graph("lore", GraphConfig(enabled=True, method="nlp",
                                                entity_types=("person", "location", "organization"))).action == "rebuild"
    assert engine.graph_needs_rebuild(engine.kb("lore"))
    assert call("DELETE", f"/datasets/{ds['id']}/knowledge_graph") is True
    assert call("GET", f"/datasets/{ds['id']}/knowledge_graph") == {"graph": {}, "mind_map": {}}
    dropped = graph_state(store, tenant, [ds["id"]])
    assert dropped.kbs[0][1] > old_state.kbs[0][1]  # the version moved on: no cache keyed by it serves the old graph
    assert not engine.graph_needs_rebuild(engine.kb("lore"))
    assert all(not d.extracted for d in engine.list_documents("lore"))

    lore.write_text(AFTER, encoding="utf-8")
    engine.index_paths("lore", [lore])  # parsed again with the graph on: in the new graph
    report = engine.build_graph("lore")  # what run_graphrag's task runs: the other document's graph
    assert [d.name for d in report.documents] == ["other.txt"]

    new_keys = _entity_keys(store, tenant, ds["id"])
    assert {"mira castell", "kestrel bay", "ada quill"} <= new_keys and "varrow" not in new_keys
    graph = call("GET", f"/datasets/{ds['id']}/knowledge_graph")["graph"]
    assert {n["id"].casefold() for n in graph["nodes"]} == new_keys
    fresh = {edge.id for edges in read_relations_touching(store, tenant, [ds["id"]],
                                                          [(ds["id"], key) for key in new_keys]).values()
             for edge in edges}
    relations, walk = _served(store, tenant, ds["id"])
    assert relations == fresh
    assert walk == {entity_node(ds["id"], key) for key in new_keys}
    answer = call("POST", "/retrieval", json=question)["chunks"][0]["content"]
    assert "Kestrel Bay" in answer and "Varrow" not in answer and "Lumen Guild" not in answer
    store.drop_index(tenant)
