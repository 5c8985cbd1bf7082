"""Issue 40's speed table: Elasticsearch beside the embedded SQLite store, one corpus, one run.

    KBGRAPH_ES_PORT=9230 KBGRAPH_ES_PROFILE=deploy KBGRAPH_ES_HEAP=1g bash tests/es_node/es-node.sh start
    KBGRAPH_ES_URL=http://127.0.0.1:9230 python bench/es_speed.py [--corpus musique|sample] [--passes 1]
        [--limit N] [--questions N] [--no-queries] [--rm-docs 3] [--count-requests] [--json OUT.json]

The corpus: ``musique`` (default) writes the 1,890 MuSiQue passages of musique-kag-train100 (found
in $KBGRAPH_EVAL_DATA, as bench/index_throughput.py reads it) as one file each and asks its 100
questions; ``sample`` is the bundled sample corpus and its 12 questions. Both stores get a fresh
knowledge base with the graph on (nlp extraction, PageRank, communities; hash embedder, no LLM),
and the same steps, timed through the Engine calls the CLI makes:

- ``kbgraph index``: ``Engine.index_paths`` of the folder (parse, embed, extract, merge, refresh);
- queries: every question in naive, kg, ppr and mix, one warm-up pass and then ``--passes``
  passes, the two stores interleaved question by question so that both see the same machine
  load; p50 and p99 per mode;
- ``kbgraph docs rm``: ``Engine.delete_document`` (re-derivation and the graph refresh) of
  ``--rm-docs`` documents one after the other; the median.

It prints each figure, the Elasticsearch/SQLite ratio and issue 40's target (query p50 at most 2x
SQLite's and 150 ms in the graph modes, naive p50 at most 25 ms, indexing at most 1.5x, docs rm at
most 2x), and how many questions got the same top chunks from both stores. ``--count-requests``
counts the HTTP requests each Elasticsearch query sends, the round trips among them in sequence
(requests that overlap in time, sent side by side, count once) and the time spent in them. Beside the
Elasticsearch times it prints what indexing and the removals cost the node (CPU seconds, rows indexed
and deleted, its threads' time in indexing, merges, refreshes, searches, gets, and, for a node that
runs on this machine, its JIT compilers' time, ``jit_s``: a fresh node spends a minute and more
compiling during its first index): the CPU figures hold under a load that makes wall times noisy.
``--no-queries`` skips the query passes. After the queries it prints the Elasticsearch index's live
rows, dead copies and segments (every kNN search walks each segment's graph, dead copies included:
a run whose index was left worn measured 2.5-2.8x where a merged one measured 2.1-2.4x).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from index_throughput import DEFAULT_CORPUS, write_passages  # noqa: E402

from kbgraph.config import load_settings  # noqa: E402
from kbgraph.data import SAMPLE_CORPUS_DIR, SAMPLE_QUESTIONS  # noqa: E402
from kbgraph.engine import Engine  # noqa: E402
from kbgraph.meta.schemas import GraphConfig  # noqa: E402
from kbgraph.store.elastic.compaction import index_wear  # noqa: E402

MODES = ("naive", "kg", "ppr", "mix")
GRAPH_MODES = ("kg", "ppr", "mix")
STORES = ("sqlite", "elasticsearch")
KB = "bench"
# issue 40's targets
QUERY_RATIO, GRAPH_P50_MS, NAIVE_P50_MS, INDEX_RATIO, RM_RATIO = 2.0, 150.0, 25.0, 1.5, 2.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def corpus_and_questions(name: str, workdir: Path, limit: int) -> tuple[Path, list[str]]:
    if name == "sample":
        questions = [q["question"] for q in json.loads(SAMPLE_QUESTIONS.read_text(encoding="utf-8"))]
        return SAMPLE_CORPUS_DIR, questions
    source = Path(os.environ.get("KBGRAPH_EVAL_DATA", DEFAULT_CORPUS.parent)) / "musique-kag-train100"
    if not (source / "corpus.jsonl").is_file():
        raise SystemExit(f"es_speed: no {source / 'corpus.jsonl'}; set KBGRAPH_EVAL_DATA")
    folder = workdir / (f"passages-{limit}" if limit else "passages")
    write_passages(source, folder, limit)
    with open(source / "questions.jsonl", encoding="utf-8") as lines:
        questions = [json.loads(line)["question"] for line in lines if line.strip()]
    return folder, questions


class RequestCounter:
    """Counts the HTTP requests an Elasticsearch client sends, and the time spent in them."""

    def __init__(self, client: Any) -> None:
        self.requests = 0
        self.seconds = 0.0
        self.by_path: dict[str, int] = {}
        self.spans: list[tuple[float, float]] = []
        transport = client.transport
        send = transport.perform_request
        lock = threading.Lock()

        def counted(method: str, target: str, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return send(method, target, *args, **kwargs)
            finally:
                with lock:
                    self.requests += 1
                    self.seconds += time.perf_counter() - started
                    self.spans.append((started, time.perf_counter()))
                    path = target.split("?")[0].rsplit("/", 1)[-1] or "/"
                    self.by_path[path] = self.by_path.get(path, 0) + 1

        transport.perform_request = counted

    @contextmanager
    def measuring(self) -> Iterator[dict[str, float]]:
        before, seconds, spans = self.requests, self.seconds, len(self.spans)
        out: dict[str, float] = {}
        yield out
        out["requests"], out["seconds"] = self.requests - before, self.seconds - seconds
        out["in_sequence"] = in_sequence(self.spans[spans:])


def in_sequence(spans: list[tuple[float, float]]) -> int:
    """Round trips one after the other: requests that overlap in time (sent side by side) count once."""
    count, end = 0, float("-inf")
    for started, ended in sorted(spans):
        count += started > end
        end = max(end, ended)
    return count


@dataclass
class StoreRun:
    name: str
    engine: Engine
    counter: RequestCounter | None = None
    index_s: float = 0.0
    rm_s: list[float] = field(default_factory=list)
    latencies: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    # the warm-up pass: each question asked for the first time, as users ask (no cache of the
    # question's own reads holds anything yet)
    first_asked: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    requests: dict[str, list[tuple[float, float, float]]] = field(default_factory=lambda: {m: [] for m in MODES})
    node: dict[str, dict[str, float]] = field(default_factory=dict)  # phase -> node_delta (Elasticsearch)


def open_store(name: str, root: Path, url: str, refresh_interval: str, count: bool) -> StoreRun:
    extra: dict[str, Any] = {}
    if name == "elasticsearch":
        extra = {"es_url": url, "es_index_prefix": f"kbgraph_bench_{uuid.uuid4().hex[:8]}_"}
        if refresh_interval:
            extra["es_refresh_interval"] = refresh_interval
    settings = load_settings(data_dir=root / name, store=name, embedding_provider="hash", embedding_dim=384, **extra)
    engine = Engine.open(settings)
    client = getattr(engine.store, "_client", None)
    counter = RequestCounter(client) if count and client is not None else None
    return StoreRun(name, engine, counter)


def node_jvm(run: StoreRun) -> list[dict[str, Any]]:
    """How each Elasticsearch node runs (heap, garbage collectors, JIT flags): the speed targets are
    for a node started as a deployment would run it (KBGRAPH_ES_PROFILE=deploy)."""
    client = getattr(run.engine.store, "_cluster").client
    nodes = client.nodes.info(metric="jvm").body["nodes"].values()
    return [{"heap_max_mb": n["jvm"]["mem"]["heap_max_in_bytes"] // 2**20, "gc": n["jvm"]["gc_collectors"],
             "reduced_jit": any("TieredStopAtLevel" in a for a in n["jvm"]["input_arguments"])} for n in nodes]


def jit_seconds(pids: list[int]) -> float | None:
    """The seconds the nodes' JIT compilers have spent since each started (HotSpot's ``sun.ci``
    counters, read with ``jcmd``), or None when a node is not a local process jcmd can reach. A
    fresh node compiles for about a minute and a half of CPU during its first runs (bench/README.md):
    a phase that pays it is slower for a reason a long-running node does not have."""
    jcmd = shutil.which("jcmd")
    if jcmd is None or not pids:
        return None
    total = 0.0
    for pid in pids:
        try:
            out = subprocess.run([jcmd, str(pid), "PerfCounter.print"], capture_output=True, text=True,
                                 timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        counters = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        try:
            ticks = int(counters["sun.ci.standardTime"]) + int(counters["sun.ci.osrTime"])
            total += ticks / int(counters["sun.os.hrt.frequency"])
        except (KeyError, ValueError, ZeroDivisionError):
            return None
    return total


def node_work(run: StoreRun) -> dict[str, float]:
    """The node's CPU seconds and the rows it indexed and deleted so far (every index of the node):
    what a phase cost the node whatever the machine's load, and how many rows it wrote (a rewrite of
    a row is one more indexed and one more deleted); ``jit_s`` when the nodes are local processes."""
    client = getattr(run.engine.store, "_cluster").client
    nodes = client.nodes.stats(metric="process,indices").body["nodes"].values()
    pids = [int(node.get("process", {}).get("id", 0) or 0)
            for node in client.nodes.info(metric="process").body["nodes"].values()]
    jit = jit_seconds(pids) if pids and all(pids) else None

    def total(path: str) -> float:
        found = 0.0
        for node in nodes:
            value: Any = node
            for part in path.split("."):
                value = value.get(part, {})
            found += float(value or 0)
        return found

    # where its time went (thread time: under load it counts waits for a core too)
    return {"cpu_s": total("process.cpu.total_in_millis") / 1000.0,
            "indexed": total("indices.indexing.index_total"), "deleted": total("indices.indexing.delete_total"),
            "index_s": total("indices.indexing.index_time_in_millis") / 1000.0,
            "merge_s": total("indices.merges.total_time_in_millis") / 1000.0,
            "refresh_s": total("indices.refresh.total_time_in_millis") / 1000.0,
            "refreshes": total("indices.refresh.total"),
            "search_s": total("indices.search.query_time_in_millis") / 1000.0
            + total("indices.search.fetch_time_in_millis") / 1000.0,
            "get_s": total("indices.get.time_in_millis") / 1000.0, **({"jit_s": jit} if jit is not None else {})}


def node_delta(run: StoreRun, before: dict[str, float]) -> dict[str, float]:
    after = node_work(run)
    return {name: round(after[name] - before[name], 1) for name in before if name in after}


def index_shape(run: StoreRun) -> dict[str, Any]:
    """The tenant index's live rows, dead copies and segments (primaries): every kNN search walks
    each segment's graph, dead copies included, so a figure is only read beside them (the store
    merges a worn index after a graph refresh: kbgraph/store/elastic/compaction.py)."""
    wear = index_wear(run.engine.store._cluster, run.engine.store.index_for(run.engine.tenant))
    if wear is None:
        return {}
    return {"live": wear.live, "dead": wear.dead, "dead_share": round(wear.dead_share, 3),
            "segments": wear.segments, "merging": wear.merging}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def index_corpus(run: StoreRun, folder: Path) -> None:
    run.engine.create_kb(KB, graph=GraphConfig(enabled=True, method="nlp", community=True))
    before = node_work(run) if run.name == "elasticsearch" else {}
    run.index_s, report = timed(lambda: run.engine.index_paths(KB, [folder]))
    run.node["index"] = node_delta(run, before) if before else {}
    print(f"{run.name:<14} kbgraph index: {run.index_s:8.2f} s ({report.count('indexed')} documents indexed)"
          + (f"; node: {json.dumps(run.node['index'])}" if before else ""), flush=True)


def ask(run: StoreRun, question: str, mode: str, keep: bool) -> list[tuple[str, int]]:
    if run.counter is None:
        seconds, result = timed(lambda: run.engine.query([KB], question, mode=mode))
        sent: dict[str, float] = {}
    else:
        with run.counter.measuring() as sent:
            seconds, result = timed(lambda: run.engine.query([KB], question, mode=mode))
    (run.latencies if keep else run.first_asked)[mode].append(seconds * 1000.0)
    if keep and sent:
        run.requests[mode].append((sent["requests"], sent["in_sequence"], sent["seconds"] * 1000.0))
    # chunk ids derive from document ids, which each store's metadata makes anew: name and position
    return [(c.doc_name, c.position) for c in result.chunks]


def ask_all(runs: list[StoreRun], questions: list[str], passes: int) -> dict[str, dict[str, float]]:
    """Every question in every mode on every store, the stores interleaved; the first pass warms up.
    Returns per mode, over the last pass, how many questions got the same chunk list (in order) from
    both stores and the mean overlap of the two lists as sets (Lucene's BM25 keeps document lengths
    in one byte, so chunks at the edge of a list may trade places: see test_es_matches_sqlite.py)."""
    same: dict[str, dict[str, float]] = {m: {"same": 0, "overlap": 0.0} for m in MODES}
    for n in range(passes + 1):
        for question in questions:
            for mode in MODES:
                first, second = (ask(run, question, mode, keep=n > 0) for run in runs)
                if n == passes:
                    same[mode]["same"] += first == second
                    shared = len(set(first) & set(second)) / max(1, len(set(first) | set(second)))
                    same[mode]["overlap"] += shared / len(questions)
    return same


def remove_documents(run: StoreRun, names: list[str]) -> None:
    before = node_work(run) if run.name == "elasticsearch" else {}
    for name in names:
        seconds, _ = timed(lambda: run.engine.delete_document(KB, name))
        run.rm_s.append(seconds)
    run.node["rm"] = node_delta(run, before) if before else {}
    print(f"{run.name:<14} kbgraph docs rm: " + ", ".join(f"{s:.2f} s" for s in run.rm_s)
          + (f"; node (all of them): {json.dumps(run.node['rm'])}" if before else ""), flush=True)


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def report(runs: dict[str, StoreRun], same: dict[str, dict[str, float]], questions: int) -> dict[str, Any]:
    lite, es = runs["sqlite"], runs["elasticsearch"]
    rows: dict[str, Any] = {"met": {}, "node": es.node}
    print(f"\n{'':<24}{'Elasticsearch':>16}{'SQLite':>16}{'ratio':>8}  target")
    ratio = es.index_s / lite.index_s
    rows["index_s"] = (es.index_s, lite.index_s)
    rows["met"]["index"] = ratio <= INDEX_RATIO
    print(f"{'kbgraph index':<24}{es.index_s:>14.1f} s{lite.index_s:>14.1f} s{ratio:>8.2f}  "
          f"<= {INDEX_RATIO}x: {verdict(ratio <= INDEX_RATIO)}")
    for mode in MODES if same else ():
        e50, e99 = statistics.median(es.latencies[mode]), percentile(es.latencies[mode], 0.99)
        s50, s99 = statistics.median(lite.latencies[mode]), percentile(lite.latencies[mode], 0.99)
        rows[mode] = {"es": (e50, e99), "sqlite": (s50, s99), "n": len(es.latencies[mode])}
        if mode == "naive":
            rows["met"][mode] = e50 <= NAIVE_P50_MS
            target = f"p50 <= {NAIVE_P50_MS:.0f} ms: {verdict(rows['met'][mode])}"
        else:
            rows["met"][mode] = e50 <= QUERY_RATIO * s50 and e50 <= GRAPH_P50_MS
            target = f"p50 <= {QUERY_RATIO}x and {GRAPH_P50_MS:.0f} ms: {verdict(rows['met'][mode])}"
        print(f"{'query p50 / p99, ' + mode:<24}{e50:>7.0f} /{e99:>5.0f} ms{s50:>7.0f} /{s99:>5.0f} ms"
              f"{e50 / s50:>8.2f}  {target}")
    for mode in MODES if same else ():
        e50, s50 = statistics.median(es.first_asked[mode]), statistics.median(lite.first_asked[mode])
        rows[mode]["first_asked"] = {"es": e50, "sqlite": s50}
        print(f"{'  ' + mode + ', asked first':<24}{e50:>13.0f} ms{s50:>13.0f} ms{e50 / s50:>8.2f}  "
              "p50 of the warm-up pass (a fresh node's JIT warms up in it too)")
    if es.rm_s and lite.rm_s:  # --rm-docs 0 removes none
        e_rm, s_rm = statistics.median(es.rm_s), statistics.median(lite.rm_s)
        rows["rm_s"] = (e_rm, s_rm, es.rm_s, lite.rm_s)
        rows["met"]["rm"] = e_rm <= RM_RATIO * s_rm
        print(f"{'kbgraph docs rm':<24}{e_rm:>14.2f} s{s_rm:>14.2f} s{e_rm / s_rm:>8.2f}  "
              f"<= {RM_RATIO}x: {verdict(e_rm <= RM_RATIO * s_rm)}")
    if not same:
        return rows
    print("same chunk list on both stores (in order; mean overlap of the sets): " + ", ".join(
        f"{m} {same[m]['same']:.0f}/{questions} ({same[m]['overlap']:.2f})" for m in MODES))
    rows["same_chunks"] = same
    if es.counter is not None:
        print("Elasticsearch requests per query (mean count, mean round trips in sequence, mean ms in them): " + ", ".join(
            f"{m} {statistics.mean(r for r, _, _ in es.requests[m]):.1f} / {statistics.mean(q for _, q, _ in es.requests[m]):.1f}"
            f" / {statistics.mean(s for _, _, s in es.requests[m]):.0f} ms" for m in MODES))
        rows["requests"] = {m: [statistics.mean(x[i] for x in es.requests[m]) for i in range(3)] for m in MODES}
        print("Elasticsearch requests by endpoint over the run: " + json.dumps(es.counter.by_path, sort_keys=True))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", choices=("musique", "sample"), default="musique")
    ap.add_argument("--passes", type=int, default=1, help="timed passes over the questions (after one warm-up)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N passages (musique)")
    ap.add_argument("--questions", type=int, default=0, help="only the first N questions")
    ap.add_argument("--no-queries", action="store_true", help="skip the query passes (indexing and docs rm only)")
    ap.add_argument("--rm-docs", type=int, default=3, help="documents removed one by one at the end (0: none)")
    ap.add_argument("--refresh-interval", default="", help="es_refresh_interval (default: the setting's default)")
    ap.add_argument("--count-requests", action="store_true", help="count Elasticsearch requests per query")
    ap.add_argument("--workdir", type=Path, help="where the passages and the stores go (default: a temp dir)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    url = os.environ.get("KBGRAPH_ES_URL", "")
    if not url:
        print("es_speed: set KBGRAPH_ES_URL (bash tests/es_node/es-node.sh start)", file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kbgraph-es-speed-"))
    folder, questions = corpus_and_questions(args.corpus, workdir, args.limit)
    questions = questions[:args.questions] if args.questions else questions
    files = sorted(p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith("_"))
    print(f"{args.corpus}: {len(files)} files, {len(questions)} questions x {args.passes} passes per mode; "
          f"Elasticsearch at {url}, refresh interval {args.refresh_interval or 'as configured'}", flush=True)
    root = workdir / f"stores-{uuid.uuid4().hex[:6]}"
    runs = {name: open_store(name, root, url, args.refresh_interval, args.count_requests) for name in STORES}
    jvm = node_jvm(runs["elasticsearch"])
    load = [os.getloadavg()]
    print(f"Elasticsearch nodes: {json.dumps(jvm)}; load average {load[0][0]:.1f}", flush=True)
    try:
        for run in runs.values():
            index_corpus(run, folder)
        same = ask_all(list(runs.values()), questions, args.passes) if not args.no_queries else {}
        wear = index_shape(runs["elasticsearch"])
        print(f"Elasticsearch index after the queries: {json.dumps(wear)}", flush=True)
        # documents spread over the corpus, the same on both stores
        step = max(1, len(files) // (args.rm_docs + 1))
        doomed = [files[step * (i + 1)] for i in range(args.rm_docs)]
        for run in runs.values():
            if doomed:
                remove_documents(run, doomed)
        load.append(os.getloadavg())
        rows = report(runs, same, len(questions))
        rows.update(corpus=args.corpus, files=len(files), questions=len(questions), passes=args.passes, nodes=jvm,
                    load_average=[round(x[0], 2) for x in load], index_after_queries=wear)
        print(f"load average (1 min) at the start and the end: {load[0][0]:.1f}, {load[1][0]:.1f}")
    finally:
        for run in runs.values():
            if run.name == "elasticsearch":
                run.engine.store.drop_index(run.engine.tenant)
            run.engine.close()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
