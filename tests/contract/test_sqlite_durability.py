"""The SQLite store survives ``kill -9`` mid-write: the file stays sound and every batch is whole."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from kbgraph.store.base import SearchRequest, TextQuery, eq
from kbgraph.store.sqlite import SQLiteStore

BATCH = 300
SHARED = 20

# Each batch writes BATCH new docs and rewrites the SHARED docs, all tagged with the batch number.
WRITER = f"""
import sys
from kbgraph.store.sqlite import SQLiteStore
store = SQLiteStore(sys.argv[1])
first = int(sys.argv[2])
for batch in range(first, first + 100000):
    docs = [{{"id": f"b{{batch}}-{{i}}", "batch_kwd": str(batch), "content_ltks": f"batch{{batch}} word{{i}} " * 20,
              "q_8_vec": [float(batch), float(i), 1, 2, 3, 4, 5, 6]}} for i in range({BATCH})]
    docs += [{{"id": f"shared-{{i}}", "batch_kwd": str(batch), "content_ltks": f"shared batch{{batch}}",
               "q_8_vec": [1.0] * 8}} for i in range({SHARED})]
    store.upsert("tenant", "kb", docs)
    print(batch, flush=True)
"""


def test_kill_during_writes_leaves_whole_batches(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    next_batch = 0
    for round_ in range(5):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(next_batch)],
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        for _ in range(3 + round_):  # let it commit a few batches, then kill it at some point mid-write
            line = child.stdout.readline()
            assert line, "writer died early"
        time.sleep(0.004 * round_)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        next_batch += 1000

    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE sql LIKE '%USING fts5(%'")]
    assert tables
    for table in tables:
        conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
    conn.close()

    store = SQLiteStore(path)
    try:
        counts = Counter(dict(store.aggregate("tenant", ["kb"], "batch_kwd", size=10_000)))
        last = max(counts, key=int)
        assert counts[last] == BATCH + SHARED
        assert all(n == BATCH for batch, n in counts.items() if batch != last), counts
        assert store.count("tenant", ["kb"]) == BATCH * len(counts) + SHARED
        # the shared docs all carry the last committed batch, in the JSON, the filters and the FTS index
        shared = store.get("tenant", ["kb"], [f"shared-{i}" for i in range(SHARED)])
        assert {d["batch_kwd"] for d in shared} == {last}
        assert store.count("tenant", ["kb"], [eq("batch_kwd", last)]) == BATCH + SHARED
        hits = store.search("tenant", SearchRequest(kb_ids=["kb"], text=TextQuery(["shared"], {"content_ltks": 1}),
                                                    limit=100))
        assert hits.total == SHARED and all(h.doc["batch_kwd"] == last for h in hits.hits)
        # writing after the crash works
        store.upsert("tenant", "kb", [{"id": "after", "batch_kwd": "after"}])
        assert store.count("tenant", ["kb"], [eq("batch_kwd", "after")]) == 1
    finally:
        store.close()


def test_batch_is_one_transaction(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kbgraph.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "batch.db")
    store.ensure_index("t")
    with store.batch():
        store.upsert("t", "kb", [{"id": "a", "name_kwd": "x"}])
        assert [d["id"] for d in store.get("t", ["kb"], ["a"])] == ["a"]  # reads see the batch's writes
        store.upsert("t", "kb", [{"id": "b", "name_kwd": "y"}])
    assert store.count("t", ["kb"]) == 2
    try:
        with store.batch():
            store.delete("t", ["kb"])
            assert store.count("t", ["kb"]) == 0
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert store.count("t", ["kb"]) == 2  # all or nothing
    store.close()
