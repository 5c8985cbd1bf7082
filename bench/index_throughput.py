"""Offline indexing throughput of many small documents (issues 24 and 26).

    python bench/index_throughput.py [--corpus DATA/musique-kag-train100] [--embedding hash|local] [--limit N]
                                     [--workdir DIR] [--signature OUT.json] [--profile OUT.pstats]
    python bench/index_throughput.py --compare A.json B.json

Writes every passage of a KAG-format ``corpus.jsonl`` as its own file (``<id>.txt`` = title, a
line break, text; the 1,890 MuSiQue passages by default), then indexes the folder into a fresh
embedded knowledge base with the graph on (method ``nlp``, no LLM) through ``Engine.index_paths``,
the code path of ``kbgraph index``, and prints documents/s, wall and CPU time (this process's
threads), and when each phase first and last reported progress.

``--signature`` writes the graph and chunk sets (every entity's and relation's derived fields and
PageRank, every chunk's text, tokens and offsets, and a digest of every vector rounded to 1e-5, with
document ids replaced by file names), so that two builds, e.g. before and after a change, can be
compared with ``--compare A.json B.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("KBGRAPH_EVAL_DATA", HERE.parent.parent.parent / "shared" / "data"))
DEFAULT_CORPUS = SHARED / "musique-kag-train100"


def write_passages(corpus: Path, folder: Path, limit: int = 0) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(corpus / "corpus.jsonl", encoding="utf-8") as lines:
        for line in lines:
            if limit and count >= limit:
                break
            row = json.loads(line)
            path = folder / f"{row['id']}.txt"
            text = f"{row['title']}\n{row['text']}"
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
            count += 1
    return count


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _vector_digest(row: dict) -> str:
    import numpy as np

    vectors = [np.asarray(v, dtype=np.float32).round(5).tobytes() for k, v in sorted(row.items()) if k.endswith("_vec")]
    return hashlib.sha1(b"".join(vectors)).hexdigest()[:16] if vectors else ""


def signature(engine, kb) -> dict:
    """Entities, relations and chunks of the knowledge base (their derived fields, PageRank, vector
    digests), with document and chunk ids replaced by file names and positions."""
    from kbgraph.graph.invariants import ENTITY_FIELDS, RELATION_FIELDS
    from kbgraph.store.records import Entity, Relation

    names = {d.id: d.name for d in engine.meta.list_documents(kb.id, limit=None)}
    store, tenant = engine.store, engine.tenant
    chunk_names: dict[str, str] = {}
    chunk_rows: dict[str, list] = {}
    graph_rows: dict[str, list[dict]] = {Entity.KIND: [], Relation.KIND: []}
    vector_name = engine.context(kb).vector_name
    vectors = {row["id"]: row for row in store.scan(tenant, [kb.id], fields=["id", vector_name])}
    for row in store.scan(tenant, [kb.id]):
        row.update(vectors.get(row["id"], {}))
        kind = row.get("knowledge_graph_kwd")
        if kind in graph_rows:
            graph_rows[kind].append(row)
        elif not kind:
            name = f"{names.get(row['doc_id'], row['doc_id'])}#{row.get('position_int')}"
            chunk_names[row["id"]] = name
            chunk_rows[name] = [row.get("content_with_weight", ""), row.get("content_ltks", ""),
                                row.get("start_int"), row.get("end_int"), row.get("token_count_int"),
                                _vector_digest(row)]

    def renamed(row_fields: dict, row: dict) -> dict:
        row_fields["doc_ids"] = sorted(names.get(i, i) for i in row_fields["doc_ids"])
        row_fields["chunk_ids"] = sorted(chunk_names.get(i, i) for i in row_fields["chunk_ids"])
        row_fields["pagerank"] = round(float(row.get("pagerank_flt") or 0.0), 9)
        row_fields["vector"] = _vector_digest(row)
        return row_fields

    entities = {}
    for row in graph_rows[Entity.KIND]:
        e = Entity.from_doc(row)
        entities[e.key] = renamed({f: getattr(e, f) for f in ENTITY_FIELDS}, row)
    relations = {}
    for row in graph_rows[Relation.KIND]:
        r = Relation.from_doc(row)
        relations[f"{r.src_key}\t{r.tgt_key}"] = renamed({f: getattr(r, f) for f in RELATION_FIELDS}, row)
    return {"entities": entities, "relations": relations, "chunks": chunk_rows}


class EmbeddingTimes:
    """Texts and CPU time of every embedding call, by what is embedded: passages (the chunks) or
    graph rows (entities, relations). The CPU is that of the calling thread, and with the local
    embedder that of every thread running one of its batches (it runs several at once when it
    may use more than one core)."""

    def __init__(self, embedder) -> None:
        import inspect
        import threading

        self.totals: dict[str, list] = {}
        lock = threading.Lock()
        embed = embedder.embed
        encoder = getattr(getattr(embedder, "inner", embedder), "encoder", None)
        local = encoder is not None and hasattr(encoder, "forward")
        # what the embed call under way embeds (passages and rows are embedded in different phases)
        current: dict = {"what": "passages", "caller": None}

        def add(what: str, texts: int, calls: int, seconds: float) -> None:
            with lock:
                total = self.totals.setdefault(what, [0, 0, 0.0])
                total[0] += texts
                total[1] += calls
                total[2] += seconds

        if local:
            forward = encoder.forward

            def timed_forward(windows):
                started = time.thread_time()
                try:
                    return forward(windows)
                finally:
                    if threading.get_ident() != current["caller"]:  # the caller's own time counts it
                        add(current["what"], 0, 0, time.thread_time() - started)

            encoder.forward = timed_forward

        def timed(texts):
            callers = {frame.function for frame in inspect.stack(context=0)[1:12]}
            if callers & {"store_chunks", "parse_document"}:
                what = "passages"
            else:
                what = "relations" if texts and all(" -- " in t for t in texts) else "entities"
            current["what"], current["caller"] = what, threading.get_ident()
            started = time.thread_time()
            try:
                return embed(texts)
            finally:
                # plus the local model's batches that ran on its other threads (timed there)
                add(what, len(texts), 1, time.thread_time() - started)

        embedder.embed = timed


def compare(a_path: Path, b_path: Path) -> int:
    a, b = json.loads(a_path.read_text()), json.loads(b_path.read_text())
    differences = 0
    for kind in ("entities", "relations", "chunks"):
        left, right = a[kind], b[kind]
        only_a, only_b = left.keys() - right.keys(), right.keys() - left.keys()
        changed = [k for k in left.keys() & right.keys() if left[k] != right[k]]
        differences += len(only_a) + len(only_b) + len(changed)
        print(f"{kind}: {len(left)} / {len(right)}; only in first {len(only_a)}, only in second {len(only_b)}, "
              f"different {len(changed)}")
        for key in sorted(changed)[:5]:
            diff = {f: (left[key].get(f), right[key].get(f)) for f in left[key]
                    if isinstance(left[key], dict) and left[key].get(f) != right[key].get(f)}
            print(f"  {key}: {diff if diff else (left[key], right[key])}")
    print("identical" if not differences else f"{differences} differences")
    return 0 if not differences else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="a folder holding corpus.jsonl")
    ap.add_argument("--embedding", default="hash", help="embedding_provider (hash, local, ...)")
    ap.add_argument("--workdir", type=Path, help="where the passages and the knowledge base go (default: a temp dir)")
    ap.add_argument("--signature", type=Path, help="write the graph and chunk sets here")
    ap.add_argument("--profile", type=Path, help="cProfile the run (the calling thread only) into this file")
    ap.add_argument("--limit", type=int, default=0, help="only the first N passages")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="compare two signatures and exit")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kbgraph-throughput-"))
    folder = workdir / (f"passages-{args.limit}" if args.limit else "passages")
    count = write_passages(args.corpus, folder, args.limit)
    data_dir = workdir / f"kb-{args.embedding}-{os.getpid()}"

    from kbgraph.engine import Engine
    from kbgraph.config import load_settings
    from kbgraph.meta.schemas import GraphConfig
    from kbgraph.utils.progress import Progress

    settings = load_settings(data_dir=data_dir, embedding_provider=args.embedding)
    engine = Engine.open(settings)
    kb = engine.create_kb("throughput", graph=GraphConfig(enabled=True, method="nlp"))
    engine.embedder_for(kb).embed(["warm up"])  # a local model loads once per process, before the clock
    embedding = EmbeddingTimes(engine.embedder_for(kb))
    phases: dict[str, list[float]] = {}
    started = time.perf_counter()

    def progress(event: Progress) -> None:
        at = time.perf_counter() - started
        seen = phases.setdefault(event.phase, [at, at])
        seen[1] = at

    cpu_before = cpu_seconds()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    report = engine.index_paths("throughput", [folder], progress=progress)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(str(args.profile))
    wall = time.perf_counter() - started
    cpu = cpu_seconds() - cpu_before
    indexed = report.count("indexed")
    print(f"{indexed} of {count} documents indexed in {wall:.2f} s wall, {cpu:.2f} s CPU "
          f"({indexed / wall:.1f} documents/s; embedding {args.embedding}; threads {settings.local_embedding_threads})")
    for phase, (first, last) in sorted(phases.items(), key=lambda item: item[1][0]):
        print(f"  {phase:<12} {first:7.2f} -> {last:7.2f} s")
    for what, (texts, calls, seconds) in embedding.totals.items():
        print(f"  embedding {what:<10} {texts:6d} texts in {calls:4d} calls, {seconds:7.2f} s CPU")
    if args.signature:
        args.signature.write_text(json.dumps(signature(engine, kb), sort_keys=True, ensure_ascii=False))
        print(f"signature written to {args.signature}")
    engine.close()
    return 0 if indexed == count else 1


if __name__ == "__main__":
    sys.exit(main())
