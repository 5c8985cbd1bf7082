"""Timings of the embedded SQLite store.

    python bench/store_bench.py            # 10k chunks with 384-d vectors: upsert, hybrid search, scan
    python bench/store_bench.py --kg       # plus 100k entities / 300k relations and the graph lookups

Synthetic data: Zipf-distributed tokens from a 20k-word vocabulary, random unit vectors.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kbgraph.store.base import SearchRequest, TextQuery, VectorQuery, any_of, eq
from kbgraph.store.sqlite import SQLiteStore

DIM = 384
V = f"q_{DIM}_vec"
rng = np.random.default_rng(7)
VOCAB = np.array([f"w{i}" for i in range(50_000)])
# word frequencies follow Zipf's law; queries skip the 100 most frequent words (stop words)
FREQ = 1.0 / np.arange(1, len(VOCAB) + 1) ** 1.05
FREQ /= FREQ.sum()
QFREQ = FREQ.copy()
QFREQ[:100] = 0
QFREQ /= QFREQ.sum()
CDF, QCDF = np.cumsum(FREQ), np.cumsum(QFREQ)


def words(n: int, query: bool = False) -> str:
    picks = np.searchsorted(QCDF if query else CDF, rng.random(n) * (QCDF if query else CDF)[-1])
    return " ".join(VOCAB[np.minimum(picks, len(VOCAB) - 1)])


def vectors(n: int) -> np.ndarray:
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def p50(fn: Callable[[int], object], runs: int = 50) -> tuple[float, float]:
    fn(0)  # warm caches
    times = []
    for i in range(runs):
        t = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), sorted(times)[int(runs * 0.95) - 1]


def bench_chunks(store: SQLiteStore) -> None:
    n = 10_000
    vecs = vectors(n)
    docs = [{"id": f"c{i:06d}", "doc_id": f"doc{i // 20}", "docnm_kwd": f"doc{i // 20}.pdf",
             "content_with_weight": "x" * 1500, "content_ltks": words(300), "title_tks": words(5),
             "available_int": 1, "position_int": i % 20, V: vecs[i].tolist()} for i in range(n)]
    t = time.perf_counter()
    for start in range(0, n, 500):
        store.upsert("bench", "kb", docs[start:start + 500])
    print(f"upsert {n} chunks (384-d, 300 tokens): {time.perf_counter() - t:.2f} s")

    queries = [(words(6, query=True).split(), vectors(1)[0].tolist()) for _ in range(60)]
    fields = {"content_ltks": 1.0, "title_tks": 5.0}

    def hybrid(i: int) -> object:
        tokens, vec = queries[i % len(queries)]
        return store.search("bench", SearchRequest(
            kb_ids=["kb"], where=[eq("available_int", 1)], text=TextQuery(tokens, fields, 0.3),
            vector=VectorQuery(V, vec), candidates=100, limit=8,
            fields=["content_with_weight", "docnm_kwd", "doc_id"]))

    t = time.perf_counter()
    hybrid(1)
    print(f"first hybrid search (loads the vector cache): {(time.perf_counter() - t) * 1000:.1f} ms")
    print("hybrid search p50 / p95: %.1f / %.1f ms" % p50(hybrid))
    print("text-only p50 / p95: %.1f / %.1f ms" % p50(lambda i: store.search("bench", SearchRequest(
        kb_ids=["kb"], text=TextQuery(queries[i % 60][0], fields), limit=8))))
    print("vector-only p50 / p95: %.1f / %.1f ms" % p50(lambda i: store.search("bench", SearchRequest(
        kb_ids=["kb"], vector=VectorQuery(V, queries[i % 60][1]), limit=8))))

    extra = [{"id": f"z{i:06d}", "n_int": i} for i in range(2_500)]
    store.upsert("bench", "kb", extra)
    t = time.perf_counter()
    seen = sum(1 for _ in store.scan("bench", ["kb"], fields=["doc_id"]))
    print(f"scan {seen} docs: {time.perf_counter() - t:.2f} s")


def bench_kg(store: SQLiteStore) -> None:
    n_ent, n_rel = 100_000, 300_000
    spent = 0.0
    for start in range(0, n_ent, 5_000):
        vecs = vectors(5_000)
        batch = [
            {"id": f"e{i}", "knowledge_graph_kwd": "entity", "entity_key_kwd": f"key{i}", "name_kwd": f"Key {i}",
             "entity_type_kwd": "thing", "name_ltks": f"key{i} {words(2, query=True)}", "content_ltks": words(30),
             "doc_ids_kwd": [f"doc{i % 5000}"], "chunk_ids_kwd": [f"c{i % 50000}", f"c{(i * 7) % 50000}"],
             "pagerank_flt": float(i % 997), "available_int": 0, V: vecs[i - start].tolist()}
            for i in range(start, start + 5_000)]
        t = time.perf_counter()
        store.upsert("bench", "kg", batch)
        spent += time.perf_counter() - t
    print(f"upsert {n_ent} entities (384-d): {spent:.1f} s")
    spent = 0.0
    for start in range(0, n_rel, 10_000):
        batch = [
            {"id": f"r{i}", "knowledge_graph_kwd": "relation", "src_key_kwd": f"key{i % n_ent}",
             "tgt_key_kwd": f"key{(i * 31 + 7) % n_ent}", "content_ltks": words(15), "weight_flt": 1.0,
             "doc_ids_kwd": [f"doc{i % 5000}"], "chunk_ids_kwd": [f"c{i % 50000}"], "available_int": 0}
            for i in range(start, start + 10_000)]
        t = time.perf_counter()
        store.upsert("bench", "kg", batch)
        spent += time.perf_counter() - t
    print(f"upsert {n_rel} relations (no vectors): {spent:.1f} s")

    ent = eq("knowledge_graph_kwd", "entity")
    rel = eq("knowledge_graph_kwd", "relation")
    keys = [[f"key{j}" for j in rng.integers(0, n_ent, 20)] for _ in range(60)]
    lookups: dict[str, Callable[[int], object]] = {
        "entities by 20 keys": lambda i: store.search("bench", SearchRequest(
            kb_ids=["kg"], where=[ent, any_of("entity_key_kwd", keys[i % 60])], limit=20)),
        "relations touching 20 keys (src)": lambda i: store.search("bench", SearchRequest(
            kb_ids=["kg"], where=[rel, any_of("src_key_kwd", keys[i % 60])], limit=100)),
        "entities by chunk id": lambda i: store.count("bench", ["kg"], [ent, eq("chunk_ids_kwd", f"c{i * 13}")]),
        "entity text search": lambda i: store.search("bench", SearchRequest(
            kb_ids=["kg"], where=[ent], text=TextQuery(words(3, query=True).split(), {"name_ltks": 2, "content_ltks": 1}),
            limit=20)),
        "entity hybrid search": lambda i: store.search("bench", SearchRequest(
            kb_ids=["kg"], where=[ent], text=TextQuery(words(3, query=True).split(), {"name_ltks": 2, "content_ltks": 1}),
            vector=VectorQuery(V, vectors(1)[0].tolist()), limit=20)),
        "top entities by pagerank": lambda i: store.search("bench", SearchRequest(
            kb_ids=["kg"], where=[ent], order_by=[("pagerank_flt", "desc")], limit=20)),
        "count relations": lambda i: store.count("bench", ["kg"], [rel]),
    }
    for name, fn in lookups.items():
        print(f"{name} p50 / p95: %.1f / %.1f ms" % p50(fn, runs=30))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kg", action="store_true", help="also build 100k entities / 300k relations")
    parser.add_argument("--path", type=Path, default=None)
    args = parser.parse_args()
    path = args.path or Path(tempfile.mkdtemp()) / "bench.db"
    store = SQLiteStore(path)
    bench_chunks(store)
    if args.kg:
        bench_kg(store)
    print(f"database size: {path.stat().st_size / 1e6:.0f} MB ({path})")
    store.close()


if __name__ == "__main__":
    main()
