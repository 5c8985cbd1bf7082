"""Tenants on the 3-node cluster: moved to a new index (more shards, more replicas) while they are
written and read, replicas changed, refused where the cluster cannot hold the copies asked for, and
scans and listings that go on when the node holding their point in time dies."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from support.es_cluster import EsCluster

from conftest import ES_TEST_REFRESH_INTERVAL, cluster_overrides
from kbgraph.config import load_settings
from kbgraph.store import open_store
from kbgraph.store.base import SearchRequest, StoreError, TextQuery, VectorQuery, eq
from kbgraph.store.elastic import ElasticStore
from kbgraph.store.elastic.admin import move_tenant, set_replicas

pytestmark = pytest.mark.cluster

KB = "kb"


def _store(cluster: EsCluster, **extra: object) -> ElasticStore:
    store = open_store(load_settings(**cluster_overrides(cluster, **extra)))
    assert isinstance(store, ElasticStore)
    return store


def _row(i: int, n: int = 0) -> dict[str, Any]:
    return {"id": f"r{i:05d}", "n_int": n, "content_ltks": f"word{i % 50} common", "q_4_vec": [1.0, i % 7, 0.5, 1.0]}


def _settings(cluster: EsCluster, index: str) -> dict[str, Any]:
    answer = requests.get(f"{cluster.urls[0]}/{index}/_settings", params={"flat_settings": "true"}, timeout=30)
    return dict(next(iter(answer.json().values()))["settings"])


def _make_legacy_index(store: ElasticStore, tenant: str, rows: int) -> str:
    """The index an older kbgraph made for the tenant: named without a generation, no alias."""
    name = store.tenants.names(tenant).legacy
    body = store._definition()
    store._client.indices.create(index=name, settings=body["settings"], mappings=body["mappings"],
                                 wait_for_active_shards="all")
    actions = [{"index": {"_index": name, "_id": row["id"]}} for row in (_row(i) for i in range(rows))]
    lines: list[dict[str, Any]] = []
    for i, action in enumerate(actions):
        lines += [action, {**_row(i), "kb_id": KB}]
    store._client.bulk(operations=lines, refresh=True)
    return name


class Traffic:
    """A writer (upserts, partial updates, deletes) and a reader (counts, text and vector searches)
    on their own stores, as other processes would be, until stopped. ``expected`` is what every
    acknowledged write leaves."""

    def __init__(self, cluster: EsCluster, prefix: str, tenant: str, rows: int) -> None:
        settings = load_settings(store="elasticsearch", es_url=cluster.url, es_index_prefix=prefix,
                                 es_refresh_interval=ES_TEST_REFRESH_INTERVAL)
        self.writer, self.reader = open_store(settings), open_store(settings)
        self.tenant = tenant
        self.expected = {f"r{i:05d}": 0 for i in range(rows)}
        self.writes: list[tuple[float, float]] = []  # (start, end) of every acknowledged write
        self.reads = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._write), threading.Thread(target=self._read)]

    def __enter__(self) -> "Traffic":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.writer.close()
        self.reader.close()

    def _write(self) -> None:
        rnd, serial = random.Random(7), 0
        while not self._stop.is_set():
            i = rnd.randrange(len(self.expected) + 500)
            key, serial = f"r{i:05d}", serial + 1
            start = time.monotonic()
            try:
                if key in self.expected and rnd.random() < 0.2:
                    self.writer.delete(self.tenant, [KB], [eq("id", key)], refresh=False)
                    del self.expected[key]
                elif key in self.expected and rnd.random() < 0.3:
                    self.writer.patch(self.tenant, KB, {key: {"n_int": serial}}, refresh=False)
                    self.expected[key] = serial
                else:
                    self.writer.upsert(self.tenant, KB, [_row(i, serial)], refresh=False)
                    self.expected[key] = serial
            except Exception as exc:  # noqa: BLE001  (any failed write fails the test)
                self.errors.append(f"write {key}: {exc}")
                return
            self.writes.append((start, time.monotonic()))

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                assert self.reader.count(self.tenant, [KB]) > 0
                text = self.reader.search(self.tenant, SearchRequest(
                    kb_ids=[KB], text=TextQuery(["common"], {"content_ltks": 1.0}), limit=5))
                near = self.reader.search(self.tenant, SearchRequest(
                    kb_ids=[KB], vector=VectorQuery("q_4_vec", [1.0, 3.0, 0.5, 1.0]), limit=5))
                assert text.hits and near.hits
            except Exception as exc:  # noqa: BLE001  (a read that fails or finds nothing fails the test)
                self.errors.append(f"read: {type(exc).__name__}: {exc}")
                return
            self.reads += 1


def test_a_tenant_moves_to_more_shards_and_replicas_while_written_and_read(cluster: EsCluster) -> None:
    """Start from an index an older kbgraph made (adopted behind the alias on first open), move it
    to 3 shards and 1 replica while another store writes and reads: every acknowledged write is in
    the new index, nothing deleted came back, reads never failed, writes were held at the switch."""
    store = _store(cluster, es_replicas=0, es_shards=1)
    tenant, rows = "moving", 3000
    legacy = _make_legacy_index(store, tenant, rows)
    store.ensure_index(tenant)
    assert store.tenants.current(tenant) == legacy  # adopted: the alias points at it
    with Traffic(cluster, store._prefix, tenant, rows) as traffic:
        time.sleep(1)
        report = move_tenant(store, tenant, shards=3, replicas=1)
        time.sleep(1)
    assert traffic.errors == []
    held = [(s, e) for s, e in traffic.writes if s < report.blocked_until and e > report.blocked_from]
    assert held, "no write arrived while the source was blocked"
    assert traffic.reads > 10 and report.deleted > 0  # rows deleted during the copy were found
    names = store.tenants.names(tenant)
    assert (report.source, report.target) == (legacy, names.generation(1))
    assert store.tenants.indices(tenant) == {names.generation(1): [names.alias]}  # the old index is gone
    flat = _settings(cluster, names.generation(1))
    assert (flat["index.number_of_shards"], flat["index.number_of_replicas"]) == ("3", "1")
    cluster.wait_for("green")
    store.refresh(tenant)
    stored = {doc["id"]: doc["n_int"] for doc in store.scan(tenant, [KB], fields=["n_int"])}
    assert stored == traffic.expected
    store.drop_index(tenant)
    store.close()


def test_the_move_and_replicas_commands(cluster: EsCluster, tmp_path: Path) -> None:
    store = _store(cluster)
    tenant = "default"
    store.upsert(tenant, KB, [_row(i) for i in range(500)])
    env = {**os.environ, "KBGRAPH_STORE": "elasticsearch", "KBGRAPH_ES_URL": cluster.url,
           "KBGRAPH_ES_INDEX_PREFIX": store._prefix, "KBGRAPH_DATA_DIR": str(tmp_path / "data")}

    def kbgraph(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kbgraph.cli", "store", *args], env=env, capture_output=True,
                              text=True, timeout=300)

    names = store.tenants.names(tenant)
    unknown = kbgraph("move-tenant", "--tenant", "nobody")
    assert unknown.returncode == 1 and "'nobody' has no index" in unknown.stderr
    assert not store.index_exists("nobody")
    # without --tenant it moves the tenant the CLI acts for, never `default` behind its back
    acting = subprocess.run([sys.executable, "-m", "kbgraph.cli", "--tenant", "somebody", "store", "move-tenant"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert acting.returncode == 1 and "'somebody' has no index" in acting.stderr
    moved = kbgraph("move-tenant", "--shards", "3", "--replicas", "2")
    assert moved.returncode == 0, moved.stderr
    assert "moved: 500 rows" in moved.stdout
    flat = _settings(cluster, names.generation(2))
    assert (flat["index.number_of_shards"], flat["index.number_of_replicas"]) == ("3", "2")
    status = kbgraph("status")
    assert status.returncode == 0 and names.generation(2) in status.stdout and names.alias in status.stdout
    assert kbgraph("replicas", "1").returncode == 0
    assert _settings(cluster, names.generation(2))["index.number_of_replicas"] == "1"
    # a move killed half way leaves its target and the block: the next one says so, --clean cleans
    store._client.indices.create(index=names.generation(3))
    store._client.indices.add_block(index=names.generation(2), block="write")
    refused = kbgraph("move-tenant")
    assert refused.returncode == 1 and "--clean" in refused.stderr and names.generation(3) in refused.stderr
    cleaned = kbgraph("move-tenant", "--clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert store.tenants.indices(tenant) == {names.generation(4): [names.alias]}
    assert store.count(tenant, [KB]) == 500
    store.upsert(tenant, KB, [_row(9999)])  # the block is gone
    store.drop_index(tenant)
    store.close()


def test_more_replicas_than_data_nodes_are_refused(cluster: EsCluster) -> None:
    store = _store(cluster, es_replicas=3)
    with pytest.raises(StoreError, match="3 data node.*KBGRAPH_ES_REPLICAS to 2"):
        store.ensure_index("crowded")
    assert not store.index_exists("crowded")
    with pytest.raises(StoreError, match="3 replica.*4 data nodes.*has 3"):
        set_replicas(store, 3)
    store.close()


@pytest.fixture
def scanned(drillable: EsCluster) -> Iterator[tuple[ElasticStore, str]]:
    store = _store(drillable, es_shards=6)  # six shards on three nodes: a point in time uses every node
    store.upsert("scanned", KB, [_row(i) for i in range(3000)])
    yield store, "scanned"
    store.drop_index("scanned")
    store.close()


def _busiest_node(cluster: EsCluster) -> int:
    """The node holding the most open search contexts (a point in time's)."""
    nodes = requests.get(f"{cluster.urls[0]}/_nodes/stats/indices/search", timeout=30).json()["nodes"]
    busiest = max(nodes.values(), key=lambda n: n["indices"]["search"]["open_contexts"])
    return int(busiest["name"].rsplit("-", 1)[1])


def test_a_scan_goes_on_when_the_node_holding_its_point_in_time_dies(
        drillable: EsCluster, scanned: tuple[ElasticStore, str]) -> None:
    store, tenant = scanned
    rows = store.scan(tenant, [KB], fields=["n_int"], batch_size=500)
    first = [next(rows) for _ in range(500)]  # one page read: the point in time is open
    drillable.kill(_busiest_node(drillable))
    ids = [doc["id"] for doc in first + list(rows)]
    assert ids == [f"r{i:05d}" for i in range(3000)]  # every row once, in order
    deep = store.search(tenant, SearchRequest(kb_ids=[KB], offset=2990, limit=20, fields=[]))
    assert [h.id for h in deep.hits] == [f"r{i:05d}" for i in range(2990, 3000)] and deep.total == 3000
