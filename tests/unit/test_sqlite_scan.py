"""The embedded store's scan past its first batch: the rest of the matching rows found once, in id
order, each page read by its own query that checks the conditions again (rows deleted or changed
meanwhile are left out), so scanning N rows costs N, not N squared."""

from __future__ import annotations

from pathlib import Path

from kbgraph.store.base import eq
from kbgraph.store.sqlite import SQLiteStore


def test_pages_after_the_first_skip_rows_deleted_or_changed_meanwhile(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "store.db")
    store.upsert("t", "kb", [{"id": f"r{n:02d}", "kind_kwd": "a" if n % 3 else "b", "n_int": n} for n in range(30)])
    seen = []
    for doc in store.scan("t", ["kb"], [eq("kind_kwd", "a")], fields=["n_int"], batch_size=4):
        seen.append(doc["id"])
        if doc["id"] == "r05":  # rows later in the scan: one deleted, one no longer matching
            store.delete("t", ["kb"], [eq("id", "r20")])
            store.upsert("t", "kb", [{"id": "r22", "kind_kwd": "b", "n_int": 22}])
    expected = [f"r{n:02d}" for n in range(30) if n % 3 and n not in (20, 22)]
    assert seen == expected
    assert [d["n_int"] for d in store.scan("t", ["kb"], batch_size=7)] == [n for n in range(30) if n != 20]
