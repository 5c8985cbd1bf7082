"""A search that meets a shard closed under it is asked again, never failed or passed off as empty.

A tenant move (kbgraph/store/elastic/admin.py) deletes the old index right after switching the
alias; a search that had resolved the alias to the old index can then be answered, by the whole
request or by one shard, "illegal_state_exception: already closed, can't increment ref count" (seen
once in CI, during the cluster drill of a move under load). Asked again, the alias resolves to the
new index. The race itself is rare, so a relay in front of the real node gives the node's own
answer its exact shape once, and the store must still answer with the node's rows.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conftest import ES_TEST_REFRESH_INTERVAL, require_service
from kbgraph.config import load_settings
from kbgraph.store.base import SearchRequest, StoreError, TextQuery
from kbgraph.store.elastic import ElasticStore
from support.es_tidy import es_prefix
from support.relay_proxy import RelayProxy, Rewrite

CLOSED = {"type": "illegal_state_exception", "reason": "already closed, can't increment ref count"}
# rewrites one answer of the node: (status, parsed body) -> (status, body to send)
JsonRewrite = Callable[[int, Any], tuple[int, Any]]


def _searches(method: str, path: str) -> bool:
    return any(part in path for part in ("_search", "_msearch", "_count"))


def as_json(rewrite: JsonRewrite) -> Rewrite:
    def on_bytes(status: int, data: bytes) -> tuple[int, bytes]:
        status, changed = rewrite(status, json.loads(data))
        return status, json.dumps(changed).encode()
    return on_bytes


def _whole_request_failed(status: int, body: Any) -> tuple[int, Any]:
    return 500, {"error": {**CLOSED, "root_cause": [CLOSED]}, "status": 500}


def _one_search_failed(status: int, body: Any) -> tuple[int, Any]:
    """In a multi-search, its first search failed whole."""
    if "responses" not in body:
        return _whole_request_failed(status, body)
    first = {"error": {**CLOSED, "root_cause": [CLOSED]}, "status": 500}
    return status, {**body, "responses": [first, *body["responses"][1:]]}


def _one_shard_failed(status: int, body: Any) -> tuple[int, Any]:
    """The answer of one shard lost: 200, its hits partial (here: none), the shard's failure named."""
    failure = {"shard": 0, "index": "gone", "reason": CLOSED}
    shards = {"total": 2, "successful": 1, "skipped": 0, "failed": 1, "failures": [failure]}

    def partial(answer: dict[str, Any]) -> dict[str, Any]:
        hits = answer.get("hits")
        return {**answer, "_shards": shards, **({"hits": {**hits, "hits": []}} if hits else {})}

    if "responses" in body:
        return status, {**body, "responses": [partial(item) for item in body["responses"]]}
    return status, partial(body)


@pytest.fixture
def proxied() -> Iterator[tuple[RelayProxy, ElasticStore, str]]:
    url = os.environ.get("KBGRAPH_ES_URL")
    if not url:
        require_service("Elasticsearch", "KBGRAPH_ES_URL not set (bash tests/es_node/es-node.sh start)")
    with RelayProxy(url.split(",")[0], _searches) as proxy:
        settings = load_settings(store="elasticsearch", es_url=proxy.url, es_refresh_interval=ES_TEST_REFRESH_INTERVAL,
                                 es_index_prefix=es_prefix(url))
        store = ElasticStore.from_settings(settings)
        tenant = f"closed-{uuid.uuid4().hex[:8]}"
        rows = [{"id": f"row{i}", "content_ltks": f"harbour lantern {i}", "q_4_vec": [1.0, float(i), 0.5, 0.0]}
                for i in range(20)]
        store.upsert(tenant, "kb", rows, refresh=True)
        try:
            yield proxy, store, tenant
        finally:
            proxy.rewrites.clear()
            store.drop_index(tenant)
            store.close()


@pytest.mark.parametrize("fault", [_whole_request_failed, _one_search_failed, _one_shard_failed],
                         ids=["whole-request", "one-search", "one-shard"])
def test_a_search_that_met_a_closed_shard_is_asked_again(proxied: tuple[RelayProxy, ElasticStore, str],
                                                         fault: JsonRewrite) -> None:
    proxy, store, tenant = proxied
    request = SearchRequest(kb_ids=["kb"], text=TextQuery(["lantern"], {"content_ltks": 1.0}), limit=5)
    expected = [hit.id for hit in store.search(tenant, request).hits]
    assert len(expected) == 5
    proxy.rewrites = [as_json(fault)]
    assert [hit.id for hit in store.search(tenant, request).hits] == expected
    assert proxy.rewritten == 1 and not proxy.rewrites  # the fault was met, then the node answered
    proxy.rewrites = [as_json(fault)]
    assert store.count(tenant, ["kb"]) == 20


def test_another_illegal_state_fails_at_once(proxied: tuple[RelayProxy, ElasticStore, str]) -> None:
    """Only a shard closed under the request is waited out: any other failure is said at once."""
    proxy, store, tenant = proxied
    other = {"type": "illegal_state_exception", "reason": "field [content_ltks] has no doc values"}
    proxy.rewrites = [as_json(lambda status, body: (500, {"error": {**other, "root_cause": [other]}, "status": 500}))] * 6
    with pytest.raises(StoreError, match="has no doc values"):
        store.count(tenant, ["kb"])
    assert proxy.rewritten == 1
