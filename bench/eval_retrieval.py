"""Passage-recall evaluation of the retrieval modes on a multi-hop QA set.

    python bench/eval_retrieval.py DATASET_DIR [--modes naive,kg,ppr,mix] [--limit N] [--json]
                                   [--embedding local|hash] [--data-dir DIR]

DATASET_DIR holds corpus.jsonl ({id, title, text}) and questions.jsonl ({question,
gold_passage_ids, ...}), as /work/shared/data/musique-kag-train100 does. Every passage is indexed
as one document named ``<passage id>.txt`` with text ``title + "\\n" + text`` (knowledge graph on,
method nlp, communities on), so a retrieved chunk maps back to its passage through its document
name. Per mode, over the questions:

- recall@k: the fraction of a question's gold passages among the first k distinct passages
  retrieved, averaged over questions (k = 2, 5);
- all_recall@5: the fraction of questions with every gold passage in the first 5;
- hits@10: the fraction of questions with any gold passage in the first 10;
- index_s: seconds the indexing took (when the index is reused from --data-dir, the time of the
  run that built it); query_ms: mean milliseconds per question.

With --data-dir the index is kept there and reused by later runs (unchanged passages are skipped).
No LLM is used: query analysis falls back to the nlp extractor. Similarity threshold 0, so every
mode ranks the same candidate pool.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kbgraph.app import Engine
from kbgraph.config import load_settings
from kbgraph.meta.schemas import GraphConfig
from kbgraph.search.retrieve import MODES, retrieve

KB_NAME = "eval"
TOP = 10


@dataclass
class Question:
    text: str
    gold: set[str]


def load(dataset: Path) -> tuple[list[dict], list[Question]]:
    corpus = [json.loads(line) for line in (dataset / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    questions = [Question(q["question"], set(q["gold_passage_ids"]))
                 for q in (json.loads(line) for line in (dataset / "questions.jsonl").read_text(encoding="utf-8").splitlines()
                           if line)]
    return corpus, questions


def write_passages(corpus: list[dict], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for passage in corpus:
        path = folder / f"{passage['id']}.txt"
        text = f"{passage['title']}\n{passage['text']}"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def build_index(engine: Engine, corpus: list[dict], data_dir: Path, quiet: bool) -> float:
    """Index the corpus (or reuse an index built before); returns the build time in seconds."""
    stats_path = data_dir / "eval_index.json"
    if KB_NAME not in {kb.name for kb in engine.list_kbs()}:
        engine.create_kb(KB_NAME, graph=GraphConfig(enabled=True, method="nlp", community=True))
    passages = data_dir / "passages"
    write_passages(corpus, passages)
    started = time.perf_counter()
    last = [0.0]

    def progress(p) -> None:  # type: ignore[no-untyped-def]
        if not quiet and time.perf_counter() - last[0] > 10:
            last[0] = time.perf_counter()
            print(f"  indexing: {p.phase} {p.done}/{p.total}", file=sys.stderr)

    report = engine.index_paths(KB_NAME, [passages], progress=progress)
    elapsed = time.perf_counter() - started
    failed = [d for d in report.documents if d.status == "failed"]
    if failed:
        print(f"warning: {len(failed)} passages failed to index, e.g. {failed[0].name}: {failed[0].message}",
              file=sys.stderr)
    if report.count("indexed") or not stats_path.exists():
        stats_path.write_text(json.dumps({"index_s": round(elapsed, 1)}))
        return elapsed
    return float(json.loads(stats_path.read_text())["index_s"])


def passages_of(result) -> list[str]:  # type: ignore[no-untyped-def]
    seen: list[str] = []
    for chunk in result.chunks:
        pid = chunk.doc_name.rsplit(".", 1)[0]
        if pid not in seen:
            seen.append(pid)
    return seen


def evaluate(engine: Engine, questions: list[Question], mode: str) -> tuple[dict[str, float], list[list[str]]]:
    kb = engine.kb(KB_NAME)
    r2 = r5 = all5 = hit10 = 0.0
    elapsed = 0.0
    rankings = []
    for q in questions:
        started = time.perf_counter()
        result = retrieve(engine.store, engine.tenant, [kb.id], q.text, mode, embedder=engine.embedder,
                          chat=None, settings=engine.settings, top_n=TOP, entity_types=kb.graph.entity_types)
        elapsed += time.perf_counter() - started
        ranked = passages_of(result)
        rankings.append(ranked)
        r2 += len(q.gold & set(ranked[:2])) / len(q.gold)
        r5 += len(q.gold & set(ranked[:5])) / len(q.gold)
        all5 += q.gold <= set(ranked[:5])
        hit10 += bool(q.gold & set(ranked[:10]))
    n = max(1, len(questions))
    return ({"recall@2": round(r2 / n, 4), "recall@5": round(r5 / n, 4), "all_recall@5": round(all5 / n, 4),
             "hits@10": round(hit10 / n, 4), "query_ms": round(1000 * elapsed / n, 1)}, rankings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--modes", default="naive,kg,ppr,mix")
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions (the corpus stays whole)")
    parser.add_argument("--json", action="store_true", help="print only the metrics as one JSON object")
    parser.add_argument("--embedding", choices=["local", "hash"], default="local")
    parser.add_argument("--data-dir", type=Path, default=None, help="keep the index here and reuse it")
    parser.add_argument("--vector-weight", type=float, default=None,
                        help="vector_similarity_weight of the naive part (default: the library's, 0.3; "
                             "the same for every dataset)")
    args = parser.parse_args(argv)

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES or m == "global"]
    if unknown:
        parser.error(f"unknown or unsupported mode(s) {unknown}; choose from naive, kg, ppr, mix")
    corpus, questions = load(args.dataset)
    if args.limit:
        questions = questions[:args.limit]
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="kbgraph-eval-"))
    overrides = {} if args.vector_weight is None else {"vector_similarity_weight": args.vector_weight}
    settings = load_settings(data_dir=data_dir, embedding_provider=args.embedding, similarity_threshold=0.0, **overrides)
    out: dict[str, dict[str, float]] = {}
    try:
        with Engine.open(settings) as engine:
            index_s = build_index(engine, corpus, data_dir, args.json)
            for mode in modes:
                metrics, _ = evaluate(engine, questions, mode)
                out[mode] = {**{k: v for k, v in metrics.items() if k != "query_ms"}, "index_s": round(index_s, 1),
                             "query_ms": metrics["query_ms"]}
                if not args.json:
                    print(f"{mode:6s} " + "  ".join(f"{k} {v}" for k, v in out[mode].items()), file=sys.stderr)
    finally:
        if args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)
    if args.json:
        print(json.dumps(out))
    else:
        name = args.dataset.name
        print(f"\n{name} ({len(questions)} questions, {len(corpus)} passages, embedding {args.embedding})\n")
        print("| mode | recall@2 | recall@5 | all_recall@5 | hits@10 | index_s | query_ms |")
        print("|---|---|---|---|---|---|---|")
        for mode, m in out.items():
            print(f"| {mode} | {m['recall@2']:.3f} | {m['recall@5']:.3f} | {m['all_recall@5']:.3f} | "
                  f"{m['hits@10']:.3f} | {m['index_s']:.0f} | {m['query_ms']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
