"""Issue 40's capacity figures on an Elasticsearch cluster, and a check of docs/scaling.md's model.

    bash tests/es_node/es-node.sh cluster-start 3          # KBGRAPH_ES_PORT=9280 KBGRAPH_ES_PROFILE=deploy
    KBGRAPH_ES_URL=http://127.0.0.1:9280,http://127.0.0.1:9281,http://127.0.0.1:9282 \\
        python bench/capacity.py [--workers 1,2] [--limit 600] [--clients 4] [--seconds 60] \\
        [--rows 20000] [--model bench/capacity_model.json] [--json OUT.json]

Three measurements, each on indices of its own (dropped at the end):

1. **Indexing.** ``--limit`` MuSiQue passages (one file each, as bench/es_speed.py writes them), nlp
   graph, hash embedder, indexed by N worker processes at once (each ``Engine.index_paths`` of its
   share into a knowledge base of its own, one tenant index of ``--shards`` shards and one replica,
   as ``kbgraph-worker`` processes would); for each N in ``--workers``: documents/s in all, per
   worker, and per data node.
2. **Queries under load.** ``--clients`` processes ask the corpus's questions in turn in naive, kg,
   ppr and mix for ``--seconds``; p50/p99 per mode and queries/s in all.
3. **Size.** Rows written straight through the store (no extraction): ``--rows`` chunk rows, then
   as many entity rows, each with a 384-dim vector as the indexing writes them, into indices of
   their own; disk (primaries and with replicas, after a flush and a force merge to one segment:
   what a steady index converges to) and the nodes' heap per million rows, scaled linearly from
   ``--rows`` (Lucene's per-row cost is flat: postings, doc values and HNSW graph grow with rows).

``--model FILE`` compares the measured per-node figures with the model's (docs/scaling.md writes
them to bench/capacity_model.json) and exits 1 when one is off by more than the model's stated
tolerance.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from index_throughput import DEFAULT_CORPUS, write_passages  # noqa: E402

MODES = ("naive", "kg", "ppr", "mix")
DIM = 384
# rows written for the size figures: chunks and entities carry a vector (relations and reports are
# sized like entities: a vector, a description, a few keyword fields), mentions none
SIZE_KINDS = ("chunk", "entity", "mention")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def settings_for(url: str, prefix: str, data_dir: Path, shards: int, replicas: int) -> Any:
    from kbgraph.config import load_settings

    return load_settings(data_dir=data_dir, store="elasticsearch", es_url=url, es_index_prefix=prefix,
                         es_shards=shards, es_replicas=replicas, embedding_provider="hash", embedding_dim=DIM)


def _index_worker(args: tuple[str, str, str, int, int, str, list[str]]) -> dict[str, Any]:
    """One worker process: its own metadata database, a knowledge base of its own, its share of files."""
    from kbgraph.engine import Engine
    from kbgraph.meta.schemas import GraphConfig

    url, prefix, data_dir, shards, replicas, kb, files = args
    with Engine.open(settings_for(url, prefix, Path(data_dir), shards, replicas)) as engine:
        engine.create_kb(kb, graph=GraphConfig(enabled=True, method="nlp", community=True))
        started, cpu = time.perf_counter(), time.process_time()
        report = engine.index_paths(kb, [Path(f) for f in files])
        return {"kb": kb, "documents": report.count("indexed"), "failed": report.count("failed"),
                "seconds": time.perf_counter() - started, "cpu_s": time.process_time() - cpu}


def nodes_cpu_s(url: str) -> float:
    """CPU seconds the cluster's node processes have used so far (every node)."""
    from elasticsearch import Elasticsearch

    client = Elasticsearch(url.split(","))
    try:
        nodes = client.nodes.stats(metric="process").body["nodes"].values()
        return sum(n["process"]["cpu"]["total_in_millis"] for n in nodes) / 1000.0
    finally:
        client.close()


def measure_indexing(url: str, folder: Path, workers: int, shards: int, replicas: int,
                     work: Path) -> dict[str, Any]:
    files = sorted(str(p) for p in folder.iterdir() if p.suffix == ".txt")
    prefix = f"kbgraph_cap_{uuid.uuid4().hex[:8]}_"
    shares = [files[i::workers] for i in range(workers)]
    jobs = [(url, prefix, str(work / f"w{workers}-{i}"), shards, replicas, f"w{i}", share)
            for i, share in enumerate(shares)]
    ctx = multiprocessing.get_context("spawn")
    node_cpu = nodes_cpu_s(url)
    started = time.perf_counter()
    with ctx.Pool(workers) as pool:
        done = pool.map(_index_worker, jobs)
    wall = time.perf_counter() - started
    node_cpu, worker_cpu = nodes_cpu_s(url) - node_cpu, sum(d["cpu_s"] for d in done)
    documents = sum(d["documents"] for d in done)
    return {"workers": workers, "documents": documents, "failed": sum(d["failed"] for d in done),
            "wall_s": round(wall, 1), "docs_per_s": round(documents / wall, 2),
            # machine-independent costs: CPU seconds per document on the nodes (all copies) and in the workers
            "node_cpu_s_per_doc": round(node_cpu / max(1, documents), 4),
            "worker_cpu_s_per_doc": round(worker_cpu / max(1, documents), 4),
            "docs_per_s_per_worker": round(documents / wall / workers, 2), "prefix": prefix,
            "data_dir": str(work / f"w{workers}-0"), "kb": "w0"}


def _query_client(args: tuple[str, str, str, int, int, list[str], float, int]) -> dict[str, Any]:
    from kbgraph.engine import Engine

    url, prefix, data_dir, shards, replicas, questions, seconds, offset = args
    latencies: dict[str, list[float]] = {m: [] for m in MODES}
    with Engine.open(settings_for(url, prefix, Path(data_dir), shards, replicas)) as engine:
        for question in questions[:2]:  # warm-up: the process's caches and connections
            engine.query(["w0"], question, mode="mix")
        deadline, n, cpu = time.monotonic() + seconds, offset, time.process_time()
        while time.monotonic() < deadline:
            question, mode = questions[n % len(questions)], MODES[n % len(MODES)]
            started = time.perf_counter()
            engine.query(["w0"], question, mode=mode)
            latencies[mode].append((time.perf_counter() - started) * 1000.0)
            n += 1
    return {**latencies, "cpu_s": time.process_time() - cpu}


def measure_queries(url: str, built: dict[str, Any], questions: list[str], clients: int, seconds: float,
                    shards: int, replicas: int) -> dict[str, Any]:
    jobs = [(url, built["prefix"], built["data_dir"], shards, replicas, questions, seconds, i * 7)
            for i in range(clients)]
    ctx = multiprocessing.get_context("spawn")
    node_cpu = nodes_cpu_s(url)
    with ctx.Pool(clients) as pool:
        answers = pool.map(_query_client, jobs)
    node_cpu, client_cpu = nodes_cpu_s(url) - node_cpu, sum(answer["cpu_s"] for answer in answers)
    out: dict[str, Any] = {"clients": clients, "seconds": seconds}
    total = 0
    for mode in MODES:
        times = [t for answer in answers for t in answer[mode]]
        total += len(times)
        out[mode] = {"n": len(times), "p50_ms": round(statistics.median(times), 1) if times else None,
                     "p99_ms": round(percentile(times, 0.99), 1)}
    out["queries_per_s"] = round(total / seconds, 2)
    # per query, all modes mixed (on the nodes: the clients' warm-up included, an upper bound)
    out["node_cpu_ms_per_query"] = round(1000 * node_cpu / max(1, total), 1)
    out["client_cpu_ms_per_query"] = round(1000 * client_cpu / max(1, total), 1)
    return out


def _synthetic_rows(kind: str, n: int, start: int, kb: str) -> list[dict[str, Any]]:
    from kbgraph.llm.embedders import HashEmbedder
    from kbgraph.parse.tokenize import token_string
    from kbgraph.store.records import Chunk, Entity, EntityMention, chunk_id

    embedder = HashEmbedder(DIM)
    words = "guild harbor treaty council archive river tower fleet market scholar merchant captain".split()
    rows: list[Any] = []
    for i in range(start, start + n):
        text = " ".join(words[(i * k) % len(words)] for k in range(1, 60)) + f" row{i}"
        if kind == "mention":  # no vector: what most graph rows are (MuSiQue: 24 mentions per chunk)
            rows.append(EntityMention(kb_id=kb, doc_id=f"doc{i // 20}", chunk_id=chunk_id("synthetic", i // 4),
                                      key=f"entity {i}", name=f"Entity {i}", type="organization",
                                      description=text[:160]))
        elif kind == "chunk":
            rows.append(Chunk(id=chunk_id("synthetic", i), kb_id=kb, doc_id="synthetic", doc_name="synthetic.txt",
                              content=text, content_tokens=token_string(text), title_tokens="synthetic", position=i,
                              start=0, end=len(text), token_count=len(text) // 4, page=0, vector=None, created=0.0))
        else:
            name = f"Entity {i}"
            desc = text[:160]
            rows.append(Entity(kb_id=kb, key=name.lower(), name=name, type="organization", description=desc,
                               name_tokens=token_string(name), description_tokens=token_string(desc), aliases=[],
                               doc_ids=["synthetic"], chunk_ids=[chunk_id("synthetic", i)], mention_count=1,
                               pagerank=1.0 / (i + 1), community_ids=["L0-1"]))
    if kind != "mention":
        for row, vector in zip(rows, embedder.embed([r.content if kind == "chunk" else r.description for r in rows])):
            row.vector = vector.tolist()
    return [row.to_doc() for row in rows]


def _index_bytes(client: Any, index: str, replicas: int) -> dict[str, Any]:
    """Primary bytes of the index, in all and by kind (the analyze-disk-usage API reads the primaries'
    files: the stats API's store sizes lag by up to index.store.stats_refresh_interval)."""
    client.indices.refresh(index=index)
    client.indices.flush(index=index)
    client.indices.forcemerge(index=index, max_num_segments=1)
    docs = client.count(index=index).body["count"]
    usage = client.perform_request("POST", f"/{index}/_disk_usage", params={"run_expensive_tasks": "true"},
                                   headers={"accept": "application/json"}).body
    entry = next(value for key, value in usage.items() if key != "_shards")
    fields = entry["all_fields"]
    return {"docs": docs, "primary_bytes": entry["store_size_in_bytes"],
            "total_bytes": entry["store_size_in_bytes"] * (1 + replicas),
            "vector_bytes": fields["knn_vectors_in_bytes"], "inverted_index_bytes": fields["inverted_index"]["total_in_bytes"],
            "stored_fields_bytes": fields["stored_fields_in_bytes"], "doc_values_bytes": fields["doc_values_in_bytes"]}


def _heap_used(client: Any) -> list[int]:
    """Each node's heap in use (MB), after its last collection as far as the JVM says."""
    nodes = client.nodes.stats(metric="jvm").body["nodes"].values()
    return [n["jvm"]["mem"]["heap_used_in_bytes"] // 2**20 for n in nodes]


def measure_size(url: str, rows: int, shards: int, replicas: int, work: Path) -> dict[str, Any]:
    from kbgraph.store import open_store

    out: dict[str, Any] = {"rows": rows}
    for kind in SIZE_KINDS:
        prefix = f"kbgraph_size_{uuid.uuid4().hex[:8]}_"
        store = open_store(settings_for(url, prefix, work / f"size-{kind}", shards, replicas))
        client = store._cluster.client
        try:
            store.ensure_index("size")
            batches = [_synthetic_rows(kind, min(2000, rows - start), start, "kb") for start in range(0, rows, 2000)]
            node_cpu = nodes_cpu_s(url)
            for batch in batches:
                store.upsert("size", "kb", batch, refresh=False)
            store.refresh("size")
            node_cpu = nodes_cpu_s(url) - node_cpu  # writing the rows, every copy (a vector: its HNSW insertion)
            sized = _index_bytes(client, store.index_for("size"), replicas)
            per_million = 1e6 / max(1, sized["docs"])
            out[kind] = {**sized, "disk_gb_per_million_primary": round(sized["primary_bytes"] * per_million / 1e9, 2),
                         "disk_gb_per_million_with_replicas": round(sized["total_bytes"] * per_million / 1e9, 2),
                         "vector_gb_per_million": round(sized["vector_bytes"] * per_million / 1e9, 2),
                         "node_cpu_ms_per_row_written": round(1000 * node_cpu / max(1, rows), 3)}
        finally:
            store.drop_index("size")
            store.close()
    return out


def _heap_used_now(url: str) -> list[int]:
    from elasticsearch import Elasticsearch

    client = Elasticsearch(url.split(","))
    try:
        return _heap_used(client)
    finally:
        client.close()


def node_facts(url: str) -> dict[str, Any]:
    from elasticsearch import Elasticsearch

    client = Elasticsearch(url.split(","))
    info = client.nodes.info(metric="jvm,os").body["nodes"].values()
    client.close()
    return {"nodes": len(info), "heap_max_mb": [n["jvm"]["mem"]["heap_max_in_bytes"] // 2**20 for n in info],
            "gc": sorted({c for n in info for c in n["jvm"]["gc_collectors"]}),
            "cores": [n["os"].get("allocated_processors") for n in info]}


def check_model(figures: dict[str, Any], model: dict[str, Any]) -> list[str]:
    """The measured per-node figures against the model's, each within the model's tolerance (a
    factor: measured / model must lie in [1 / tolerance, tolerance])."""
    tolerance = float(model.get("tolerance", 2.0))
    measured: dict[str, float | None] = {}
    if figures["indexing"]:
        best, first = max(figures["indexing"], key=lambda r: r["docs_per_s"]), figures["indexing"][0]
        measured.update(docs_per_s_per_node=best["docs_per_s"] / figures["cluster"]["nodes"],
                        docs_per_s_per_worker=first["docs_per_s_per_worker"],
                        node_cpu_s_per_doc=first["node_cpu_s_per_doc"], worker_cpu_s_per_doc=first["worker_cpu_s_per_doc"])
    if "queries" in figures:
        measured.update(query_p50_ms_mix=figures["queries"]["mix"]["p50_ms"],
                        node_cpu_ms_per_query=figures["queries"]["node_cpu_ms_per_query"])
    for kind, name in (("chunk", "chunks"), ("entity", "entities"), ("mention", "mentions")):
        if kind in figures.get("size", {}):
            measured[f"disk_gb_per_million_{name}"] = figures["size"][kind]["disk_gb_per_million_primary"]
            measured[f"node_cpu_ms_per_{kind}_written"] = figures["size"][kind]["node_cpu_ms_per_row_written"]
    problems = []
    for name, want in model["per_node"].items():
        have = measured.get(name)
        if have is None:
            continue
        ratio = have / want if want else float("inf")
        verdict = "ok" if 1 / tolerance <= ratio <= tolerance else "OFF"
        print(f"model {name:<32} model {want:>10.4g}  measured {have:>10.4g}  ratio {ratio:5.2f}  {verdict}")
        if verdict != "ok":
            problems.append(name)
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="a folder holding corpus.jsonl")
    ap.add_argument("--limit", type=int, default=600, help="passages indexed per run")
    ap.add_argument("--workers", default="1,2", help="worker processes, one run per value")
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--clients", type=int, default=4, help="query processes asking at once")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long the query load lasts")
    ap.add_argument("--rows", type=int, default=20000, help="synthetic chunk and entity rows for the size figures")
    ap.add_argument("--parts", default="index,query,size", help="which measurements (query needs index)")
    ap.add_argument("--model", type=Path, help="docs/scaling.md's model (bench/capacity_model.json) to check")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    url = os.environ.get("KBGRAPH_ES_URL", "")
    if not url:
        print("capacity: set KBGRAPH_ES_URL to the cluster's nodes (comma-separated)", file=sys.stderr)
        return 2
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kbgraph-capacity-"))
    folder = work / f"passages-{args.limit}"
    write_passages(args.corpus, folder, args.limit)
    with open(args.corpus / "questions.jsonl", encoding="utf-8") as lines:
        questions = [json.loads(line)["question"] for line in lines if line.strip()]
    figures: dict[str, Any] = {"cluster": node_facts(url), "load_average": [round(os.getloadavg()[0], 2)],
                               "indexing": []}
    print(f"cluster: {json.dumps(figures['cluster'])}; load average {figures['load_average'][0]}", flush=True)
    prefixes = []
    try:
        parts = set(args.parts.split(","))
        for workers in (int(w) for w in args.workers.split(",") if "index" in parts):
            run = measure_indexing(url, folder, workers, args.shards, args.replicas, work)
            prefixes.append(run["prefix"])
            figures["indexing"].append(run)
            print(f"indexing, {workers} worker(s): {run['documents']} documents in {run['wall_s']} s = "
                  f"{run['docs_per_s']} docs/s, {run['docs_per_s_per_worker']} per worker, "
                  f"{run['docs_per_s'] / figures['cluster']['nodes']:.2f} per node; CPU per document: nodes "
                  f"{run['node_cpu_s_per_doc']} s, workers {run['worker_cpu_s_per_doc']} s", flush=True)
        if "query" in parts:
            figures["queries"] = measure_queries(url, figures["indexing"][0], questions, args.clients,
                                                 args.seconds, args.shards, args.replicas)
            q = figures["queries"]
            print(f"queries, {args.clients} clients for {args.seconds:.0f} s: {q['queries_per_s']} queries/s; "
                  + ", ".join(f"{m} p50 {q[m]['p50_ms']} / p99 {q[m]['p99_ms']} ms (n {q[m]['n']})" for m in MODES)
                  + f"; CPU per query: nodes {q['node_cpu_ms_per_query']} ms, clients {q['client_cpu_ms_per_query']} ms",
                  flush=True)
            figures["heap_used_mb_after_queries"] = _heap_used_now(url)
        if "size" in parts:
            figures["size"] = measure_size(url, args.rows, args.shards, args.replicas, work)
        for kind in SIZE_KINDS if "size" in parts else ():
            s = figures["size"][kind]
            print(f"size, {kind} rows: {s['docs']} rows = {s['primary_bytes'] / 1e6:.1f} MB primary, "
                  f"{s['total_bytes'] / 1e6:.1f} MB with replicas; per million rows {s['disk_gb_per_million_primary']} GB "
                  f"(primary), of which vectors {s['vector_gb_per_million']} GB; node CPU "
                  f"{s['node_cpu_ms_per_row_written']} ms per row written", flush=True)
    finally:
        _drop(url, prefixes, work)
    figures["load_average"].append(round(os.getloadavg()[0], 2))
    print(f"load average (1 min) at the start and the end: {figures['load_average']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    if args.model:
        problems = check_model(figures, json.loads(args.model.read_text()))
        return 1 if problems else 0
    return 0


def _drop(url: str, prefixes: list[str], work: Path) -> None:
    """The tenant index (and its template) each indexing run made."""
    from kbgraph.meta.schemas import DEFAULT_TENANT
    from kbgraph.store import open_store

    for prefix in prefixes:
        store = open_store(settings_for(url, prefix, work / "drop", 1, 0))
        store.drop_index(DEFAULT_TENANT)
        store.close()


if __name__ == "__main__":
    sys.exit(main())
