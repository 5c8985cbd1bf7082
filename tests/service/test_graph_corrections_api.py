"""The knowledge-graph correction routes over real HTTP (kbgraph-web serve with a real Celery worker,
real Redis, the embedded store or Elasticsearch): another tenant's key gets RAGFlow's knowledge-graph
answer, a collision asks for confirmation, corrections show in the served graph and in retrieval,
undo works, a curated CSV import is retrieved and cited as curated and removed as a whole, and
corrections made while a document is indexed lose neither."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kbgraph.config import Settings
from kbgraph.engine import Engine
from kbgraph.graph.invariants import check_graph
from service.test_service_api import (  # noqa: F401  (module fixtures: settings, celery_app, api, keys)
    Api, api, celery_app, create_dataset, documents, graph_of, keys, parse_and_wait, sample, settings, upload,
    wait_for, wait_refreshed,
)

pytestmark = pytest.mark.services


def _names(api: Api, key: str, ds: str) -> set[str]:
    return {n["entity_name"] for n in graph_of(api, key, ds).get("nodes", [])}


def _correct(api: Api, key: str, ds: str, **body: Any) -> dict[str, Any]:
    return api.call("POST", f"/api/v1/datasets/{ds}/knowledge_graph/corrections", key, json=body)


def test_corrections_over_http(api: Api, keys: dict[str, str], celery_app, settings: Settings) -> None:
    alice, bob = keys["alice"], keys["bob"]
    ds = create_dataset(api, alice, "corrected")["id"]
    docs = upload(api, alice, ds, sample("mira_castell.md", "glass_tower.md", "great_flood_of_varrow.md"))
    parse_and_wait(api, alice, ds, [d["id"] for d in docs], timeout=120)
    wait_refreshed(celery_app, ds)
    assert "Varrow" in _names(api, alice, ds)

    for method, path, kwargs in [("GET", "corrections", {}), ("POST", "corrections", {"json": {"op": "delete_entity",
                                                                                                "entity": "Varrow"}}),
                                 ("POST", "corrections/undo", {}), ("GET", "similar?entity=Varrow", {})]:
        foreign = api.call(method, f"/api/v1/datasets/{ds}/knowledge_graph/{path}", bob, **kwargs)
        assert (foreign["code"], foreign["message"]) == (109, "No authorization.")
    assert "Varrow" in _names(api, alice, ds)

    clash = _correct(api, alice, ds, op="rename", entity="Glass Tower", name="Varrow")
    assert clash["code"] == 102 and clash["data"] == {"confirm": True} and '"force": true' in clash["message"]
    bad = _correct(api, alice, ds, op="rename", entity="Glass Tower")
    assert bad["code"] == 101 and "`name`" in bad["message"]
    unknown = _correct(api, alice, ds, op="explode", entity="Glass Tower")
    assert unknown["code"] == 101 and "rename" in unknown["message"]

    made = _correct(api, alice, ds, op="rename", entity="Varrow", name="Varrow City", who="ann")
    assert made["code"] == 0 and made["data"]["op"] == "rename" and made["data"]["who"] == "ann (api:alice)"
    assert _correct(api, alice, ds, op="delete_entity", entity="Glass Tower")["code"] == 0
    assert _correct(api, alice, ds, op="add_entity", name="Pell Harbour", type="geo",
                    description="Pell Harbour is the ferry port south of Varrow.")["code"] == 0
    assert _correct(api, alice, ds, op="add_relation", source="Pell Harbour", target="Varrow City",
                    description="ferries sail from Pell Harbour to Varrow City", keywords=["ferry"])["code"] == 0
    names = _names(api, alice, ds)
    assert {"Varrow City", "Pell Harbour"} <= names and not {"Varrow", "Glass Tower"} & names

    listed = api.ok("GET", f"/api/v1/datasets/{ds}/knowledge_graph/corrections", alice)
    assert [c["op"] for c in listed] == ["rename", "delete_entity", "add_entity", "add_relation"]
    undone = api.ok("POST", f"/api/v1/datasets/{ds}/knowledge_graph/corrections/2/undo", alice)
    assert undone["undone"] and undone["undone_by"] == "api:alice"
    assert "Glass Tower" in _names(api, alice, ds)

    entities = b"name,type,description\nSaltmere Lighthouse,building,The Saltmere Lighthouse guides ships past the reef.\n"
    relations = b"source,target,description,keywords,weight\nSaltmere Lighthouse,Varrow City,guards the harbour,light,2\n"
    imported = api.ok("POST", f"/api/v1/datasets/{ds}/knowledge_graph/import", alice,
                      files={"file": ("lights.csv", entities), "relations": ("rel.csv", relations)},
                      data={"source": "lighthouses"})
    assert imported["op"] == "import" and imported["params"]["entities"] == 1
    found = api.ok("POST", "/api/v1/retrieval", alice, json={"question": "What guides ships past the reef?",
                                                               "dataset_ids": [ds], "use_kg": True})
    assert any(c["document_keyword"] == "curated: lighthouses" and "Lighthouse" in c["content"] for c in found["chunks"])
    foreign = api.call("POST", f"/api/v1/datasets/{ds}/knowledge_graph/import", bob,
                       files={"file": ("lights.csv", entities)})
    assert foreign["code"] == 109
    broken = api.call("POST", f"/api/v1/datasets/{ds}/knowledge_graph/import", alice,
                      files={"file": ("broken.csv", b"label\nx\n")})
    assert broken["code"] == 101 and "broken.csv" in broken["message"]
    api.ok("DELETE", f"/api/v1/datasets/{ds}/knowledge_graph/import/lighthouses", alice)
    assert "Saltmere Lighthouse" not in _names(api, alice, ds)

    # a document indexed while corrections are made: the worker's merge and the web's corrections
    # serialize on the knowledge base's lock, and the graph has both
    more = upload(api, alice, ds, sample("lumen_cartographers_guild.md", "salt_war.md"))
    corrections = threading.Thread(target=lambda: [
        _correct(api, alice, ds, op="set", entity="Mira Castell", description=f"Mira Castell, take {n}")
        for n in range(4)])
    api.ok("POST", f"/api/v1/datasets/{ds}/chunks", alice, json={"document_ids": [d["id"] for d in more]})
    corrections.start()
    ids = {d["id"] for d in more}
    wait_for(lambda: all(d["run"] in ("DONE", "FAIL") for d in documents(api, alice, ds) if d["id"] in ids), 120,
             "the documents to finish")
    corrections.join(timeout=120)
    wait_refreshed(celery_app, ds)
    assert "Lumen Cartographers Guild" in _names(api, alice, ds)
    with Engine.open(settings, tenant="alice") as engine:
        kb = engine.kb("corrected")
        ctx = engine.context(kb)
        assert check_graph(ctx.store, "alice", kb.id, ctx.describer()) == []
        assert len(engine.corrections("corrected")) == 9
    shown = [n for n in graph_of(api, alice, ds)["nodes"] if n["entity_name"] == "Mira Castell"]
    assert shown and shown[0]["description"] == "Mira Castell, take 3"
