"""Wall time of `kbgraph query` as a new process, as a user meets it (issue 19's cold start).

    python bench/cold_query.py                                  # the sample corpus, local embedder
    python bench/cold_query.py --data-dir /tmp/qlat/e100000-r300000-c30000-s7 --kb synthetic \\
        --questions-from-kb                                     # bench/query_latency.py's 100k-entity KB

Each question is asked once, in a fresh process, so neither the embedding cache nor any in-process
cache helps (a repeated question would be answered from the embedding cache). Prints wall and CPU
seconds per run and their median, and the size of the virtual environment this Python runs in.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SAMPLE_QUESTIONS = [
    "Who founded the Lumen Cartographers Guild?", "Where was Mira Castell born?",
    "What did Tobias Wren invent for the harbour?", "Who won the Salt War?",
    "When was Ashgrove Academy founded?", "What is the Glass Tower made of?",
    "Which company traded in dyed cloth?", "Who kept the Registry of Guilds?",
]


def venv_size() -> str:
    total = sum(f.stat().st_size for f in Path(sys.prefix).rglob("*") if f.is_file() and not f.is_symlink())
    return f"{total / 1e6:.0f} MB ({sys.prefix})"


def ask(env: dict[str, str], kb: str, question: str, mode: str | None) -> tuple[float, float]:
    args = [sys.executable, "-m", "kbgraph.cli", "query", question, "--kb", kb, "--json"]
    if mode:
        args += ["--mode", mode]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"kbgraph query failed ({done.returncode}): {done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def entity_questions(data_dir: Path, kb: str, n: int) -> list[str]:
    from kbgraph.engine import Engine
    from kbgraph.config import load_settings
    from kbgraph.store.base import eq
    from kbgraph.store.records import Entity

    with Engine.open(load_settings(data_dir=data_dir)) as engine:
        kb_id = engine.kb(kb).id
        names = [d["name_kwd"] for d in engine.store.scan(engine.tenant, [kb_id], [eq("knowledge_graph_kwd", Entity.KIND)],
                                                          fields=["name_kwd"])]
    rng = random.Random(11)
    return [f"Who is {rng.choice(names)} and what is their link to {rng.choice(names)}?" for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, help="an existing data dir (default: index the sample corpus anew)")
    ap.add_argument("--kb", default="sample")
    ap.add_argument("--mode", help="retrieval mode (default: the KB's default)")
    ap.add_argument("--questions-from-kb", action="store_true", help="ask about random entities of the KB")
    ap.add_argument("--runs", type=int, default=6)
    args = ap.parse_args()

    env = {k: v for k, v in os.environ.items() if not k.startswith("KBGRAPH_")}
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = args.data_dir or Path(scratch) / "data"
        env["KBGRAPH_DATA_DIR"] = str(data_dir)
        if args.data_dir is None:
            subprocess.run([sys.executable, "-m", "kbgraph.cli", "demo"], env=env, check=True,
                           capture_output=True, cwd=scratch)
        questions = (entity_questions(data_dir, args.kb, args.runs) if args.questions_from_kb
                     else (SAMPLE_QUESTIONS * (args.runs // len(SAMPLE_QUESTIONS) + 1))[:args.runs])
        print(f"load average {os.getloadavg()[0]:.1f}; venv {venv_size()}")
        walls, cpus = [], []
        for question in questions:
            wall, cpu = ask(env, args.kb, question, args.mode)
            walls.append(wall)
            cpus.append(cpu)
            print(f"{wall:6.2f} s wall {cpu:6.2f} s CPU  {question}")
        print(f"median: {statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU "
              f"(min {min(walls):.2f} s wall) over {len(walls)} new processes")


if __name__ == "__main__":
    main()
