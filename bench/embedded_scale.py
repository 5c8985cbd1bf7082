"""The embedded SQLite store at scale (issue 40, item 6): query p50/p99, disk and cold start of a
knowledge base of ``--entities`` entities, so users know when to move to Elasticsearch.

    python bench/embedded_scale.py --data-dir /tmp/kbgraph-scale --entities 1000000 [--json OUT.json]
    python bench/embedded_scale.py --data-dir /tmp/kbgraph-scale --entities 100000,300000   # several sizes

The knowledge base is bench/query_latency.py's synthetic one, written straight through the store API
in batches of 5,000 rows (no extraction: extracting a million entities from text would take days
here; the rows are what an extraction writes: names, descriptions, token fields, hash-embedder
vectors of dim 384, PageRank), ``--relations-per-entity`` relations per entity by preferential
attachment and one chunk per ``--entities-per-chunk`` entities. It is kept in ``--data-dir`` and
reused. Then, per size:

- warm query latency: bench/query_latency.py's questions (naming one or two entities) in every mode
  in one process, after a warm-up, p50 / p99;
- disk: the store file, its write-ahead log and the memory-mapped search structures
  (``store.db.indexes/``, written by the first process that needs them);
- cold start: ``kbgraph query`` as a new process (bench/cold_query.py), ``--cold-runs`` questions
  per mode, median wall and CPU seconds; the first of them after the build also writes the search
  structures, so it is reported apart.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cold_query import ask, entity_questions  # noqa: E402

MODES = ("naive", "kg", "ppr", "mix")


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def disk(data_dir: Path) -> dict[str, float]:
    store = data_dir / "store.db"
    wal = data_dir / "store.db-wal"
    indexes = data_dir / "store.db.indexes"
    return {"store_mb": round(store.stat().st_size / 1e6, 1) if store.exists() else 0.0,
            "wal_mb": round(wal.stat().st_size / 1e6, 1) if wal.exists() else 0.0,
            "indexes_mb": round(folder_bytes(indexes) / 1e6, 1) if indexes.exists() else 0.0,
            "data_dir_mb": round(folder_bytes(data_dir) / 1e6, 1)}


def cold_starts(data_dir: Path, runs: int, modes: list[str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBGRAPH_")}
    env["KBGRAPH_DATA_DIR"] = str(data_dir)
    questions = entity_questions(data_dir, "synthetic", runs * len(modes) + 1)
    first_wall, first_cpu = ask(env, "synthetic", questions[0], "kg")  # may write the search structures
    out: dict[str, Any] = {"first_after_build": {"wall_s": round(first_wall, 2), "cpu_s": round(first_cpu, 2)}}
    for n, mode in enumerate(modes):
        walls, cpus = [], []
        for question in questions[1 + n * runs:1 + (n + 1) * runs]:
            wall, cpu = ask(env, "synthetic", question, mode)
            walls.append(wall)
            cpus.append(cpu)
        out[mode] = {"wall_s": round(statistics.median(walls), 2), "cpu_s": round(statistics.median(cpus), 2),
                     "runs": len(walls)}
    return out


def measure(base: Path, entities: int, args: argparse.Namespace) -> dict[str, Any]:
    relations = entities * args.relations_per_entity
    chunks = max(100, entities // args.entities_per_chunk)
    warm = base / f"warm-{entities}.json"
    command = [sys.executable, str(HERE / "query_latency.py"), "--data-dir", str(base), "--entities", str(entities),
               "--relations", str(relations), "--chunks", str(chunks), "--queries", str(args.queries),
               "--warmup", str(args.warmup), "--modes", ",".join(MODES), "--json", str(warm)]
    started = time.perf_counter()
    subprocess.run(command, check=True)
    figures = json.loads(warm.read_text())
    data_dir = base / f"e{entities}-r{relations}-c{chunks}-s7"
    result: dict[str, Any] = {"entities": entities, "relations": figures["kb"]["relations"], "chunks": chunks,
                              "build_s": figures["kb"]["build_s"],
                              "build_and_warm_run_s": round(time.perf_counter() - started, 1),
                              "warm": {m: {k: figures[m][k] for k in ("p50_ms", "p99_ms", "first_query_ms", "queries")}
                                       for m in MODES},
                              "disk": disk(data_dir), "load_average": round(os.getloadavg()[0], 2)}
    result["cold"] = cold_starts(data_dir, args.cold_runs, ["kg", "mix"])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True, help="where the synthetic stores are kept between runs")
    ap.add_argument("--entities", default="1000000", help="one size or several, comma-separated")
    ap.add_argument("--relations-per-entity", type=int, default=3)
    ap.add_argument("--entities-per-chunk", type=int, default=10)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    results = []
    for entities in (int(n) for n in args.entities.split(",")):
        result = measure(args.data_dir, entities, args)
        results.append(result)
        w, d, c = result["warm"], result["disk"], result["cold"]
        print(f"[{entities} entities, {result['relations']} relations, {result['chunks']} chunks] built in "
              f"{result['build_s']} s; disk {d['data_dir_mb']} MB (store {d['store_mb']}, search structures "
              f"{d['indexes_mb']}); " + ", ".join(f"{m} p50 {w[m]['p50_ms']} / p99 {w[m]['p99_ms']} ms" for m in MODES)
              + f"; cold kbgraph query kg {c['kg']['wall_s']} s, mix {c['mix']['wall_s']} s wall (first after the "
              f"build {c['first_after_build']['wall_s']} s); load {result['load_average']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
