"""The embedded store's connections are a bounded pool: a thread holds one only while it reads or
writes, so a server that starts a thread per request never opens more than the pool's size."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from kbgraph.store.base import StoreError
from kbgraph.store.sqlite import SQLiteStore


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _doc(i: int) -> dict:
    return {"id": f"d{i}", "kb_id": "kb", "content_ltks": f"word{i} shared", "important_kwd": [f"k{i % 3}"]}


def test_a_thread_per_request_reuses_a_bounded_pool(tmp_path: Path) -> None:
    before = _fds()
    store = SQLiteStore(tmp_path / "store.db", connections=3)
    try:
        store.ensure_index("t")
        store.upsert("t", "kb", [_doc(i) for i in range(20)])
        counts: list[int] = []

        def request() -> None:  # what a thread-per-request server does for each request
            counts.append(store.count("t", ["kb"]))

        def wave() -> None:
            threads = [threading.Thread(target=request) for _ in range(20)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        for _ in range(15):
            wave()
        assert counts[-300:] == [20] * 300
        assert store.open_connections <= 3
        assert _fds() <= before + 3 * 3  # per connection: the database, its WAL and shared-memory files
    finally:
        store.close()
    assert store.open_connections == 0


def test_batch_and_nested_reads_use_one_connection(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "store.db", connections=1)
    try:
        store.ensure_index("t")
        with store.batch():  # a pool of one: a second connection would wait forever
            store.upsert("t", "kb", [_doc(1)])
            assert store.count("t", ["kb"]) == 1  # reads the batch's own write
            store.upsert("t", "kb", [_doc(2)])
        assert store.count("t", ["kb"]) == 2 and store.open_connections == 1
    finally:
        store.close()


def test_a_failed_write_returns_its_connection(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "store.db", connections=1)
    try:
        store.ensure_index("t")
        with pytest.raises(StoreError):
            store.upsert("t", "kb", [{"id": "bad", "kb_id": "kb", "score_flt": float("nan")}])
        store.upsert("t", "kb", [_doc(1)])  # the one connection came back, outside any transaction
        assert store.count("t", ["kb"]) == 1
    finally:
        store.close()
    with pytest.raises(StoreError, match="closed"):
        store.count("t", ["kb"])
