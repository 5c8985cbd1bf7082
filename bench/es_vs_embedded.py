"""Indexing time and query latency on Elasticsearch beside the embedded store, on the same corpus.

Indexes the bundled sample corpus (graph on: nlp extraction, PageRank, communities) into the
embedded SQLite store and into the Elasticsearch node at KBGRAPH_ES_URL, then asks the sample
questions in every LLM-free mode (naive, kg, ppr, mix) ``--passes`` times after one warm-up pass
and prints indexing seconds and per-mode p50/p99 milliseconds for each store. Hash embedder, no
LLM, a throw-away data dir and index prefix.

    bash tests/es_node/es-node.sh start
    KBGRAPH_ES_URL=http://127.0.0.1:9200 python bench/es_vs_embedded.py --passes 5 --refresh-intervals 1s,100ms
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kbgraph.engine import Engine
from kbgraph.config import load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR, SAMPLE_QUESTIONS
from kbgraph.meta.schemas import GraphConfig

MODES = ("naive", "kg", "ppr", "mix")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(store: str, url: str, data_dir: Path, questions: list[str], passes: int,
            refresh_interval: str = "1s") -> dict[str, object]:
    extra = {"es_url": url, "es_index_prefix": f"kbgraph_bench_{uuid.uuid4().hex[:8]}_",
             "es_refresh_interval": refresh_interval} if store == "elasticsearch" else {}
    settings = load_settings(data_dir=data_dir / f"{store}-{uuid.uuid4().hex[:6]}", store=store, embedding_provider="hash", embedding_dim=384,
                             **extra)
    with Engine.open(settings) as engine:
        try:
            engine.create_kb("bench", graph=GraphConfig(enabled=True, method="nlp", community=True))
            start = time.perf_counter()
            engine.index_paths("bench", [SAMPLE_CORPUS_DIR])
            indexing = time.perf_counter() - start
            latencies: dict[str, list[float]] = {mode: [] for mode in MODES}
            for n in range(passes + 1):
                for question in questions:
                    for mode in MODES:
                        start = time.perf_counter()
                        engine.query(["bench"], question, mode=mode)
                        if n:  # the first pass warms caches and JIT-free code paths alike on both stores
                            latencies[mode].append((time.perf_counter() - start) * 1000)
        finally:
            if store == "elasticsearch":
                engine.store.drop_index(engine.tenant)
    return {"indexing_s": indexing,
            "modes": {m: (statistics.median(v), percentile(v, 0.99), len(v)) for m, v in latencies.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--refresh-intervals", default="1s",
                        help="comma-separated es_refresh_interval values to measure Elasticsearch with (writes that "
                             "must be visible wait for the next refresh)")
    args = parser.parse_args()
    url = os.environ.get("KBGRAPH_ES_URL", "")
    if not url:
        print("es_vs_embedded: set KBGRAPH_ES_URL (bash tests/es_node/es-node.sh start)", file=sys.stderr)
        return 2
    questions = [q["question"] for q in json.loads(SAMPLE_QUESTIONS.read_text(encoding="utf-8"))]
    files = sum(1 for p in SAMPLE_CORPUS_DIR.iterdir() if p.is_file() and not p.name.startswith("_"))
    print(f"sample corpus: {files} files; {len(questions)} questions x {args.passes} passes per mode")
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("sqlite", "sqlite", "")] + [(f"es {interval}", "elasticsearch", interval)
                                             for interval in args.refresh_intervals.split(",")]
        for label, store, interval in runs:
            result = measure(store, url, Path(tmp), questions, args.passes, interval or "1s")
            print(f"{label:<14} indexing {result['indexing_s']:6.2f} s")
            for mode, (p50, p99, n) in result["modes"].items():  # type: ignore[union-attr]
                print(f"{label:<14} {mode:<6} p50 {p50:7.1f} ms   p99 {p99:7.1f} ms   (n={n})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
