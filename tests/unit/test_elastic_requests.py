"""What ElasticStore sends over the wire, captured by a stdlib HTTP server that answers like ES 8.

No Elasticsearch can run here, so these tests pin the exact requests (method, path, query string,
JSON body) the real ``elasticsearch`` client emits for each DocStore operation, and check how the
store reads plausible ES 8 answers. Each expected body names the ES reference page it follows.
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest
from elasticsearch import Elasticsearch

from kbgraph.config import Settings
from kbgraph.store.base import (
    Condition,
    SearchRequest,
    StoreError,
    StoreUnavailable,
    TextQuery,
    VectorQuery,
    any_of,
    eq,
    exists,
    missing,
    none_of,
)
from kbgraph.store.elastic import ElasticStore
from kbgraph.store.elastic.indices import index_name, tenant_names
from kbgraph.store.elastic.queries import build_filter, required_tokens

MAPPINGS = json.loads((Path(__file__).resolve().parents[2] / "es_mappings" / "index.json").read_text())
INDEX = "kbgraph_t1.current"  # the tenant's alias: every read and write goes there

Answer = tuple[int, Any]


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: Any  # parsed JSON, a list for NDJSON (bulk), None when empty


class FakeElasticsearch:
    """Answers scripted responses first (FIFO per method + path pattern), else plausible defaults."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.scripts: list[tuple[str, re.Pattern[str], Callable[[Recorded], Answer]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8") if length else ""
                body: Any = None
                if raw.strip():
                    lines = [line for line in raw.split("\n") if line.strip()]
                    ndjson = parts.path.endswith(("_bulk", "_msearch"))
                    body = [json.loads(line) for line in lines] if ndjson else json.loads(raw)
                rec = Recorded(self.command, parts.path, dict(parse_qsl(parts.query)), body)
                fake.requests.append(rec)
                status, payload = fake.answer(rec)
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def script(self, method: str, path: str, answer: Answer | Callable[[Recorded], Answer]) -> None:
        fn = answer if callable(answer) else (lambda rec, a=answer: a)
        self.scripts.append((method, re.compile(path), fn))

    def answer(self, rec: Recorded) -> Answer:
        for i, (method, pattern, fn) in enumerate(self.scripts):
            if method == rec.method and pattern.fullmatch(rec.path):
                del self.scripts[i]
                return fn(rec)
        return default_answer(rec)

    def sent(self, method: str | None = None, path: str | None = None) -> list[Recorded]:
        return [r for r in self.requests if (method is None or r.method == method)
                and (path is None or re.fullmatch(path, r.path))]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def default_answer(rec: Recorded) -> Answer:
    if rec.method == "HEAD":
        return 200, None
    if rec.method == "GET" and rec.path == "/":
        return 200, {"name": "fake", "cluster_name": "fake", "version": {"number": "8.18.8"},
                     "tagline": "You Know, for Search"}
    if rec.path.endswith("/_bulk"):
        items = []
        lines = iter(rec.body)
        for line in lines:
            op, meta = next(iter(line.items()))
            if op != "delete":
                next(lines)  # the document (index) or partial doc (update) line
            result = {"index": "created", "update": "updated", "delete": "deleted"}[op]
            items.append({op: {"_index": meta["_index"], "_id": meta["_id"], "status": 201 if op == "index" else 200,
                               "result": result}})
        return 200, {"took": 1, "errors": False, "items": items}
    if rec.path.endswith("/_refresh"):
        return 200, {"_shards": {"total": 1, "successful": 1, "failed": 0}}
    if rec.path.endswith("/_mapping"):
        return 200, {"acknowledged": True}
    if rec.method == "PUT":
        return 200, {"acknowledged": True, "shards_acknowledged": True, "index": rec.path.strip("/")}
    if rec.path == "/_pit" and rec.method == "DELETE":
        return 200, {"succeeded": True, "num_freed": 1}
    return 404, {"error": {"type": "no_script", "reason": f"test has no answer for {rec.method} {rec.path}"},
                 "status": 404}


def hits(*rows: tuple[str, float | None, dict[str, Any]], total: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"took": 1, "timed_out": False,
                            "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
                            "hits": {"max_score": None, "hits": [
                                {"_index": INDEX, "_id": i, "_score": s, "_source": src} for i, s, src in rows]}}
    if total is not None:
        body["hits"]["total"] = {"value": total, "relation": "eq"}
    return body


INDEX_MISSING = (404, {"error": {"root_cause": [{"type": "index_not_found_exception", "reason": "no such index"}],
                                 "type": "index_not_found_exception", "reason": "no such index [kbgraph_t1]"},
                       "status": 404})


@pytest.fixture
def es() -> Iterator[FakeElasticsearch]:
    fake = FakeElasticsearch()
    yield fake
    fake.close()


@pytest.fixture
def store(es: FakeElasticsearch) -> Iterator[ElasticStore]:
    client = Elasticsearch(hosts=[es.url], request_timeout=5, max_retries=3, retry_on_timeout=True)
    s = ElasticStore(client, es.url, index_prefix="kbgraph_", shards=2, replicas=1, refresh_interval="5s",
                     bulk_backoff=0.01)
    yield s
    s.close()


KB_FILTER = {"terms": {"kb_id": ["kb1"]}}
# a search for ids and scores only: no stored field read (not even _id), the id from its doc values
IDS_ONLY = {"_source": False, "stored_fields": "_none_", "docvalue_fields": ["id"]}


# --- pure helpers ----------------------------------------------------------------------------

def test_index_names_follow_es_rules() -> None:
    assert index_name("kbgraph_", "t1") == "kbgraph_t1"
    sanitized = index_name("kbgraph_", "Tenant/A b")
    assert re.fullmatch(r"kbgraph_tenant_a_b-[0-9a-f]{8}", sanitized)
    # two tenants that sanitize alike still get different indices
    assert index_name("kbgraph_", "A") != index_name("kbgraph_", "a")
    assert index_name("_X_", "t") == "x_t"  # cannot start with _ - + (Create index API: index name rules)
    assert len(index_name("p", "x" * 400).encode()) <= 255


def test_tenant_names_keep_tenants_apart_and_fit_the_length_limit() -> None:
    names = tenant_names("kbgraph_", "t1")
    assert (names.legacy, names.alias, names.generation(3)) == ("kbgraph_t1", "kbgraph_t1.current", "kbgraph_t1.3")
    assert [names.generation_of(i) for i in ("kbgraph_t1", "kbgraph_t1.2", "kbgraph_t10.2", "kbgraph_t1.x")] == [
        0, 2, None, None]
    # a tenant's names never start like another tenant's: sanitized names hold no dot
    assert not tenant_names("kbgraph_", "t1.2").legacy.startswith("kbgraph_t1.")
    long = tenant_names("p_", "x" * 400)
    for name in (long.legacy, long.alias, long.generation(999_999)):
        assert len(name.encode()) <= 255
    assert long.generation_of(long.generation(7)) == 7 and long.alias != tenant_names("p_", "x" * 399).alias


def test_filter_covers_every_operator() -> None:
    # Query DSL pages: term, terms, ids, exists, range; Boolean query (filter / must_not)
    where = [eq("doc_id", "d1"), any_of("name_kwd", ["a", "b"]), none_of("entity_type_kwd", ["x"]),
             exists("pagerank_flt"), missing("parent_kwd"), Condition("level_int", "gte", 1),
             Condition("rating_flt", "lt", 5.5), Condition("id", "in", ["i1", "i2"]), eq("id", "i3"),
             Condition("id", "not_in", ["i4"])]
    assert build_filter(["kb1", "kb2"], where) == {"bool": {
        "filter": [{"terms": {"kb_id": ["kb1", "kb2"]}}, {"term": {"doc_id": "d1"}},
                   {"terms": {"name_kwd": ["a", "b"]}}, {"exists": {"field": "pagerank_flt"}},
                   {"range": {"level_int": {"gte": 1}}}, {"range": {"rating_flt": {"lt": 5.5}}},
                   {"ids": {"values": ["i1", "i2"]}}, {"ids": {"values": ["i3"]}}],
        "must_not": [{"terms": {"entity_type_kwd": ["x"]}}, {"exists": {"field": "parent_kwd"}},
                     {"ids": {"values": ["i4"]}}]}}


def test_required_tokens_rounds_down_without_float_noise() -> None:
    # Minimum should match page: percentages round down; the embedded store does the same
    assert required_tokens(0.0, 4) == 1
    assert required_tokens(0.7, 10) == 7  # 0.7 * 10 is 6.999999999999999 in floating point
    assert required_tokens(0.5, 3) == 1
    assert required_tokens(1.0, 3) == 3


# --- indices ---------------------------------------------------------------------------------

GREEN = {"status": "green", "timed_out": False, "number_of_data_nodes": 2, "active_shards": 4}


def test_ensure_index_creates_with_the_mapping_file(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("HEAD", f"/_alias/{INDEX}", (404, None))
    es.script("HEAD", "/kbgraph_t1", (404, None))
    es.script("GET", "/_cluster/health", (200, GREEN))
    es.script("GET", "/_cluster/health/kbgraph_t1.1", (200, GREEN))
    store.ensure_index("t1")
    store.ensure_index("t1")  # cached: no second round trip
    alias, legacy, info, nodes, put, health = es.requests
    assert (alias.method, alias.path) == ("HEAD", f"/_alias/{INDEX}")  # Alias exists API
    assert (legacy.method, legacy.path) == ("HEAD", "/kbgraph_t1")  # an index an older kbgraph made?
    assert (info.method, info.path) == ("GET", "/")  # the cluster's version decides the definition
    expected_settings = json.loads(json.dumps(MAPPINGS["settings"]))
    expected_settings["index"].update(number_of_shards=2, number_of_replicas=1, refresh_interval="5s")
    assert (nodes.method, nodes.path) == ("GET", "/_cluster/health")  # enough data nodes for 1 replica?
    # Create index API: generation 1 of the tenant, created with its alias in one request
    assert (put.method, put.path) == ("PUT", "/kbgraph_t1.1")
    assert put.body == {"settings": expected_settings, "mappings": MAPPINGS["mappings"], "aliases": {INDEX: {}}}
    # Cluster health API: every copy of the new index's shards active before it is written to
    assert (health.path, health.query) == ("/_cluster/health/kbgraph_t1.1",
                                           {"wait_for_status": "green", "timeout": "60s"})
    assert len(es.requests) == 6
    assert not es.sent(path="/_index_template/.*")  # writes require the alias: no template is needed


def test_ensure_index_refuses_more_replicas_than_nodes(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("HEAD", f"/_alias/{INDEX}", (404, None))
    es.script("HEAD", "/kbgraph_t1", (404, None))
    es.script("GET", "/_cluster/health", (200, {**GREEN, "number_of_data_nodes": 1}))
    with pytest.raises(StoreError, match="1 data node.*KBGRAPH_ES_REPLICAS to 0"):
        store.ensure_index("t1")
    assert not es.sent("PUT")  # nothing created


def test_ensure_index_says_when_copies_do_not_start(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("HEAD", f"/_alias/{INDEX}", (404, None))
    es.script("HEAD", "/kbgraph_t1", (404, None))
    es.script("GET", "/_cluster/health", (200, GREEN))
    es.script("GET", "/_cluster/health/kbgraph_t1.1", (200, {**GREEN, "status": "yellow", "timed_out": True,
                                                             "active_shards": 2, "unassigned_shards": 2}))
    with pytest.raises(StoreError, match="only 2 of its shard copies are active.*not survive the loss of a node"):
        store.ensure_index("t1")


def test_ensure_index_adopts_an_index_made_before_aliases(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("HEAD", f"/_alias/{INDEX}", (404, None))
    es.script("POST", "/_aliases", (200, {"acknowledged": True}))
    store.ensure_index("t1")  # HEAD /kbgraph_t1 answers 200: an index of the old name is there
    adopt = es.sent("POST", "/_aliases")[0]
    # Aliases API: the alias points at the existing index; nothing is copied or created
    assert adopt.body == {"actions": [{"add": {"index": "kbgraph_t1", "alias": INDEX}}]}
    assert not es.sent("PUT")


def test_from_9_2_vectors_stay_in_source(es: FakeElasticsearch, store: ElasticStore) -> None:
    """Elasticsearch 9.2 leaves dense vectors out of _source by default (index.mapping.exclude_source_vectors);
    kbgraph reads stored vectors back, so its indexes keep them."""
    es.script("GET", "/", (200, {"name": "n", "version": {"number": "9.2.1"}}))
    es.script("HEAD", f"/_alias/{INDEX}", (404, None))
    es.script("HEAD", "/kbgraph_t1", (404, None))
    es.script("GET", "/_cluster/health", (200, GREEN))
    es.script("GET", "/_cluster/health/kbgraph_t1.1", (200, GREEN))
    store.ensure_index("t1")
    create = es.sent("PUT", "/kbgraph_t1.1")[0]
    assert create.body["settings"]["index"]["mapping"]["exclude_source_vectors"] is False


def test_ensure_index_tolerates_a_concurrent_create(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("HEAD", f"/_alias/{INDEX}", (404, None))
    es.script("HEAD", "/kbgraph_t1", (404, None))
    es.script("GET", "/_cluster/health", (200, GREEN))
    es.script("PUT", "/kbgraph_t1.1", (400, {"error": {"type": "resource_already_exists_exception",
                                                       "reason": "index [kbgraph_t1.1/abc] already exists"},
                                             "status": 400}))
    es.script("GET", "/_cluster/health/kbgraph_t1.1", (200, GREEN))
    store.ensure_index("t1")  # no exception: the other creator made it with the alias (HEAD answers 200)


def test_mapping_file_types_every_record_field() -> None:
    from kbgraph.store.records import (Chunk, CommunityReport, Entity, EntityMention, Finding, GraphMeta,
                                       Relation, RelationMention, ResolutionDecision)
    docs = [Chunk("c", "kb", "d", "n", "x", "x", "n", 0, 0, 1, 1).to_doc(),
            EntityMention("kb", "d", "c", "k", "K", "t", "x").to_doc(),
            RelationMention("kb", "d", "c", "a", "b", "x").to_doc(),
            Entity("kb", "k", "K", "t", "x", "k", "x").to_doc(),
            Relation("kb", "a", "b", "A", "B", "x", "x").to_doc(),
            CommunityReport("kb", 0, "0", ["a"], "T", "s", [Finding("s", "e")], 1.0, "r", 1).to_doc(),
            GraphMeta("kb").to_doc(), ResolutionDecision("kb", "a", "b", True).to_doc()]
    properties = MAPPINGS["mappings"]["properties"]
    missing_fields = {name for doc in docs for name in doc} - set(properties)
    assert not missing_fields
    assert properties["id"]["type"] == "keyword"  # sortable: scan and listings sort on it
    for name in ("content_with_weight", "findings_with_weight", "phases_with_weight"):
        # "enabled" mapping parameter page: a disabled object also accepts non-object values
        assert properties[name] == {"type": "object", "enabled": False}


def test_drop_index_deletes_every_index_of_the_tenant(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("GET", re.escape("/kbgraph_t1,kbgraph_t1.*/_alias"), (200, {
        "kbgraph_t1.2": {"aliases": {INDEX: {}}}, "kbgraph_t1.3": {"aliases": {}},
        "kbgraph_t10.1": {"aliases": {"kbgraph_t10.current": {}}}}))  # another tenant's: never matched, kept
    es.script("DELETE", "/kbgraph_t1.2,kbgraph_t1.3", (200, {"acknowledged": True}))
    es.script("GET", re.escape("/kbgraph_*/_alias"), (200, {}))  # nothing left under the prefix
    es.script("DELETE", "/_index_template/kbgraph_template", (200, {"acknowledged": True}))
    store.drop_index("t1")
    # Delete index API with the indices named (wildcard deletes are refused by default)
    assert [(r.method, r.path) for r in es.requests] == [
        ("GET", "/kbgraph_t1,kbgraph_t1.*/_alias"), ("DELETE", "/kbgraph_t1.2,kbgraph_t1.3"),
        ("GET", "/kbgraph_*/_alias"), ("DELETE", "/_index_template/kbgraph_template")]


def test_drop_index_ignores_a_missing_index(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("GET", re.escape("/kbgraph_t1,kbgraph_t1.*/_alias"), (200, {}))
    es.script("GET", re.escape("/kbgraph_*/_alias"), (200, {"kbgraph_t2.1": {"aliases": {"kbgraph_t2.current": {}}}}))
    store.drop_index("t1")
    assert [(r.method, r.path) for r in es.requests] == [("GET", "/kbgraph_t1,kbgraph_t1.*/_alias"),
                                                         ("GET", "/kbgraph_*/_alias")]


# --- writes ----------------------------------------------------------------------------------

def test_upsert_maps_new_vectors_then_bulk_indexes_and_refreshes(es: FakeElasticsearch, store: ElasticStore) -> None:
    docs = [{"id": "a", "content_ltks": "x y", "q_3_vec": [1.0, 0.0, 0.0]},
            {"id": "b", "content_ltks": "y", "q_3_vec": [0.0, 0.0, 0.0]}]  # zero vector: dropped
    assert store.upsert("t1", "kb1", docs) == 2
    paths = [(r.method, r.path) for r in es.requests]
    assert paths == [("HEAD", f"/_alias/{INDEX}"), ("PUT", f"/{INDEX}/_mapping"), ("PUT", "/_bulk"),
                     ("POST", f"/{INDEX}/_refresh")]
    # refresh=True: one refresh once every chunk is in (refresh=wait_for on each chunk waited for the
    # next scheduled refresh once per chunk); require_alias: a write to a tenant whose alias is gone
    # fails instead of creating an index
    assert es.requests[2].query == {"require_alias": "true"}
    mapping = es.requests[1].body  # Update mapping API; dense_vector page: dims, index, similarity, index_options
    assert mapping == {"properties": {"q_3_vec": {"type": "dense_vector", "dims": 3, "index": True,
                                                  "similarity": "cosine",
                                                  "index_options": {"type": "hnsw", "m": 16, "ef_construction": 100}}}}
    # Bulk API: NDJSON action line {"index": {"_index", "_id"}} then the whole document
    assert es.requests[2].body == [
        {"index": {"_index": INDEX, "_id": "a"}},
        {"id": "a", "content_ltks": "x y", "q_3_vec": [1.0, 0.0, 0.0], "kb_id": "kb1"},
        {"index": {"_index": INDEX, "_id": "b"}},
        {"id": "b", "content_ltks": "y", "kb_id": "kb1"}]
    # a second upsert of the same vector size does not touch the mapping again
    store.upsert("t1", "kb1", [{"id": "c", "q_3_vec": [0.0, 1.0, 0.0]}], refresh=False)
    assert [(r.method, r.path, r.query) for r in es.requests[4:]] == [("PUT", "/_bulk", {"require_alias": "true"})]


def test_a_read_never_takes_a_refresh_still_under_way_for_one_that_covers_its_writes(
        es: FakeElasticsearch, store: ElasticStore) -> None:
    # one thread's refresh is sent after another thread's write was acknowledged, and is slow to
    # answer (a node lost meanwhile): the writer's next read must not run before a refresh that
    # covers its write has answered (it sends its own), or a merge's scan misses the mentions the
    # merge just wrote (seen in the cluster drill: entities missing from the graph)
    store.upsert("t1", "kb1", [{"id": "a", "content_ltks": "x"}], refresh=False)
    release, arrived = threading.Event(), threading.Event()

    def slow_refresh(rec: Recorded) -> Answer:
        arrived.set()
        release.wait(10)
        return 200, {"_shards": {"total": 1, "successful": 1, "failed": 0}}

    es.script("POST", f"/{INDEX}/_refresh", slow_refresh)
    other = threading.Thread(target=store.refresh, args=("t1",))
    other.start()
    try:
        assert arrived.wait(5)
        es.script("POST", f"/{INDEX}/_count", (200, {"count": 1, "_shards": {"total": 1}}))
        assert store.count("t1", ["kb1"]) == 1
        paths = [r.path for r in es.requests if r.method == "POST"]
        assert paths[-3:] == [f"/{INDEX}/_refresh", f"/{INDEX}/_refresh", f"/{INDEX}/_count"]
    finally:
        release.set()
        other.join()
    # once a finished refresh covers every write, reads send none
    es.script("POST", f"/{INDEX}/_count", (200, {"count": 1, "_shards": {"total": 1}}))
    store.count("t1", ["kb1"])
    assert [r.path for r in es.requests if r.method == "POST"][-1] == f"/{INDEX}/_count"
    assert len(es.sent("POST", f"/{INDEX}/_refresh")) == 2


def test_a_refresh_that_missed_a_shard_is_asked_again(es: FakeElasticsearch, store: ElasticStore) -> None:
    # a shard whose primary went with a node is not refreshed at all: the replica promoted in its
    # place would answer without the writes; the refresh is asked again until every shard answered
    missed = {"_shards": {"total": 2, "successful": 1, "failed": 1, "failures": [
        {"index": INDEX, "shard": 1, "reason": {"type": "node_disconnected_exception", "reason": "gone"}}]}}
    es.script("POST", f"/{INDEX}/_refresh", (200, missed))
    store.refresh("t1")
    assert len(es.sent("POST", f"/{INDEX}/_refresh")) == 2


def test_vectors_given_as_float32_arrays_go_out_as_json_lists(es: FakeElasticsearch, store: ElasticStore) -> None:
    """The indexing steps hand the stores float32 array rows; the JSON sent must hold plain lists
    (the elasticsearch client's serializer writes numpy arrays as lists)."""
    rows = np.array([[0.5, 0.25, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    store.upsert("t1", "kb1", [{"id": "a", "q_3_vec": rows[0]}, {"id": "b", "q_3_vec": rows[1]}], refresh=False)
    assert es.sent("PUT", "/_bulk")[0].body == [
        {"index": {"_index": INDEX, "_id": "a"}}, {"id": "a", "q_3_vec": [0.5, 0.25, 0.0], "kb_id": "kb1"},
        {"index": {"_index": INDEX, "_id": "b"}}, {"id": "b", "kb_id": "kb1"}]  # zero vector: dropped
    es.script("POST", f"/{INDEX}/_search", (200, ids_only(("a", 0.0))))
    store.patch("t1", "kb1", {"a": {"q_3_vec": rows[0][::-1].copy(), "embedded_int": 1}}, refresh=False)
    assert es.sent("PUT", "/_bulk")[1].body == [{"update": {"_index": INDEX, "_id": "a", "retry_on_conflict": 3}},
                                                {"doc": {"q_3_vec": [0.0, 0.25, 0.5], "embedded_int": 1}}]
    # a zero vector in a partial update clears the field instead of reaching ES cosine, which rejects it
    es.script("POST", f"/{INDEX}/_search", (200, ids_only(("a", 0.0))))
    store.patch("t1", "kb1", {"a": {"q_3_vec": rows[1]}}, refresh=False)
    assert es.sent("PUT", "/_bulk")[2].body[1] == {"doc": {"q_3_vec": None}}


def test_non_finite_numbers_are_refused_and_the_rest_written(es: FakeElasticsearch, store: ElasticStore) -> None:
    with pytest.raises(StoreError, match="1 of 2.*not a JSON number"):
        store.upsert("t1", "kb1", [{"id": "a", "x_flt": float("nan")}, {"id": "b", "x_flt": 1.0}], refresh=False)
    assert es.sent("PUT", "/_bulk")[0].body == [{"index": {"_index": INDEX, "_id": "b"}},
                                                {"id": "b", "x_flt": 1.0, "kb_id": "kb1"}]


def test_upsert_chunks_bulk_requests_by_bytes(es: FakeElasticsearch, store: ElasticStore) -> None:
    store._bulk_bytes = 400
    store.upsert("t1", "kb1", [{"id": f"d{i}", "content_ltks": "w " * 50} for i in range(4)], refresh=False)
    bulks = es.sent("PUT", "/_bulk")
    assert len(bulks) > 1 and sum(len(b.body) // 2 for b in bulks) == 4


def test_a_large_write_goes_as_two_streams_of_bulk_requests(es: FakeElasticsearch, store: ElasticStore) -> None:
    """The node indexes a bulk request on one thread: a write of more than a chunk is split in two
    parts sent side by side, every document once."""
    assert store.upsert("t1", "kb1", [{"id": f"d{i:04d}"} for i in range(1200)], refresh=False) == 1200
    bulks = es.sent("PUT", "/_bulk")
    sent = [line["index"]["_id"] for b in bulks for line in b.body if "index" in line]
    assert len(bulks) == 4 and sorted(sent) == [f"d{i:04d}" for i in range(1200)]  # 500 + 100 per part
    assert max(len(b.body) // 2 for b in bulks) == 500


def test_bulk_item_errors_raise_naming_the_ids(es: FakeElasticsearch, store: ElasticStore) -> None:
    def answer(rec: Recorded) -> Answer:
        return 200, {"took": 1, "errors": True, "items": [
            {"index": {"_index": INDEX, "_id": "a", "status": 201, "result": "created"}},
            {"index": {"_index": INDEX, "_id": "b", "status": 400, "error": {
                "type": "document_parsing_exception", "reason": "[1:20] failed to parse field [position_int]"}}}]}
    es.script("PUT", "/_bulk", answer)
    with pytest.raises(StoreError) as err:
        store.upsert("t1", "kb1", [{"id": "a"}, {"id": "b", "position_int": "x"}])
    assert "1 of 2" in str(err.value) and "b (400 document_parsing_exception" in str(err.value)
    assert "a (" not in str(err.value)


def test_bulk_rejections_are_retried(es: FakeElasticsearch, store: ElasticStore) -> None:
    # a whole-request 429 (the transport retries it) ...
    es.script("PUT", "/_bulk", (429, {"error": {"type": "es_rejected_execution_exception", "reason": "busy"},
                                      "status": 429}))
    # ... then an item-level 429 (streaming_bulk retries just that item after a backoff)
    es.script("PUT", "/_bulk", lambda rec: (200, {"took": 1, "errors": True, "items": [
        {"index": {"_index": INDEX, "_id": "a", "status": 201, "result": "created"}},
        {"index": {"_index": INDEX, "_id": "b", "status": 429,
                   "error": {"type": "es_rejected_execution_exception", "reason": "queue full"}}}]}))
    assert store.upsert("t1", "kb1", [{"id": "a"}, {"id": "b"}], refresh=False) == 2
    bulks = es.sent("PUT", "/_bulk")
    assert len(bulks) == 3
    assert [line for line in bulks[2].body if "index" in line] == [{"index": {"_index": INDEX, "_id": "b"}}]


def test_patch_sends_partial_updates_for_owned_ids_only(es: FakeElasticsearch, store: ElasticStore) -> None:
    # the ids of this knowledge base among those named: a search reading no stored field (a
    # realtime get of each row's kb_id parsed its whole source), then a realtime multi get of those
    # it did not find (another writer may have written them unrefreshed): b belongs to another
    # knowledge base and c does not exist, so only a is patched
    es.script("POST", f"/{INDEX}/_search", (200, ids_only(("a", 0.0))))
    es.script("POST", f"/{INDEX}/_mget", (200, {"docs": [
        {"_index": INDEX, "_id": "b", "found": True, "_source": {"id": "b", "kb_id": "other"}},
        {"_index": INDEX, "_id": "c", "found": False}]}))
    changed = store.patch("t1", "kb1", {"a": {"pagerank_flt": 0.5}, "b": {"pagerank_flt": 0.1},
                                        "c": {"pagerank_flt": 0.2}})
    assert changed == 1
    found = es.sent("POST", f"/{INDEX}/_search")[0]
    assert found.body == {"query": {"bool": {"filter": [KB_FILTER, {"ids": {"values": ["a", "b", "c"]}}]}},
                          "size": 3, **IDS_ONLY, "track_total_hits": False}
    mget = es.sent("POST", f"/{INDEX}/_mget")[0]
    assert mget.body == {"ids": ["b", "c"]} and mget.query == {"_source_includes": "id,kb_id"}
    # Bulk API: update action with a partial "doc"
    assert es.sent("PUT", "/_bulk")[0].body == [{"update": {"_index": INDEX, "_id": "a", "retry_on_conflict": 3}},
                                                {"doc": {"pagerank_flt": 0.5}}]


def scan_answers(es: FakeElasticsearch, ids: list[str]) -> None:
    """A scan whose one page holds ``ids`` (fewer than a batch: the scan ends there)."""
    page = hits(*[(i, None, {"id": i}) for i in ids])
    for h in page["hits"]["hits"]:
        h["sort"] = [h["_id"]]
    es.script("POST", f"/{INDEX}/_search", (200, page))


def test_delete_by_filter_scans_after_a_refresh_then_bulk_deletes(es: FakeElasticsearch, store: ElasticStore) -> None:
    scan_answers(es, ["a", "b"])
    assert store.delete("t1", ["kb1"], [eq("doc_id", "d1")]) == 2
    refresh, page, bulk, refreshed = es.requests
    # a search sees refreshed documents only: refresh first, so rows written just before, by any
    # writer, are deleted too
    assert (refresh.method, refresh.path) == ("POST", f"/{INDEX}/_refresh")
    assert page.body["query"] == {"bool": {"filter": [KB_FILTER, {"term": {"doc_id": "d1"}}]}}
    # ids only: no stored field read (not even _id), the sort value is the id
    assert page.body["_source"] is False and page.body["stored_fields"] == "_none_"
    # Bulk API delete actions; no _delete_by_query (the reindex module is not on every cluster)
    assert bulk.body == [{"delete": {"_index": INDEX, "_id": "a"}}, {"delete": {"_index": INDEX, "_id": "b"}}]
    assert bulk.query == {"require_alias": "true"} and (refreshed.method, refreshed.path) == ("POST", f"/{INDEX}/_refresh")
    assert not es.sent(path=r".*_by_query")


def test_delete_of_named_ids_searches_them(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("POST", f"/{INDEX}/_search", (200, ids_only(("a", 0.0))))
    es.script("POST", f"/{INDEX}/_mget", (200, {"docs": [
        {"_index": INDEX, "_id": "b", "found": True, "_source": {"id": "b", "kb_id": "other"}}]}))
    assert store.delete("t1", ["kb1"], [Condition("id", "in", ["a", "b"])], refresh=False) == 1
    found, mget, bulk = es.requests
    assert found.body["query"] == {"bool": {"filter": [KB_FILTER, {"ids": {"values": ["a", "b"]}}]}}
    assert mget.body == {"ids": ["b"]}
    assert bulk.body == [{"delete": {"_index": INDEX, "_id": "a"}}]  # b belongs to another knowledge base


def test_bulk_delete_failures_raise(es: FakeElasticsearch, store: ElasticStore) -> None:
    scan_answers(es, ["x"])
    es.script("PUT", "/_bulk", (200, {"took": 1, "errors": True, "items": [
        {"delete": {"_index": INDEX, "_id": "x", "status": 500, "error": {"type": "x", "reason": "y"}}}]}))
    with pytest.raises(StoreError, match="not deleted.*x \\(500"):
        store.delete("t1", ["kb1"])


def test_update_by_filter_sends_partial_updates(es: FakeElasticsearch, store: ElasticStore) -> None:
    scan_answers(es, ["e1", "e2"])
    assert store.update("t1", ["kb1"], [eq("knowledge_graph_kwd", "entity")], {"community_ids_kwd": ["c1"]}) == 2
    bulk = es.sent("PUT", "/_bulk")[0]
    # no _update_by_query (reindex module) and no Painless (lang-painless module): bulk partial updates
    assert bulk.body == [{"update": {"_index": INDEX, "_id": "e1", "retry_on_conflict": 3}},
                         {"doc": {"community_ids_kwd": ["c1"]}},
                         {"update": {"_index": INDEX, "_id": "e2", "retry_on_conflict": 3}},
                         {"doc": {"community_ids_kwd": ["c1"]}}]


# --- reads -----------------------------------------------------------------------------------

def test_get_keeps_asked_order_and_filters_kbs(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("POST", f"/{INDEX}/_mget", (200, {"docs": [
        {"_index": INDEX, "_id": "b", "found": True, "_source": {"id": "b", "kb_id": "kb1", "name_kwd": "B"}},
        {"_index": INDEX, "_id": "a", "found": True, "_source": {"id": "a", "kb_id": "kb1", "name_kwd": "A"}},
        {"_index": INDEX, "_id": "x", "found": True, "_source": {"id": "x", "kb_id": "kb9", "name_kwd": "X"}}]}))
    assert store.get("t1", ["kb1"], ["b", "a", "x", "b"], fields=["name_kwd"]) == [
        {"name_kwd": "B", "id": "b"}, {"name_kwd": "A", "id": "a"}]
    assert es.requests[0].body == {"ids": ["b", "a", "x"]}
    es.script("POST", f"/{INDEX}/_mget", (200, {"docs": [
        {"_index": INDEX, "_id": "a", "found": True, "_source": {"id": "a", "kb_id": "kb1", "q_3_vec": [1, 0, 0]}}]}))
    # every field: the whole source (the node's source filtering parses every vector), vectors only when named
    assert store.get("t1", ["kb1"], ["a"]) == [{"id": "a", "kb_id": "kb1"}]
    assert es.requests[1].query == {}


def test_a_get_whose_rows_failed_is_asked_again_never_taken_for_not_found(es: FakeElasticsearch,
                                                                          store: ElasticStore) -> None:
    # a tenant move deletes the old index under the alias after the node resolved the alias to it:
    # its items fail; asked again, the alias names the new index, where the rows are
    gone = {"type": "index_not_found_exception", "reason": "no such index [kbgraph_t1.1]"}
    es.script("POST", f"/{INDEX}/_mget", (200, {"docs": [
        {"_index": "kbgraph_t1.1", "_id": "a", "error": gone},
        {"_index": "kbgraph_t1.1", "_id": "b", "error": gone}]}))
    es.script("POST", f"/{INDEX}/_mget", (200, {"docs": [
        {"_index": "kbgraph_t1.2", "_id": "a", "found": True, "_source": {"id": "a", "kb_id": "kb1"}},
        {"_index": "kbgraph_t1.2", "_id": "b", "found": False}]}))
    assert store.get("t1", ["kb1"], ["a", "b"], fields=["id"]) == [{"id": "a"}]
    assert len(es.sent("POST", f"/{INDEX}/_mget")) == 2


def msearch_answer(*answers: dict[str, Any]) -> Answer:
    """A Multi search API answer: one search answer per search, in order."""
    return 200, {"took": 1, "responses": [{**a, "status": 200} for a in answers]}


def ids_only(*rows: tuple[str, float]) -> dict[str, Any]:
    """A search answer without stored fields: no _id, the id from its doc values (IDS_ONLY)."""
    answer = hits()
    answer["hits"]["hits"] = [{"_index": INDEX, "_score": score, "fields": {"id": [i]}} for i, score in rows]
    return answer


def rows_answer(*sources: dict[str, Any]) -> dict[str, Any]:
    """A search answer of rows read by id (scored.py's round trip 2): _id and the _source asked."""
    return hits(*((src["id"], None, src) for src in sources))


def mget_answer(*sources: dict[str, Any]) -> Answer:
    return 200, {"docs": [{"_index": INDEX, "_id": src["id"], "found": True, "_source": src} for src in sources]}


def test_hybrid_search_requests_and_fused_scores(es: FakeElasticsearch, store: ElasticStore) -> None:
    qv = [1.0, 0.0, 0.0]
    es.script("GET", f"/{INDEX}/_mapping/field/q_3_vec", (200, {INDEX: {"mappings": {"q_3_vec": {
        "full_name": "q_3_vec", "mapping": {"q_3_vec": {"type": "dense_vector", "dims": 3}}}}}}))
    # kNN _score for cosine similarity is (1 + cosine) / 2
    cos_d = 1 / math.sqrt(2)
    # one Multi search: the text half (ids and BM25 scores only) and the kNN half
    es.script("POST", "/_msearch", msearch_answer(ids_only(("a", 4.0), ("b", 2.0), ("c", 1.0)),
                                                  ids_only(("a", 1.0), ("d", (1 + cos_d) / 2))))
    # the text hits the kNN window missed (b, c) are scored by a kNN request restricted to their ids
    # (c has no vector, so it is not in the answer), and in the same Multi search the rows of every
    # candidate that can reach the page: a missed hit at most as near as the window's lowest (d)
    es.script("POST", "/_msearch", msearch_answer(ids_only(("b", 0.5)), rows_answer(
        {"id": "a", "kb_id": "kb1", "content_ltks": "alpha beta", "q_3_vec": [1, 0, 0]},
        {"id": "b", "kb_id": "kb1", "content_ltks": "alpha"}, {"id": "c", "kb_id": "kb1", "content_ltks": "gamma"},
        {"id": "d", "kb_id": "kb1", "content_ltks": "delta"})))
    request = SearchRequest(
        kb_ids=["kb1"], where=[eq("knowledge_graph_kwd", "entity")],
        text=TextQuery(tokens=["alpha", "beta", "alpha"], fields={"content_ltks": 1.0, "name_ltks": 2.0},
                       minimum_should_match=1.0),
        vector=VectorQuery("q_3_vec", qv), vector_weight=0.4, threshold=0.1, candidates=5, limit=3)
    result = store.search("t1", request)

    mapping_req, halves_req, second_req = es.requests  # no multi get: the rows came with the cosines
    assert (mapping_req.method, mapping_req.path) == ("GET", f"/{INDEX}/_mapping/field/q_3_vec")  # Get field mapping API
    flt = {"bool": {"filter": [KB_FILTER, {"term": {"knowledge_graph_kwd": "entity"}}]}}
    text_header, text_body, knn_header, knn_body = halves_req.body
    # Multi search API: a header per search; search_type=dfs_query_then_fetch for global term
    # statistics (BM25 the same whichever shard a document lives on)
    assert text_header == {"index": INDEX, "search_type": "dfs_query_then_fetch"} and knn_header == {"index": INDEX}
    assert text_body == {
        # Boolean query: should scores add up (sum of per-field boosted BM25); with a filter
        # clause minimum_should_match defaults to 0, so it is set to 1 explicitly.
        # Match query: query + boost; Minimum should match page: integer number of should clauses.
        "query": {"bool": {
            "filter": [flt, {"bool": {"should": [
                {"bool": {"should": [{"term": {"content_ltks": "alpha"}}, {"term": {"name_ltks": "alpha"}}]}},
                {"bool": {"should": [{"term": {"content_ltks": "beta"}}, {"term": {"name_ltks": "beta"}}]}}],
                "minimum_should_match": 2}}],
            "should": [{"match": {"content_ltks": {"query": "alpha beta", "boost": 1.0}}},
                       {"match": {"name_ltks": {"query": "alpha beta", "boost": 2.0}}}],
            "minimum_should_match": 1}},
        "size": 5, **IDS_ONLY, "track_total_hits": False}
    # kNN search page: top-level knn with k, num_candidates (<= 10,000) and a filter
    assert knn_body == {"knn": {"field": "q_3_vec", "query_vector": qv, "k": 5, "num_candidates": 100, "filter": flt},
                        "size": 5, **IDS_ONLY, "track_total_hits": False}
    missed_header, missed_body, rows_header, rows_body = second_req.body
    assert missed_header == rows_header == {"index": INDEX}
    assert missed_body == {
        "knn": {"field": "q_3_vec", "query_vector": qv, "k": 2, "num_candidates": 100,
                "filter": {"bool": {"filter": [flt, {"ids": {"values": ["b", "c"]}}]}}},
        "size": 2, **IDS_ONLY, "track_total_hits": False}
    # the rows (every field here: the whole source, vectors dropped by the store) of the candidates
    # whose best score reaches the page's last sure place: with 0.6 t + 0.4 v, a at 1.0, b at 0.3
    # and d at 0.283 for sure; b could reach 0.583 and c 0.433 with d's cosine (0.707)
    assert rows_body == {"query": {"bool": {"filter": [KB_FILTER, {"ids": {"values": ["a", "b", "c", "d"]}}]}},
                         "size": 4, "_source": True, "track_total_hits": False}

    # term = _score / 4.0; vector = cosine from the kNN _score; score = 0.6 t + 0.4 v
    want = {"a": (1.0, 1.0), "b": (0.5, 0.0), "c": (0.25, 0.0), "d": (0.0, cos_d)}
    scores = {k: 0.6 * t + 0.4 * v for k, (t, v) in want.items()}
    ordered = sorted(scores, key=lambda k: (-scores[k], k))
    assert [h.id for h in result.hits] == ordered[:3] and result.total == 4
    for hit in result.hits:
        assert hit.term_score == pytest.approx(want[hit.id][0])
        assert hit.vector_score == pytest.approx(want[hit.id][1])
        assert hit.score == pytest.approx(scores[hit.id])
        assert "q_3_vec" not in hit.doc and hit.doc["id"] == hit.id  # vectors only when named


def _mapped_q3(es: FakeElasticsearch) -> None:
    es.script("GET", f"/{INDEX}/_mapping/field/q_3_vec", (200, {INDEX: {"mappings": {"q_3_vec": {
        "full_name": "q_3_vec", "mapping": {"q_3_vec": {"type": "dense_vector", "dims": 3}}}}}}))


def test_a_page_row_the_cosines_did_not_bring_is_read_after_them(es: FakeElasticsearch, store: ElasticStore) -> None:
    """An approximate kNN window can miss a vector nearer than its lowest: the missed hit then scores
    above what round trip 2 reckoned it could reach, and its row, not read with the cosines, is
    read by one multi get; the page is the same as with every row read after fusion."""
    _mapped_q3(es)
    es.script("POST", "/_msearch", msearch_answer(ids_only(("a", 4.0), ("b", 3.9)),
                                                  ids_only(("a", 0.6), ("d", 0.55))))  # cosines 0.2 and 0.1
    # b could reach 0.5 * 0.975 + 0.5 * 0.1 = 0.54 < a's 0.6: only a's row is asked; b's cosine is 0.9
    es.script("POST", "/_msearch", msearch_answer(ids_only(("b", 0.95)), rows_answer({"id": "a", "kb_id": "kb1"})))
    es.script("POST", f"/{INDEX}/_mget", mget_answer({"id": "b", "kb_id": "kb1", "name_kwd": "B"}))
    request = SearchRequest(kb_ids=["kb1"], text=TextQuery(["beta"], {"name_ltks": 1.0}),
                            vector=VectorQuery("q_3_vec", [1.0, 0.0, 0.0]), vector_weight=0.5, candidates=5, limit=1,
                            fields=["name_kwd"])
    result = store.search("t1", request)
    assert [(h.id, h.doc) for h in result.hits] == [("b", {"name_kwd": "B", "id": "b"})] and result.total == 3
    assert es.requests[2].body[3]["query"]["bool"]["filter"][1] == {"ids": {"values": ["a"]}}
    assert es.requests[3].body == {"docs": [{"_id": "b", "_source": {"includes": ["id", "kb_id", "name_kwd"]}}]}


def test_rows_wait_for_the_cosines_when_too_many_candidates_could_reach_the_page(
        es: FakeElasticsearch, store: ElasticStore) -> None:
    """Cosines close together bound nothing: when far more candidates than the page could reach it,
    round trip 2 holds the cosines only and the page's rows are read once it is known (reading every
    candidate's row costs the node more than a round trip)."""
    _mapped_q3(es)
    texts = [(f"t{i:02d}", 10.0 - 0.1 * i) for i in range(20)]
    es.script("POST", "/_msearch", msearch_answer(ids_only(*texts), ids_only(("v", 0.95))))
    es.script("POST", "/_msearch", msearch_answer(ids_only(*((i, 0.5) for i, _ in texts))))
    es.script("POST", f"/{INDEX}/_mget", mget_answer({"id": "t00", "kb_id": "kb1"}))
    request = SearchRequest(kb_ids=["kb1"], text=TextQuery(["beta"], {"name_ltks": 1.0}),
                            vector=VectorQuery("q_3_vec", [1.0, 0.0, 0.0]), vector_weight=0.5, candidates=20, limit=1,
                            fields=["id"])
    result = store.search("t1", request)
    assert [h.id for h in result.hits] == ["t00"]
    assert len(es.requests[2].body) == 2  # the cosines only
    assert es.requests[3].body == {"docs": [{"_id": "t00", "_source": {"includes": ["id", "kb_id"]}}]}


def _narrowed(es: FakeElasticsearch, text_hits: list[tuple[str, float]], knn_hits: list[tuple[str, float]],
              page: str) -> None:
    """Round trips 1 and 2 of one search: its two halves, then the missed text hits' cosines (0.1)
    and the page's row."""
    missed = [(i, 0.55) for i, _ in text_hits if i not in dict(knn_hits)]
    es.script("POST", "/_msearch", msearch_answer(ids_only(*text_hits), ids_only(*knn_hits)))
    es.script("POST", "/_msearch", msearch_answer(ids_only(*missed), rows_answer({"id": page, "kb_id": "kb1"})))


def test_a_small_page_without_a_count_is_searched_in_narrow_windows(es: FakeElasticsearch,
                                                                   store: ElasticStore) -> None:
    """count_total=False and a page of 1 in 200 candidates: each half asks 64 hits (the kNN half
    with the num_candidates of 200, so its 64 are the first of the 200), and the page stands when
    nothing left out could reach it."""
    _mapped_q3(es)
    texts = [(f"t{i:02d}", 10.0 - 0.1 * i) for i in range(64)]  # lowest text part 0.37
    neighbours = [("t00", 0.95), *((f"v{i:02d}", 0.6) for i in range(63))]  # cosines 0.9, then 0.2
    _narrowed(es, texts, neighbours, "t00")
    request = SearchRequest(kb_ids=["kb1"], text=TextQuery(["beta"], {"name_ltks": 1.0}),
                            vector=VectorQuery("q_3_vec", [1.0, 0.0, 0.0]), vector_weight=0.5, candidates=200, limit=1,
                            fields=["id"], count_total=False)
    result = store.search("t1", request)
    assert [h.id for h in result.hits] == ["t00"] and len(es.requests) == 3  # the mapping, round trips 1 and 2
    _, text_body, _, knn_body = es.requests[1].body
    assert text_body["size"] == 64 and (knn_body["knn"]["k"], knn_body["knn"]["num_candidates"]) == (64, 400)


def test_narrow_windows_that_cannot_decide_the_page_are_searched_again_whole(es: FakeElasticsearch,
                                                                             store: ElasticStore) -> None:
    """A neighbour past the text window (cosine 0.99) could have a text part up to the window's lowest
    (0.37) and beat the narrow page's best (0.65): the search is made again in full windows, where its
    text part (0.36) puts it first."""
    _mapped_q3(es)
    texts = [(f"t{i:02d}", 10.0 - 0.1 * i) for i in range(64)]
    neighbours = [("v", 0.995), ("t00", 0.65), *((f"v{i:02d}", 0.6) for i in range(62))]
    _narrowed(es, texts, neighbours, "t00")
    _narrowed(es, [*texts, ("v", 3.6)], neighbours, "v")
    request = SearchRequest(kb_ids=["kb1"], text=TextQuery(["beta"], {"name_ltks": 1.0}),
                            vector=VectorQuery("q_3_vec", [1.0, 0.0, 0.0]), vector_weight=0.5, candidates=200, limit=1,
                            fields=["id"], count_total=False)
    result = store.search("t1", request)
    assert [(h.id, round(h.score, 3)) for h in result.hits] == [("v", 0.675)]
    assert [r.body[1]["size"] for r in es.requests[1:]] == [64, len(texts) - 1, 200, len(texts) - 1]


def test_a_search_of_key_fields_reads_them_with_its_hits_and_no_row(es: FakeElasticsearch,
                                                                    store: ElasticStore) -> None:
    """key_fields: both halves read the fields (and kb_id) from doc values with each hit's id; round
    trip 2 asks the missed cosines only, and no row is read after."""
    _mapped_q3(es)

    def keyed(*rows: tuple[str, float, str]) -> dict[str, Any]:
        answer = hits()
        answer["hits"]["hits"] = [{"_index": INDEX, "_score": score, "fields": {"id": [i], "kb_id": ["kb1"],
                                                                              "entity_key_kwd": [key]}}
                                  for i, score, key in rows]
        return answer

    es.script("POST", "/_msearch", msearch_answer(keyed(("a", 4.0, "alpha"), ("b", 2.0, "beta")),
                                                  keyed(("c", 0.9, "gamma"))))
    es.script("POST", "/_msearch", msearch_answer(ids_only(("a", 0.6), ("b", 0.55))))
    request = SearchRequest(kb_ids=["kb1"], text=TextQuery(["alpha"], {"name_ltks": 1.0}),
                            vector=VectorQuery("q_3_vec", [1.0, 0.0, 0.0]), vector_weight=0.5, candidates=5, limit=2,
                            fields=["entity_key_kwd"], key_fields=True)
    result = store.search("t1", request)
    assert [(h.id, h.doc) for h in result.hits] == [("a", {"entity_key_kwd": "alpha", "id": "a"}),
                                                   ("c", {"entity_key_kwd": "gamma", "id": "c"})]
    assert len(es.requests) == 3  # the mapping, the halves, the missed cosines
    _, text_body, _, knn_body = es.requests[1].body
    assert text_body["docvalue_fields"] == knn_body["docvalue_fields"] == ["id", "kb_id", "entity_key_kwd"]
    assert len(es.requests[2].body) == 2 and "knn" in es.requests[2].body[1]


def test_search_many_sends_every_request_of_a_batch_together(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("POST", "/_msearch", msearch_answer(hits(("a", 2.0, {}), ("b", 1.0, {})), hits(("c", 3.0, {}))))
    es.script("POST", "/_msearch", msearch_answer(rows_answer({"id": "a", "kb_id": "kb1", "name_kwd": "A"}),
                                                  rows_answer({"id": "c", "kb_id": "kb1", "docnm_kwd": "C"})))
    first = SearchRequest(kb_ids=["kb1"], text=TextQuery(["alpha"], {"name_ltks": 1.0}), fields=["name_kwd"], limit=1)
    second = SearchRequest(kb_ids=["kb1"], text=TextQuery(["beta"], {"content_ltks": 1.0}), fields=["docnm_kwd"])
    one, two = store.search_many("t1", [first, second])
    assert [(h.id, h.doc) for h in one.hits] == [("a", {"name_kwd": "A", "id": "a"})] and one.total == 2
    assert [(h.id, h.doc) for h in two.hits] == [("c", {"docnm_kwd": "C", "id": "c"})]
    candidates, rows = es.requests
    assert len(candidates.body) == 4  # two searches (header and body each), one request
    # no missed cosines (no vector): the pages are known, and only their rows are read, in one request
    assert [body["_source"] for body in rows.body[1::2]] == [{"includes": ["id", "kb_id", "name_kwd"]},
                                                            {"includes": ["id", "kb_id", "docnm_kwd"]}]
    assert [body["query"]["bool"]["filter"][1] for body in rows.body[1::2]] == [{"ids": {"values": ["a"]}},
                                                                               {"ids": {"values": ["c"]}}]
    assert store.search_many("t1", []) == [] and len(es.requests) == 2


def test_search_many_on_a_missing_index_is_empty_and_failures_raise(es: FakeElasticsearch,
                                                                    store: ElasticStore) -> None:
    missing_index = {"error": {"root_cause": [{"type": "index_not_found_exception", "reason": "no such index"}],
                               "type": "index_not_found_exception", "reason": "no such index"}, "status": 404}
    es.script("POST", "/_msearch", (200, {"took": 1, "responses": [missing_index]}))
    request = SearchRequest(kb_ids=["kb1"], text=TextQuery(["alpha"], {"name_ltks": 1.0}))
    assert store.search("t1", request).hits == []
    failed = {"error": {"root_cause": [{"type": "query_shard_exception", "reason": "bad field"}],
                        "type": "search_phase_execution_exception", "reason": "all shards failed"}, "status": 400}
    es.script("POST", "/_msearch", (200, {"took": 1, "responses": [failed]}))
    with pytest.raises(StoreError, match="400 query_shard_exception: bad field"):
        store.search("t1", request)


def test_vectors_go_out_as_float32_with_the_fewest_digits(es: FakeElasticsearch, store: ElasticStore) -> None:
    """A float32 written with a float64's 17 digits doubles the JSON the node parses, keeps in
    _source and sends back; the fewest digits read back as the same float32."""
    vector = np.array([0.1, 1 / 3, -2.5e-8], dtype=np.float32)
    store.upsert("t1", "kb1", [{"id": "a", "q_3_vec": vector}], refresh=False)
    sent = es.sent("PUT", "/_bulk")[0]
    assert sent.body[1]["q_3_vec"] == [0.1, 0.33333334, -2.5e-08]
    assert np.array_equal(np.array(sent.body[1]["q_3_vec"], dtype=np.float32), vector)


def test_reads_refresh_only_after_this_stores_own_writes(es: FakeElasticsearch, store: ElasticStore) -> None:
    """A search sees refreshed rows only: a read after an unrefreshed write of this store refreshes
    the index first, once; reads with no write before them send no refresh."""
    es.script("POST", f"/{INDEX}/_count", (200, {"count": 0, "_shards": {"total": 1}}))
    store.count("t1", ["kb1"])
    assert not es.sent(path=f"/{INDEX}/_refresh")
    store.upsert("t1", "kb1", [{"id": "a"}], refresh=False)
    for _ in range(2):
        es.script("POST", f"/{INDEX}/_count", (200, {"count": 1, "_shards": {"total": 1}}))
        assert store.count("t1", ["kb1"]) == 1
    assert len(es.sent(path=f"/{INDEX}/_refresh")) == 1


def test_text_only_search_names_fields_and_threshold(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("POST", "/_msearch", msearch_answer(hits(("a", 3.0, {}), ("b", 0.3, {}))))
    es.script("POST", "/_msearch", msearch_answer(rows_answer({"id": "a", "kb_id": "kb1", "docnm_kwd": "A"})))
    request = SearchRequest(kb_ids=["kb1"], text=TextQuery(["alpha"], {"content_ltks": 1.0}),
                            threshold=0.2, fields=["docnm_kwd"], candidates=50)
    result = store.search("t1", request)
    body = es.requests[0].body[1]
    # ids and scores only (no stored field read: the id from doc values); the page's rows come next
    assert {k: body[k] for k in IDS_ONLY} == IDS_ONLY
    assert body["query"]["bool"]["filter"] == [{"bool": {"filter": [KB_FILTER]}}]  # one token: no token filter
    # the page's rows by id, _source filtered to the named fields, plus id and kb_id (b is under the threshold)
    assert es.requests[1].body[1] == {"query": {"bool": {"filter": [KB_FILTER, {"ids": {"values": ["a"]}}]}},
                                      "size": 1, "_source": {"includes": ["id", "kb_id", "docnm_kwd"]},
                                      "track_total_hits": False}
    assert [(h.id, h.score, h.doc) for h in result.hits] == [("a", 1.0, {"docnm_kwd": "A", "id": "a"})]
    assert result.total == 1  # b scored 0.1 < threshold


def test_vector_search_skips_an_unmapped_vector_field(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("GET", f"/{INDEX}/_mapping/field/q_8_vec", (200, {INDEX: {"mappings": {}}}))
    result = store.search("t1", SearchRequest(kb_ids=["kb1"], vector=VectorQuery("q_8_vec", [0.1] * 8)))
    assert result.hits == [] and len(es.requests) == 1


def test_listing_sorts_on_fields_then_id(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("POST", f"/{INDEX}/_search", (200, hits(("a", None, {"id": "a", "position_int": 0}), total=7)))
    result = store.search("t1", SearchRequest(kb_ids=["kb1"], order_by=[("position_int", "asc")],
                                              offset=20, limit=10))
    # Sort search results page; Paginate search results: from/size within index.max_result_window
    assert es.requests[0].body == {"query": {"bool": {"filter": [KB_FILTER]}},
                                   "sort": [{"position_int": {"order": "asc"}}, {"id": {"order": "asc"}}],
                                   "from": 20, "size": 10, "_source": True, "track_total_hits": True}
    assert result.total == 7 and result.hits[0].doc == {"id": "a", "position_int": 0}


def test_a_listing_of_key_fields_reads_their_doc_values_and_no_row(es: FakeElasticsearch, store: ElasticStore) -> None:
    """key_fields on a listing: no _source and no stored field, the fields from their doc values;
    the rows as a source would give them (one value each; a field without a value left out)."""
    answer = hits()
    answer["hits"]["hits"] = [{"_index": INDEX, "fields": {"id": ["m1"], "entity_key_kwd": ["alpha"],
                                                          "weight_flt": [2.0]}, "sort": ["m1"]},
                              {"_index": INDEX, "fields": {"id": ["m2"], "entity_key_kwd": ["beta"]}, "sort": ["m2"]}]
    es.script("POST", f"/{INDEX}/_search", (200, answer))
    result = store.search("t1", SearchRequest(kb_ids=["kb1"], fields=["entity_key_kwd", "weight_flt"], limit=50,
                                              count_total=False, key_fields=True))
    body = es.requests[0].body
    assert body["_source"] is False and body["stored_fields"] == "_none_"
    assert body["docvalue_fields"] == ["id", "entity_key_kwd", "weight_flt"]
    assert [(h.id, h.doc) for h in result.hits] == [("m1", {"entity_key_kwd": "alpha", "weight_flt": 2.0, "id": "m1"}),
                                                   ("m2", {"entity_key_kwd": "beta", "id": "m2"})]


def test_listing_past_the_window_walks_a_point_in_time(es: FakeElasticsearch, store: ElasticStore) -> None:
    """Paginate search results: from + size may not pass index.max_result_window; deeper pages
    are reached with search_after in a point in time, the rows before the offset read as sort values."""
    es.script("POST", f"/{INDEX}/_pit", (200, {"id": "P1"}))
    skipped = hits(*[(f"r{i:05d}", None, {}) for i in range(10_000)], total=10_004)
    for i, hit in enumerate(skipped["hits"]["hits"]):
        hit["sort"] = [i, f"r{i:05d}"]
    es.script("POST", "/_search", (200, {**skipped, "pit_id": "P2"}))
    page = hits(("r10000", None, {"id": "r10000", "position_int": 10_000}))
    page["hits"]["hits"][0]["sort"] = [10_000, "r10000"]
    es.script("POST", "/_search", (200, page))
    result = store.search("t1", SearchRequest(kb_ids=["kb1"], order_by=[("position_int", "asc")],
                                              offset=10_000, limit=5))
    pit, skip, take, close = es.requests
    sort = [{"position_int": {"order": "asc"}}, {"id": {"order": "asc"}}]
    assert skip.body == {"pit": {"id": "P1", "keep_alive": "2m"}, "query": {"bool": {"filter": [KB_FILTER]}},
                         "sort": sort, "size": 10_000, "_source": False, "track_total_hits": True}
    assert take.body == {"pit": {"id": "P2", "keep_alive": "2m"}, "query": {"bool": {"filter": [KB_FILTER]}},
                         "sort": sort, "size": 5, "_source": True, "track_total_hits": False,
                         "search_after": [9_999, "r09999"]}
    assert (close.method, close.path, close.body) == ("DELETE", "/_pit", {"id": "P2"})
    assert [h.id for h in result.hits] == ["r10000"] and result.total == 10_004


def test_search_on_a_missing_index_is_empty(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("POST", f"/{INDEX}/_search", INDEX_MISSING)
    assert store.search("t1", SearchRequest(kb_ids=["kb1"])).hits == []


def test_scan_pages_by_search_after_on_id(es: FakeElasticsearch, store: ElasticStore) -> None:
    page = hits(("a", None, {"id": "a", "kb_id": "kb1", "q_3_vec": [1, 0, 0]}), ("b", None, {"id": "b", "kb_id": "kb1"}))
    for h in page["hits"]["hits"]:
        h["sort"] = [h["_id"]]  # search_after takes the last hit's sort values
    es.script("POST", f"/{INDEX}/_search", (200, page))
    es.script("POST", f"/{INDEX}/_search", (200, hits(("c", None, {"id": "c", "kb_id": "kb1"}))))
    docs = list(store.scan("t1", ["kb1"], [eq("doc_id", "d1")], batch_size=2))
    assert docs == [{"id": "a", "kb_id": "kb1"}, {"id": "b", "kb_id": "kb1"}, {"id": "c", "kb_id": "kb1"}]
    page1, page2 = es.requests  # no refresh (this store wrote nothing), no point in time to open and close
    query = {"bool": {"filter": [KB_FILTER, {"term": {"doc_id": "d1"}}]}}
    # Paginate search results: search_after on a unique sort field (id)
    sort = [{"id": {"order": "asc"}}]
    # every field: vectors left out on the node (the next page is filtered while this one is read)
    source = {"excludes": ["q_*_vec"]}
    assert page1.body == {"query": query, "sort": sort, "size": 2, "_source": source, "track_total_hits": False}
    assert page2.body == {"query": query, "sort": sort, "size": 2, "_source": source, "track_total_hits": False,
                          "search_after": ["b"]}


LOST_SHARD = {"shard": 1, "index": INDEX, "node": None,
              "reason": {"type": "no_shard_available_action_exception", "reason": None}}


def lost(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer of a search one of whose shard copies was on a node that just died."""
    return {**answer, "_shards": {"total": 2, "successful": 1, "skipped": 0, "failed": 1, "failures": [LOST_SHARD]}}


def test_a_scan_page_that_lost_shards_to_a_node_is_asked_again(es: FakeElasticsearch,
                                                               store: ElasticStore) -> None:
    page = hits(("a", None, {"id": "a", "kb_id": "kb1"}), ("b", None, {"id": "b", "kb_id": "kb1"}))
    for h in page["hits"]["hits"]:
        h["sort"] = [h["_id"]]
    es.script("POST", f"/{INDEX}/_search", (200, page))
    es.script("POST", f"/{INDEX}/_search", (200, lost(hits())))  # the node holding shard 1 died
    es.script("POST", f"/{INDEX}/_search", (200, hits(("c", None, {"id": "c", "kb_id": "kb1"}))))
    assert [d["id"] for d in store.scan("t1", ["kb1"], batch_size=2)] == ["a", "b", "c"]
    searches = es.sent("POST", f"/{INDEX}/_search")
    # the page is asked again after the same last id once the replicas are promoted: nothing skipped
    assert [s.body.get("search_after") for s in searches] == [None, ["b"], ["b"]]


def test_a_search_that_lost_shards_to_a_node_is_asked_again(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("POST", f"/{INDEX}/_count", (200, lost({"count": 1})))
    es.script("POST", f"/{INDEX}/_count", (429, {"error": {"type": "circuit_breaking_exception",
                                                           "reason": "[parent] Data too large"}, "status": 429}))
    es.script("POST", f"/{INDEX}/_count", (200, {"count": 7, "_shards": {"total": 2, "successful": 2, "failed": 0}}))
    assert store.count("t1", ["kb1"]) == 7
    # the client sends a 429 again at once (max_retries): kbgraph waits, then asks again
    assert len(es.sent("POST", f"/{INDEX}/_count")) >= 3


def test_count_and_terms_aggregation(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("POST", f"/{INDEX}/_count", (200, {"count": 12, "_shards": {"total": 1}}))
    es.script("POST", f"/{INDEX}/_search", (200, {**hits(), "aggregations": {"values": {
        "doc_count_error_upper_bound": 0, "sum_other_doc_count": 0,
        "buckets": [{"key": "entity", "doc_count": 5}, {"key": "relation", "doc_count": 2}]}}}))
    assert store.count("t1", ["kb1"], [exists("knowledge_graph_kwd")]) == 12
    assert store.aggregate("t1", ["kb1"], "knowledge_graph_kwd", size=10) == [("entity", 5), ("relation", 2)]
    count, agg = es.requests
    assert count.body == {"query": {"bool": {"filter": [KB_FILTER, {"exists": {"field": "knowledge_graph_kwd"}}]}}}
    # Terms aggregation page: size, order by _count desc then _key asc
    assert agg.body == {"size": 0, "query": {"bool": {"filter": [KB_FILTER]}}, "track_total_hits": False,
                        "aggs": {"values": {"terms": {"field": "knowledge_graph_kwd", "size": 10,
                                                              "order": [{"_count": "desc"}, {"_key": "asc"}]}}}}


def test_incomplete_searches_raise(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("POST", f"/{INDEX}/_search", (200, {**hits(("a", None, {"id": "a"})), "timed_out": True}))
    with pytest.raises(StoreError, match="timed out"):
        store.search("t1", SearchRequest(kb_ids=["kb1"]))
    failed = hits(("a", None, {"id": "a"}))
    failed["_shards"] = {"total": 2, "successful": 1, "skipped": 0, "failed": 1, "failures": [
        {"shard": 1, "index": INDEX, "reason": {"type": "query_shard_exception", "reason": "bad field"}}]}
    es.script("POST", f"/{INDEX}/_search", (200, failed))
    with pytest.raises(StoreError, match="1 of 2 shards: query_shard_exception: bad field"):
        store.search("t1", SearchRequest(kb_ids=["kb1"]))


def test_aggregation_size_stays_under_max_buckets(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("POST", f"/{INDEX}/_search", (200, {**hits(), "aggregations": {"values": {"buckets": []}}}))
    store.aggregate("t1", ["kb1"], "entity_kwd", size=1_000_000)
    assert es.requests[0].body["aggs"]["values"]["terms"]["size"] == 10_000


def test_empty_knowledge_base_scope_is_refused(store: ElasticStore) -> None:
    with pytest.raises(ValueError):
        store.count("t1", [])
    with pytest.raises(ValueError):
        store.search("t1", SearchRequest(kb_ids="kb1"))  # a string is not a list of knowledge bases


def test_timed_out_requests_are_not_retried() -> None:
    store = ElasticStore.from_settings(Settings(store="elasticsearch", es_url="http://127.0.0.1:9"))
    assert store._client.transport.retry_on_timeout is False
    store.close()


def test_the_request_timeout_setting_is_the_clients() -> None:
    store = ElasticStore.from_settings(Settings(store="elasticsearch", es_url="http://127.0.0.1:9",
                                                es_request_timeout=7))
    assert store._client._request_timeout == 7
    store.close()


# --- connection errors -----------------------------------------------------------------------

def test_connection_refused_names_the_url() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://elastic:secret@127.0.0.1:{port}"
    s = ElasticStore.from_settings(Settings(store="elasticsearch", es_url=url, es_request_timeout=2))
    with pytest.raises(StoreUnavailable) as err:
        s.count("t1", ["kb1"])
    assert f"127.0.0.1:{port}" in str(err.value) and "secret" not in str(err.value)
    assert "KBGRAPH_ES_URL" in str(err.value)


def test_auth_failure_is_unavailable(es: FakeElasticsearch, store: ElasticStore) -> None:
    es.script("POST", f"/{INDEX}/_count", (401, {"error": {"type": "security_exception",
                                                           "reason": "unable to authenticate user"}, "status": 401}))
    with pytest.raises(StoreUnavailable, match="KBGRAPH_ES_PASSWORD"):
        store.count("t1", ["kb1"])


def test_from_settings_requires_a_url() -> None:
    with pytest.raises(StoreError, match="KBGRAPH_ES_URL"):
        ElasticStore.from_settings(Settings(store="elasticsearch"))


def _worn_stats(merging: int, retaining: int = 136_001, committed: int = 136_000, dead: int = 40_000,
                segments: int = 12) -> dict[str, Any]:
    """An index worn by ``dead`` dead copies, its one shard written up to sequence number 136,000, its
    lease retaining from ``retaining`` (past the last: it holds nothing) and committed up to ``committed``."""
    primaries = {"docs": {"count": 96_000, "deleted": dead}, "store": {"size_in_bytes": 150 << 20},
                 "segments": {"count": segments}, "merges": {"current": merging}}
    shard = {"routing": {"primary": True}, "seq_no": {"max_seq_no": 136_000},
             "commit": {"user_data": {"local_checkpoint": str(committed), "max_seq_no": str(committed)}},
             "retention_leases": {"leases": [{"id": "peer_recovery/n1", "retaining_seq_no": retaining}]}}
    replica = {"routing": {"primary": False}, "seq_no": {"max_seq_no": 136_000},
               "retention_leases": {"leases": [{"id": "peer_recovery/n2", "retaining_seq_no": 0}]}}
    return {"_all": {"primaries": primaries},
            "indices": {"kbgraph_t1.1": {"primaries": primaries, "shards": {"0": [shard, replica]}}}}


@pytest.mark.parametrize(("retaining", "committed", "verdict", "flushed"), [
    (0, 136_000, "held", False),  # right after the writes: the lease holds every operation
    (100_000, 136_000, "held", False),  # 36k operations held, of 40k dead copies
    (130_000, 136_000, "asked", False),  # 6k held: a merge drops most of them
    (136_001, 136_000, "asked", False),
    (136_001, 90_000, "held", True),  # the lease has let go, the last commit holds them: committed now
])
def test_a_worn_index_is_merged_once_its_leases_and_commit_let_go(es: FakeElasticsearch, store: ElasticStore,
                                                                  retaining: int, committed: int, verdict: str,
                                                                  flushed: bool) -> None:
    from kbgraph.store.elastic.compaction import compact

    es.script("GET", f"/{INDEX}/_stats/docs,store,segments,merge", (200, _worn_stats(0, retaining, committed)))
    es.script("GET", "/_tasks", (200, _force_merges()))
    es.script("POST", f"/{INDEX}/_forcemerge", (200, {"task": "n1:9"}))
    es.script("POST", f"/{INDEX}/_flush", (200, {"_shards": {"total": 1, "successful": 1, "failed": 0}}))
    assert compact(store._cluster, INDEX) == verdict
    assert [r.query.get("level") for r in es.sent("GET", f"/{INDEX}/_stats/docs,store,segments,merge")] == ["shards"]
    assert len(es.sent("POST", f"/{INDEX}/_forcemerge")) == (verdict == "asked")
    assert len(es.sent("POST", f"/{INDEX}/_flush")) == flushed


def _force_merges(*descriptions: str) -> dict[str, Any]:
    tasks = {f"n1:{i}": {"action": "indices:admin/forcemerge", "description": d} for i, d in enumerate(descriptions)}
    return {"nodes": {"n1": {"tasks": tasks}}}


@pytest.mark.parametrize(("merging", "running", "asked"), [
    (3, [], True),  # the node's own merges (a first indexing's, still going) do not hold it back
    (0, ["Force-merge indices [kbgraph_t1.1], maxSegments[1]"], False),  # one force merge at a time
    (1, ["Force-merge indices [kbgraph_t1.current], maxSegments[1]"], False),
    (0, ["Force-merge indices [kbgraph_other.1], maxSegments[1]"], True),  # another index's
])
def test_a_worn_index_is_merged_unless_a_force_merge_of_it_runs(es: FakeElasticsearch, store: ElasticStore,
                                                                merging: int, running: list[str],
                                                                asked: bool) -> None:
    from kbgraph.store.elastic.compaction import compact

    es.script("GET", f"/{INDEX}/_stats/docs,store,segments,merge", (200, _worn_stats(merging)))
    es.script("GET", "/_tasks", (200, _force_merges(*running)))
    es.script("POST", f"/{INDEX}/_forcemerge", (200, {"task": "n1:9"}))
    assert compact(store._cluster, INDEX) == ("asked" if asked else "left")
    merges = es.sent("POST", f"/{INDEX}/_forcemerge")
    assert len(merges) == asked and all(m.query["max_num_segments"] == "1" for m in merges)


@pytest.mark.parametrize(("dead", "segments", "due", "verdict"), [
    (12_000, 14, False, "left"),  # 11% dead: not worn
    (12_000, 14, True, "asked"),  # found worn at the refresh's end: still due while unmerged
    (0, 14, True, "asked"),  # no dead copy left, but 14 graphs for every kNN search
    (0, 1, True, "left"),  # one segment, no dead copy: nothing left to do
])
def test_a_merge_found_due_is_asked_while_the_index_is_unmerged(es: FakeElasticsearch, store: ElasticStore,
                                                                dead: int, segments: int, due: bool,
                                                                verdict: str) -> None:
    from kbgraph.store.elastic.compaction import compact

    es.script("GET", f"/{INDEX}/_stats/docs,store,segments,merge",
              (200, _worn_stats(0, dead=dead, segments=segments)))
    es.script("GET", "/_tasks", (200, _force_merges()))
    es.script("POST", f"/{INDEX}/_forcemerge", (200, {"task": "n1:9"}))
    assert compact(store._cluster, INDEX, due=due) == verdict
    assert len(es.sent("POST", f"/{INDEX}/_forcemerge")) == (verdict == "asked")
