"""Merge cost as a knowledge base grows: does merging document N get slower with N?

    python bench/merge_scaling.py [--docs 1000] [--names 20000] [--per-doc 30] [--repeat 5]

Builds a synthetic KB on the embedded store: each document has one chunk with `--per-doc` entity
mentions (10% from 50 "hot" names that recur across the corpus, the rest from a large pool) and
co-occurrence relations between consecutive names. With --hot-share 0 every name is rare, which
isolates the cost of the knowledge base's size from the cost of re-deriving ever-growing entities. Only `merge_document` is timed (extraction is
the LLM's cost, not the merge's). Prints the median merge time of documents 6-15 (around document 10) and of the last
ten, and their ratio (target <= 1.5); and, since medians leave out the merges that happen to run a WAL checkpoint,
the mean of the last hundred and the total merge time, which is what indexing the corpus costs. As a diagnostic on a
shared machine, the same medians and ratio in CPU time of this process (cpu_*), which time spent waiting for a core
does not inflate.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from kbgraph.config import load_settings
from kbgraph.llm.embedders import HashEmbedder
from kbgraph.meta.schemas import GraphConfig
from kbgraph.index.context import KBContext
from kbgraph.index.merge import merge_document
from kbgraph.store.records import EntityMention, RelationMention, chunk_id
from kbgraph.store.sqlite import SQLiteStore

SYLLABLES = ["ka", "lo", "mir", "dan", "vel", "tor", "sa", "bri", "ol", "wen", "dra", "ix", "mo", "ren", "tha", "qui"]


def name_for(n: int) -> str:
    rng = random.Random(n)
    first = "".join(rng.choice(SYLLABLES) for _ in range(2)).title()
    last = "".join(rng.choice(SYLLABLES) for _ in range(3)).title()
    return f"{first} {last} {n}"


def document_mentions(kb_id: str, doc: int, rng: random.Random, names: int, per_doc: int, hot_share: float = 0.1
                      ) -> tuple[list[EntityMention], list[RelationMention]]:
    doc_id = f"doc{doc:05d}"
    chunk = chunk_id(doc_id, 0)
    picked: list[int] = []
    while len(picked) < per_doc:
        n = rng.randrange(50) if rng.random() < hot_share else 50 + rng.randrange(names)
        if n not in picked:
            picked.append(n)
    entities = [EntityMention(kb_id, doc_id, chunk, name_for(n).lower(), name_for(n), "person",
                              f"{name_for(n)} appears in document {doc}.") for n in picked]
    relations = [RelationMention(kb_id, doc_id, chunk, a.key, b.key, f"{a.name} meets {b.name} in document {doc}.")
                 for a, b in zip(entities, entities[1:])]
    return entities, relations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--names", type=int, default=20000)
    parser.add_argument("--per-doc", type=int, default=30)
    parser.add_argument("--hot-share", type=float, default=0.1,
                        help="share of mentions drawn from the 50 recurring names (0: every name is rare)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="build the corpus this many times (fresh store, same documents) and report the "
                             "median ratio too: one run's ratio moves by 10%% or more on a shared machine")
    args = parser.parse_args()
    reports = [one_run(args) for _ in range(max(1, args.repeat))]
    for report in reports:
        print(json.dumps(report))
    if len(reports) > 1:
        print(json.dumps({"runs": len(reports), "ratios": [r["ratio"] for r in reports],
                          "median_ratio": statistics.median(r["ratio"] for r in reports),
                          "median_cpu_ratio": statistics.median(r["cpu_ratio"] for r in reports)}))


def one_run(args: argparse.Namespace) -> dict:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=Path(tmp), embedding_provider="hash")
        store = SQLiteStore(Path(tmp) / "store.db")
        store.ensure_index("bench")
        ctx = KBContext(store=store, tenant="bench", kb_id="kb", settings=settings, embedder=HashEmbedder(dim=384),
                        graph=GraphConfig(enabled=True, method="nlp"))
        times: list[float] = []
        cpu_times: list[float] = []
        for doc in range(1, args.docs + 1):
            entities, relations = document_mentions("kb", doc, rng, args.names, args.per_doc, args.hot_share)
            store.upsert("bench", "kb", [m.to_doc() for m in entities] + [m.to_doc() for m in relations])
            cpu_started = time.process_time()
            started = time.perf_counter()
            merge_document(ctx, f"doc{doc:05d}")
            times.append(time.perf_counter() - started)
            cpu_times.append(time.process_time() - cpu_started)
            if doc % 100 == 0:
                print(f"doc {doc}: merge {times[-1] * 1000:.1f} ms", flush=True)
        first = statistics.median(times[5:15])  # around document 10, past one-off warm-up
        last = statistics.median(times[-10:])
        # what indexing takes on the whole, checkpoints included (the medians leave them out)
        late_mean = statistics.mean(times[-100:])
        report = {"docs": args.docs, "doc10_median_ms": round(first * 1000, 2),
                  "last_median_ms": round(last * 1000, 2), "ratio": round(last / first, 3),
                  "last100_mean_ms": round(late_mean * 1000, 2), "total_merge_s": round(sum(times), 2),
                  "entities": store.count("bench", ["kb"], [])}
        cpu_first, cpu_last = statistics.median(cpu_times[5:15]), statistics.median(cpu_times[-10:])
        report.update(cpu_doc10_median_ms=round(cpu_first * 1000, 2), cpu_last_median_ms=round(cpu_last * 1000, 2),
                      cpu_ratio=round(cpu_last / cpu_first, 3) if cpu_first else None)
        store.close()
        return report

if __name__ == "__main__":
    main()
