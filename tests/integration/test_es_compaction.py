"""After a graph refresh the Elasticsearch store has the node merge away the rows the refresh
replaced (kbgraph/store/elastic/compaction.py): every kNN search walks each segment's graph, dead
copies included. Asked on an index worn enough, once the shard's retention leases no longer hold
the dead copies (right after the writes they do: a merge then kept every one of them), and never
again on an index that has none left."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import pytest

from conftest import ES_TEST_REFRESH_INTERVAL, require_service
from kbgraph.config import load_settings
from kbgraph.store.elastic import ElasticStore
from kbgraph.store.elastic.compaction import LaterMerges, compact, index_wear
from support.es_tidy import es_prefix


@pytest.fixture
def store() -> Iterator[ElasticStore]:
    url = os.environ.get("KBGRAPH_ES_URL")
    if not url:
        require_service("Elasticsearch", "KBGRAPH_ES_URL not set (bash tests/es_node/es-node.sh start)")
    settings = load_settings(store="elasticsearch", es_url=url, es_refresh_interval=ES_TEST_REFRESH_INTERVAL,
                             es_index_prefix=es_prefix(url))
    opened = ElasticStore.from_settings(settings)
    yield opened
    opened.close()


def _rows(start: int, count: int, text: str) -> list[dict]:
    return [{"id": f"row{i}", "content_ltks": f"{text} {i}", "q_4_vec": [1.0, float(i % 7), 0.5, 0.0]}
            for i in range(start, start + count)]


def _written_in_segments(store: ElasticStore, tenant: str, batches: int, size: int, text: str) -> None:
    for batch in range(batches):  # a refresh after each batch: a segment each
        store.upsert(tenant, "kb", _rows(batch * size, size, text), refresh=True)


def _without_dead_copies(store: ElasticStore, index: str, timeout: float):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        wear = index_wear(store._cluster, index)
        assert wear is not None
        if wear.segments == 1 and not wear.dead and not wear.merging or time.monotonic() > deadline:
            return wear
        time.sleep(0.5)


@pytest.mark.slow
def test_a_worn_index_is_merged_once_its_leases_let_go_of_the_dead_copies(store: ElasticStore) -> None:
    """Right after the writes the shard's retention lease holds every replaced copy: a merge then is
    held back, and asked again once the node has moved the lease (every 30 s), which leaves one
    segment without a dead copy."""
    tenant = f"wear-{uuid.uuid4().hex[:8]}"
    store._merges = LaterMerges(store._cluster, delay=3.0, attempts=25)  # checked every 3 s, not 35
    try:
        _written_in_segments(store, tenant, 4, 50, "first")
        _written_in_segments(store, tenant, 4, 50, "second")  # every row replaced: half the copies dead
        index = store.index_for(tenant)
        worn = index_wear(store._cluster, index)
        assert worn is not None and worn.segments > 1 and worn.dead_share > 0.4, worn
        assert worn.held_back(), worn
        assert compact(store._cluster, index) == "held"
        store.prepare_search(tenant, ["kb"], {})
        assert store._merges.pending() == [index]
        merged = _without_dead_copies(store, index, timeout=75.0)
        assert merged.segments == 1 and merged.live == 200 and merged.dead == 0, merged
        assert compact(store._cluster, index) == "left"  # nothing left to merge away
        texts = {d["content_ltks"].split()[0] for d in store.scan(tenant, ["kb"], fields=["content_ltks"])}
        assert texts == {"second"}  # every row as last written
    finally:
        store.drop_index(tenant)


def test_an_index_with_few_dead_rows_is_left_to_the_node(store: ElasticStore) -> None:
    tenant = f"fresh-{uuid.uuid4().hex[:8]}"
    try:
        _written_in_segments(store, tenant, 4, 50, "first")
        store.upsert(tenant, "kb", _rows(0, 10, "second"), refresh=True)  # 10 of 210 copies dead
        index = store.index_for(tenant)
        before = index_wear(store._cluster, index)
        assert before is not None and before.segments > 1 and 0 < before.dead_share < 0.2, before
        assert compact(store._cluster, index) == "left"
        store.prepare_search(tenant, ["kb"], {})
        assert store._merges.pending() == []
        after = index_wear(store._cluster, index)
        assert after is not None and after.segments > 1, after
    finally:
        store.drop_index(tenant)


def test_no_index_yet_is_no_error(store: ElasticStore) -> None:
    tenant = f"none-{uuid.uuid4().hex[:8]}"
    assert compact(store._cluster, store.index_for(tenant)) == "left"
