"""Service mode end to end: real Redis (DB 12), a real Celery worker (in-process, two threads),
real Flask over HTTP, the embedded SQLite store (Elasticsearch when KBGRAPH_ES_URL is set), the hash embedder and the `nlp` graph method."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from task_executor.celery_app import KBCelery
from task_executor.tasks import refresh_pending_key, schedule_refresh
from conftest import REDIS_URL, scratch_redis_prefix, store_overrides
from support.processes import WebServer
from support.web_host import celery_worker

GRAPH = {"use_graphrag": True, "method": "nlp", "community": False}

pytestmark = pytest.mark.services


class Api:
    def __init__(self, base: str) -> None:
        self.base = base

    def call(self, method: str, path: str, key: str | None, **kwargs: Any) -> dict[str, Any]:
        headers = kwargs.pop("headers", {})
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        response = requests.request(method, self.base + path, headers=headers, timeout=30, **kwargs)
        assert response.status_code == 200, response.text
        return response.json()

    def ok(self, method: str, path: str, key: str, **kwargs: Any) -> Any:
        body = self.call(method, path, key, **kwargs)
        assert body["code"] == 0, body
        return body.get("data")


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with scratch_redis_prefix() as prefix:
        # the document store: SQLite, or Elasticsearch when KBGRAPH_ES_URL is set (as in CI)
        yield load_settings(data_dir=tmp_path_factory.mktemp("service") / "data", **store_overrides(),
                            embedding_provider="hash", embedding_dim=64, redis_url=REDIS_URL, redis_prefix=prefix,
                            graph_refresh_delay=0.3, web_workers=2, web_threads=4)


@pytest.fixture(scope="module")
def celery_app(settings: Settings) -> Iterator[KBCelery]:
    with celery_worker(settings, refresh_delay=0.3) as app:
        yield app


@pytest.fixture(scope="module")
def api(settings: Settings, celery_app: KBCelery, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    # the production server (kbgraph-web serve: gunicorn, two worker processes) in front of the
    # in-process worker above, which takes the tasks it queues
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with WebServer(settings, tmp_path_factory.mktemp("web") / "web.log") as server:
        yield Api(server.url)


@pytest.fixture(scope="module")
def keys(api: Api, settings: Settings) -> dict[str, str]:
    from kbgraph.meta import MetaDB

    with MetaDB.open(settings.meta_url) as meta:
        out = {}
        for tenant in ("alice", "bob"):
            meta.ensure_tenant(tenant)
            out[tenant] = meta.create_api_key(tenant)[1]
        return out


def wait_for(check: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def create_dataset(api: Api, key: str, name: str, graph: dict[str, Any] | None = GRAPH, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, **extra}
    if graph is not None:
        body["parser_config"] = {"chunk_token_num": 128, "graphrag": graph}
    return api.ok("POST", "/api/v1/datasets", key, json=body)


def upload(api: Api, key: str, ds: str, files: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    return api.ok("POST", f"/api/v1/datasets/{ds}/documents", key, files=[("file", f) for f in files])


def sample(*names: str) -> list[tuple[str, bytes]]:
    return [(n, (SAMPLE_CORPUS_DIR / n).read_bytes()) for n in names]


def documents(api: Api, key: str, ds: str) -> list[dict[str, Any]]:
    return api.ok("GET", f"/api/v1/datasets/{ds}/documents?page_size=100", key)["docs"]


def parse_and_wait(api: Api, key: str, ds: str, ids: list[str], timeout: float = 30.0) -> list[dict[str, Any]]:
    api.ok("POST", f"/api/v1/datasets/{ds}/chunks", key, json={"document_ids": ids})

    def finished() -> list[dict[str, Any]] | None:
        docs = [d for d in documents(api, key, ds) if d["id"] in ids]
        return docs if all(d["run"] in ("DONE", "FAIL", "CANCEL") for d in docs) else None

    return wait_for(finished, timeout, "documents to finish parsing")


def graph_of(api: Api, key: str, ds: str) -> dict[str, Any]:
    return api.ok("GET", f"/api/v1/datasets/{ds}/knowledge_graph", key)["graph"]


def wait_refreshed(celery_app: KBCelery, kb_id: str) -> None:
    """Until no refresh waits (its key) or runs (its task row, made before the key goes)."""
    from kbgraph.meta import FINISHED

    key = refresh_pending_key(celery_app.settings.redis_prefix, kb_id)
    meta = celery_app.meta_db()

    def settled() -> bool:
        return not celery_app.redis.exists(key) and all(
            t.status in FINISHED for t in meta.list_tasks(kb_id, kind="refresh", limit=None))

    wait_for(settled, 60, "the debounced graph refresh")


# -- the whole flow -------------------------------------------------------------------------------

def test_dataset_parse_retrieve_graph_delete(api: Api, keys: dict[str, str], celery_app: KBCelery) -> None:
    key = keys["alice"]
    ds = create_dataset(api, key, "Varrow history")
    assert ds["parser_config"]["graphrag"]["use_graphrag"] is True
    assert ds["parser_config"]["graphrag"]["method"] == "nlp"
    names = ["mira_castell.md", "lumen_cartographers_guild.md", "salt_war.md", "tobias_wren.txt"]
    rows = upload(api, key, ds["id"], sample(*names))
    assert [r["name"] for r in rows] == names and all(r["run"] == "UNSTART" for r in rows)
    ids = [r["id"] for r in rows]

    docs = parse_and_wait(api, key, ds["id"], ids)
    for doc in docs:
        assert doc["run"] == "DONE", doc
        assert doc["progress"] == 1.0 and doc["chunk_count"] > 0 and doc["token_count"] > 0
        assert "Task done" in doc["progress_msg"] and doc["process_begin_at"] and doc["process_duration"] > 0
    listed = api.ok("GET", f"/api/v1/datasets?id={ds['id']}", key)
    assert listed[0]["chunk_count"] == sum(d["chunk_count"] for d in docs) and listed[0]["document_count"] == 4

    question = {"question": "Who founded the Lumen Cartographers Guild?", "dataset_ids": [ds["id"]]}
    plain = api.ok("POST", "/api/v1/retrieval", key, json={**question, "use_kg": False})
    assert plain["total"] >= 1 and plain["chunks"]
    for chunk in plain["chunks"]:
        for field in ("id", "content", "document_id", "document_keyword", "dataset_id", "similarity",
                      "vector_similarity", "term_similarity", "positions", "important_keywords", "highlight"):
            assert field in chunk, field
        assert chunk["dataset_id"] == ds["id"] and chunk["document_id"] in ids
    assert plain["doc_aggs"] and {a["doc_id"] for a in plain["doc_aggs"]} <= set(ids)
    assert plain["chunks"][0]["document_keyword"] == "lumen_cartographers_guild.md"

    with_kg = api.ok("POST", "/api/v1/retrieval", key, json={**question, "use_kg": True})
    head = with_kg["chunks"][0]
    assert head["document_keyword"] == "Related content in Knowledge Graph"
    assert "---- Entities ----" in head["content"] and head["dataset_id"] == [ds["id"]] and head["similarity"] == 1.0
    assert any(c["document_id"] in ids for c in with_kg["chunks"][1:])

    graph = graph_of(api, key, ds["id"])
    assert graph["nodes"] and graph["edges"] and graph["directed"] is False
    node_names = {n["id"] for n in graph["nodes"]}
    assert all(e["source"] in node_names and e["target"] in node_names for e in graph["edges"])
    assert set(graph["graph"]["source_id"]) == set(ids)
    wait_refreshed(celery_app, ds["id"])
    assert any(n["pagerank"] > 0 for n in graph_of(api, key, ds["id"])["nodes"])

    # deleting a document removes exactly its part of the graph
    gone = ids[names.index("tobias_wren.txt")]
    only_there = {n["id"] for n in graph["nodes"] if n["source_id"] == [gone]}
    assert only_there
    assert api.call("DELETE", f"/api/v1/datasets/{ds['id']}/documents", key, json={"ids": [gone]}) == {"code": 0}
    after = graph_of(api, key, ds["id"])
    assert not only_there & {n["id"] for n in after["nodes"]}
    assert all(gone not in n["source_id"] for n in after["nodes"])
    assert gone not in after["graph"]["source_id"]
    assert [d["id"] for d in documents(api, key, ds["id"])] and gone not in {d["id"] for d in documents(api, key, ds["id"])}
    search = api.ok("POST", "/api/v1/retrieval", key, json={"question": "Tobias Wren", "dataset_ids": [ds["id"]]})
    assert all(c["document_id"] != gone for c in search["chunks"])

    # the knowledge graph can be dropped; the chunks stay searchable
    assert api.ok("DELETE", f"/api/v1/datasets/{ds['id']}/knowledge_graph", key) is True
    assert graph_of(api, key, ds["id"]) == {}
    assert api.ok("POST", "/api/v1/retrieval", key, json={**question, "use_kg": False})["chunks"]

    # run_graphrag rebuilds it from the parsed documents
    task = api.ok("POST", f"/api/v1/datasets/{ds['id']}/run_graphrag", key)["graphrag_task_id"]
    traced = wait_for(lambda: (t := api.ok("GET", f"/api/v1/datasets/{ds['id']}/trace_graphrag", key))
                      and t["progress"] in (1.0, -1.0) and t, 30, "run_graphrag")
    assert traced["id"] == task and traced["progress"] == 1.0, traced
    assert "Knowledge Graph done" in traced["progress_msg"]
    assert {n["id"] for n in graph_of(api, key, ds["id"])["nodes"]} == {n["id"] for n in after["nodes"]}

    assert api.call("DELETE", "/api/v1/datasets", key, json={"ids": [ds["id"]]}) == {"code": 0}
    assert ds["id"] not in {d["id"] for d in api.ok("GET", "/api/v1/datasets", key)}


# -- auth, tenants, bad input ---------------------------------------------------------------------

def test_auth_errors(api: Api, keys: dict[str, str]) -> None:
    assert api.call("GET", "/api/v1/datasets", None) == {
        "code": 0, "message": "`Authorization` can't be empty", "data": False}
    assert api.call("GET", "/api/v1/datasets", None, headers={"Authorization": "Bearer"}) == {
        "code": 0, "message": "Please check your authorization format.", "data": False}
    for token in ("None", "invalid_key_123"):
        assert api.call("POST", "/api/v1/datasets", token, json={"name": "x"}) == {
            "code": 109, "message": "Authentication error: API key is invalid!", "data": False}
    assert requests.get(api.base + "/health", timeout=10).json()["status"] == "ok"


def test_other_tenant_sees_nothing(api: Api, keys: dict[str, str]) -> None:
    alice, bob = keys["alice"], keys["bob"]
    ds = create_dataset(api, alice, "alice private")
    doc = upload(api, alice, ds["id"], sample("salt_war.md"))[0]
    assert ds["id"] not in {d["id"] for d in api.ok("GET", "/api/v1/datasets", bob)}
    assert api.call("GET", f"/api/v1/datasets?id={ds['id']}", bob) == {
        "code": 108, "message": f"User 'bob' lacks permission for dataset '{ds['id']}'"}
    assert api.call("GET", f"/api/v1/datasets/{ds['id']}/documents", bob) == {
        "code": 102, "message": f"You don't own the dataset {ds['id']}. "}
    assert api.call("POST", f"/api/v1/datasets/{ds['id']}/chunks", bob, json={"document_ids": [doc["id"]]}) == {
        "code": 102, "message": f"You don't own the dataset {ds['id']}."}
    assert api.call("POST", "/api/v1/retrieval", bob, json={"question": "salt", "dataset_ids": [ds["id"]]}) == {
        "code": 102, "message": f"You don't own the dataset {ds['id']}."}
    assert api.call("GET", f"/api/v1/datasets/{ds['id']}/knowledge_graph", bob) == {
        "code": 109, "message": "No authorization."}
    assert api.call("PUT", f"/api/v1/datasets/{ds['id']}", bob, json={"name": "mine"})["code"] == 108
    assert api.call("DELETE", "/api/v1/datasets", bob, json={"ids": [ds["id"]]}) == {
        "code": 108, "message": f"User 'bob' lacks permission for datasets: '{ds['id']}'"}
    assert api.call("DELETE", f"/api/v1/datasets/{ds['id']}/documents", bob, json={"ids": None})["code"] == 102
    # a dataset name is per tenant: bob may use alice's
    assert create_dataset(api, bob, "alice private")["name"] == "alice private"
    assert documents(api, alice, ds["id"])[0]["id"] == doc["id"]


def test_malformed_requests_get_clear_errors(api: Api, keys: dict[str, str]) -> None:
    key = keys["alice"]
    auth = {"Authorization": f"Bearer {key}"}
    r = requests.post(api.base + "/api/v1/datasets", data="name=x", timeout=10,
                      headers={**auth, "Content-Type": "text/plain"}).json()
    assert r == {"code": 101, "message": "Unsupported content type: Expected application/json, got text/plain"}
    r = requests.post(api.base + "/api/v1/datasets", data="{bad", timeout=10,
                      headers={**auth, "Content-Type": "application/json"}).json()
    assert r == {"code": 101, "message": "Malformed JSON syntax: Missing commas/brackets or invalid encoding"}
    assert api.call("POST", "/api/v1/datasets", key, json=["x"]) == {
        "code": 101, "message": "Invalid request payload: expected object, got list"}
    assert api.call("POST", "/api/v1/datasets", key, json={"name": ""}) == {
        "code": 101, "message": "Field: <name> - Message: <String should have at least 1 character> - Value: <>"}
    assert api.call("POST", "/api/v1/datasets", key, json={"name": "x", "parser_config": {
        "graphrag": {"method": "graph"}}})["message"].startswith("Field: <parser_config.graphrag.method>")
    light = api.call("POST", "/api/v1/datasets", key, json={"name": "x", "parser_config": {
        "graphrag": {"use_graphrag": True, "method": "light"}}})
    assert light["code"] == 101 and "needs a chat model" in light["message"] and "'nlp'" in light["message"]
    assert api.call("DELETE", "/api/v1/datasets", key, json={"ids": ["not_uuid"]}) == {
        "code": 101, "message": "Field: <ids> - Message: <Invalid UUID1 format> - Value: <['not_uuid']>"}
    assert api.call("PUT", f"/api/v1/datasets/{uuid.uuid1().hex}", key, json={})["message"] == (
        "No properties were modified")
    ds = create_dataset(api, key, "bad input")
    assert create_dataset(api, key, "BAD INPUT")["name"] == "BAD INPUT(1)"
    assert api.call("POST", f"/api/v1/datasets/{ds['id']}/documents", key) == {"code": 101, "message": "No file part!"}
    assert api.call("POST", f"/api/v1/datasets/{ds['id']}/documents", key, files=[("file", ("a.exe", b"MZ"))]) == {
        "code": 500, "message": "a.exe: This type of file has not been supported yet!"}
    assert api.call("POST", f"/api/v1/datasets/{ds['id']}/chunks", key, json={"document_ids": []}) == {
        "code": 102, "message": "`document_ids` is required"}
    assert api.call("POST", f"/api/v1/datasets/{ds['id']}/chunks", key, json={"document_ids": ["invalid_id"]}) == {
        "code": 102, "message": "Documents not found: ['invalid_id']"}
    assert api.call("DELETE", f"/api/v1/datasets/{ds['id']}/documents", key, json={"ids": ["invalid_id"]}) == {
        "code": 102, "message": "Documents not found: ['invalid_id']"}
    assert api.call("POST", "/api/v1/retrieval", key, json={"question": "x"}) == {
        "code": 102, "message": "`dataset_ids` is required."}
    assert api.call("POST", "/api/v1/retrieval", key, json={"question": "x", "dataset_ids": ds["id"]}) == {
        "code": 102, "message": "`dataset_ids` should be a list"}
    assert api.call("POST", "/api/v1/retrieval", key, json={"dataset_ids": [ds["id"]]}) == {
        "code": 102, "message": "`question` is required."}
    assert api.call("POST", "/api/v1/retrieval", key, json={"question": "x", "dataset_ids": [ds["id"]],
                                                           "page_size": "ten"})["code"] == 102
    assert api.ok("POST", "/api/v1/retrieval", key, json={"question": "", "dataset_ids": [ds["id"]]}) == {
        "total": 0, "chunks": [], "doc_aggs": {}}
    nowhere = requests.get(api.base + "/api/v1/nowhere", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert nowhere.status_code == 404
    assert nowhere.json() == {"code": 404, "message": "Not found: the API has no /api/v1/nowhere", "data": None}
    patch = requests.patch(api.base + "/api/v1/datasets", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert patch.status_code == 405 and patch.json()["message"] == (
        "Method Not Allowed: PATCH is not served at /api/v1/datasets (it answers DELETE, GET, POST)")


def test_dataset_update_maps_graph_settings(api: Api, keys: dict[str, str], settings: Settings) -> None:
    from kbgraph.meta import MetaDB

    key = keys["alice"]
    ds = create_dataset(api, key, "graph later", graph=None)
    assert ds["parser_config"]["graphrag"]["use_graphrag"] is True  # RAGFlow's naive default, stored verbatim
    updated = api.ok("PUT", f"/api/v1/datasets/{ds['id']}", key, json={"parser_config": {"graphrag": {
        "use_graphrag": True, "method": "nlp", "entity_types": ["person", "guild"], "community": True}}})
    assert updated["parser_config"]["graphrag"]["entity_types"] == ["person", "guild"]
    with MetaDB.open(settings.meta_url) as meta:
        graph = meta.get_kb("alice", ds["id"]).graph
    assert graph.enabled and graph.method == "nlp" and graph.entity_types == ("person", "guild") and graph.community
    assert api.ok("PUT", f"/api/v1/datasets/{ds['id']}", key, json={"chunk_method": "qa"})["parser_config"] == {
        "raptor": {"use_raptor": False}, "graphrag": {"use_graphrag": False}}
    with MetaDB.open(settings.meta_url) as meta:
        assert not meta.get_kb("alice", ds["id"]).graph.enabled


# -- cancel and concurrency -----------------------------------------------------------------------

def _long_text(paragraphs: int) -> bytes:
    people = ["Mira Castell", "Tobias Wren", "Ada Lind", "Oren Vale", "Sela Marr", "Ivo Brand", "Nell Quay"]
    places = ["Varrow", "Ashgrove", "Brightwater", "Kestrel Point", "Glass Tower", "Saltmere"]
    lines = [f"{people[i % 7]} met {people[(i * 3 + 1) % 7]} at {places[i % 6]} in year {1200 + i}, where the "
             f"{places[(i + 2) % 6]} Council of {people[(i + 5) % 7].split()[1]} signed charter number {i}."
             for i in range(paragraphs)]
    return "\n\n".join(lines).encode()


def test_cancel_a_parse(api: Api, keys: dict[str, str], settings: Settings) -> None:
    from kbgraph.meta import FINISHED, MetaDB

    key = keys["alice"]
    ds = create_dataset(api, key, "to cancel")
    doc = upload(api, key, ds["id"], [("long.txt", _long_text(6000))])[0]
    api.ok("POST", f"/api/v1/datasets/{ds['id']}/chunks", key, json={"document_ids": [doc["id"]]})
    wait_for(lambda: documents(api, key, ds["id"])[0]["progress"] > 0, 20, "parsing to start")
    assert api.call("DELETE", f"/api/v1/datasets/{ds['id']}/chunks", key, json={"document_ids": [doc["id"]]}) == {"code": 0}
    assert documents(api, key, ds["id"])[0]["run"] == "CANCEL"  # at once, before the worker notices
    with MetaDB.open(settings.meta_url) as meta:
        task = wait_for(lambda: (t := meta.list_tasks(ds["id"], doc_id=doc["id"])[-1]).status in FINISHED and t,
                        20, "the worker to stop")
    assert task.status == "cancelled" and task.cancel_requested and task.attempts == 1
    final = documents(api, key, ds["id"])[0]
    assert final["run"] == "CANCEL" and final["chunk_count"] == 0 and final["progress"] == 0.0, final
    # nothing of it stays searchable, and it can be parsed again later
    assert api.ok("POST", "/api/v1/retrieval", key, json={"question": "Mira Castell charter",
                                                          "dataset_ids": [ds["id"]]})["chunks"] == []
    assert graph_of(api, key, ds["id"]) == {}
    assert api.call("DELETE", f"/api/v1/datasets/{ds['id']}/chunks", key, json={"document_ids": [doc["id"]]}) == {
        "code": 102, "message": "Can't stop parsing document with progress at 0 or 1"}


def _normalized(graph: dict[str, Any], names: dict[str, str]) -> tuple[dict, dict]:
    # description fragments are ordered by chunk id, a hash of the (dataset-specific) document id
    nodes = {n["id"]: (n["entity_type"], sorted(n["description"].split("\n")), sorted(names[s] for s in n["source_id"]), n["rank"])
             for n in graph["nodes"]}
    edges = {tuple(sorted((e["source"], e["target"]))): (sorted(e["description"].split("\n")), e["weight"], sorted(e["keywords"]),
                                                         sorted(names[s] for s in e["source_id"]))
             for e in graph["edges"]}
    return nodes, edges


def test_concurrent_documents_build_the_same_graph_as_sequential(api: Api, keys: dict[str, str],
                                                                 celery_app: KBCelery) -> None:
    key = keys["alice"]
    # two documents that share entities, so their merges touch the same rows
    files = sample("mira_castell.md", "lumen_cartographers_guild.md")
    together = create_dataset(api, key, "concurrent")
    rows = upload(api, key, together["id"], files)
    parse_and_wait(api, key, together["id"], [r["id"] for r in rows])
    one_by_one = create_dataset(api, key, "sequential")
    rows_seq = upload(api, key, one_by_one["id"], files)
    for row in rows_seq:
        parse_and_wait(api, key, one_by_one["id"], [row["id"]])
    names = {r["id"]: r["name"] for r in rows + rows_seq}
    wait_refreshed(celery_app, together["id"])
    wait_refreshed(celery_app, one_by_one["id"])
    a = graph_of(api, key, together["id"])
    b = graph_of(api, key, one_by_one["id"])
    na, nb = _normalized(a, names), _normalized(b, names)
    assert a["nodes"] and na == nb
    assert {n["id"]: round(n["pagerank"], 6) for n in a["nodes"]} == {n["id"]: round(n["pagerank"], 6) for n in b["nodes"]}
    shared = [n for n in a["nodes"] if len(n["source_id"]) == 2]
    assert shared, "the two documents should share entities"


def test_refresh_is_debounced(celery_app: KBCelery, api: Api, keys: dict[str, str]) -> None:
    ds = create_dataset(api, keys["alice"], "debounce")
    assert schedule_refresh(celery_app, "alice", ds["id"]) is True
    assert schedule_refresh(celery_app, "alice", ds["id"]) is False  # one refresh serves both
    wait_refreshed(celery_app, ds["id"])
    assert schedule_refresh(celery_app, "alice", ds["id"]) is True
    wait_refreshed(celery_app, ds["id"])
