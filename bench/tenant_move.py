"""A tenant moved to a new index while another store writes to it, and a deep listing, timed.

Loads ``--rows`` rows (a 64-number vector and a few fields each) into a tenant on the Elasticsearch
cluster at KBGRAPH_ES_URL (several nodes comma-separated; tests/es_node/es-node.sh cluster-start
makes one), starts a writer that upserts and deletes random rows without pause (``--no-writer`` for
none), moves the tenant to ``--shards`` / ``--replicas`` (kbgraph/store/elastic/admin.py), checks
that the moved tenant holds what every acknowledged write left, then times a listing page near the
end (``offset = rows - 20``: the rows before it are walked in a point in time). Prints one JSON line.

    KBGRAPH_ES_PORT=9250 bash tests/es_node/es-node.sh cluster-start 3
    KBGRAPH_ES_URL=http://127.0.0.1:9250,http://127.0.0.1:9251,http://127.0.0.1:9252 \\
        python bench/tenant_move.py --rows 100000 --shards 3 --replicas 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
import uuid

from kbgraph.config import load_settings
from kbgraph.store import open_store
from kbgraph.store.base import DocStore, SearchRequest, eq
from kbgraph.store.elastic.admin import move_tenant

TENANT, KB = "bench", "kb"


def _row(rnd: random.Random, i: int, n: int) -> dict[str, object]:
    return {"id": f"d{i:07d}", "n_int": n, "content_ltks": f"w{i % 1000} w{i % 37}",
            "q_64_vec": [rnd.random() for _ in range(64)]}


class Writer(threading.Thread):
    """Upserts (90%) and deletes (10%) of random rows, each acknowledged before the next."""

    def __init__(self, store: DocStore, rows: int) -> None:
        super().__init__()
        self.store, self.rows = store, rows
        self.expected = {f"d{i:07d}": 0 for i in range(rows)}
        self.latencies: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        rnd, serial = random.Random(1), 0
        while not self.stop.is_set():
            i, serial = rnd.randrange(self.rows), serial + 1
            key, start = f"d{i:07d}", time.monotonic()
            if rnd.random() < 0.1 and key in self.expected:
                self.store.delete(TENANT, [KB], [eq("id", key)], refresh=False)
                del self.expected[key]
            else:
                self.store.upsert(TENANT, KB, [_row(rnd, i, serial)], refresh=False)
                self.expected[key] = serial
            self.latencies.append(time.monotonic() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--no-writer", action="store_true")
    args = parser.parse_args()
    url = os.environ.get("KBGRAPH_ES_URL", "")
    if not url:
        print("tenant_move: set KBGRAPH_ES_URL (bash tests/es_node/es-node.sh cluster-start 3)", file=sys.stderr)
        return 2
    settings = load_settings(store="elasticsearch", es_url=url, es_index_prefix=f"kbgraph_bench_{uuid.uuid4().hex[:8]}_",
                             es_shards=1, es_replicas=0)
    store, other = open_store(settings), open_store(settings)
    try:
        rnd, started = random.Random(0), time.monotonic()
        for start in range(0, args.rows, 5000):
            store.upsert(TENANT, KB, [_row(rnd, i, 0) for i in range(start, min(args.rows, start + 5000))],
                         refresh=False)
        loaded = time.monotonic() - started
        writer = Writer(other, args.rows)
        if not args.no_writer:
            writer.start()
        started = time.monotonic()
        report = move_tenant(store, TENANT, shards=args.shards, replicas=args.replicas)
        moved = time.monotonic() - started
        writer.stop.set()
        if not args.no_writer:
            writer.join()
        store.refresh(TENANT)
        stored = {d["id"]: d["n_int"] for d in store.scan(TENANT, [KB], fields=["n_int"])}
        started = time.monotonic()
        page = store.search(TENANT, SearchRequest(kb_ids=[KB], offset=len(stored) - 20, limit=10, fields=[]))
        listed = time.monotonic() - started
        print(json.dumps({
            "rows": args.rows, "shards": args.shards, "replicas": args.replicas, "load_s": round(loaded, 1),
            "move_s": round(moved, 1), "rounds": report.rounds, "copied": report.copied, "deleted": report.deleted,
            "writes_blocked_s": round(report.blocked_seconds, 2), "writes": len(writer.latencies),
            "slowest_write_s": round(max(writer.latencies, default=0.0), 2),
            "moved_equals_acknowledged": stored == writer.expected,
            "listing_page_at_offset": len(stored) - 20, "listing_page_s": round(listed, 2),
            "listing_page_rows": len(page.hits)}))
        return 0
    finally:
        store.drop_index(TENANT)
        store.close()
        other.close()


if __name__ == "__main__":
    raise SystemExit(main())
