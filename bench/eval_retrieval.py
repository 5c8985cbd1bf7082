"""Passage-recall evaluation of the retrieval modes on multi-hop QA sets; one command, one table.

    python bench/eval_retrieval.py [DATASET_DIR ...] [--modes naive,kg,ppr,mix] [--limit N] [--json]
                                   [--embedding local|hash] [--data-dir DIR] [--set PART.FIELD=VALUE ...]
                                   [--split all|dev|heldout] [--dump DIR]

With no DATASET_DIR it runs the suite: the shared dev sets (MuSiQue and HotpotQA, where
../shared/data or $KBGRAPH_EVAL_DATA holds them) and every set under bench/data/ (our own: chat
logs among invented people and Chinese news, each as a small set and a larger one with hub
speakers or hub places in most passages: chatlogs, chatlogs-large, zh-news, zh-news-large; and
real published text: email-ilug, mailing-list e-mail, chat-ubuntu, IRC chat logs, and
zh-wiki-cmrc, Chinese Wikipedia paragraphs, see bench/README.md). A DATASET_DIR holds
corpus.jsonl ({id, title, text}) and questions.jsonl ({question, gold_passage_ids, hops?}).
Every passage is indexed as one document named ``<passage id>.txt`` with text
``title + "\\n" + text`` (knowledge graph on, method nlp, communities on), so a retrieved chunk
maps back to its passage through its document name.
Per mode, over the questions (distinct passages in rank order):

- recall@k: the fraction of a question's gold passages among the first k, averaged (k = 2, 5);
- all_recall@5: the fraction of questions with every gold passage in the first 5;
- precision@5: gold passages among the first 5, divided by min(5, number of gold) (sets whose
  questions have many gold passages: a ranking cannot do better than fill the page);
- hits@1: the fraction of questions whose first passage is gold;
- mh_recall@5 / mh_all@5: recall@5 and all_recall@5 over the multi-hop questions only (hops >= 2,
  or a dev set whose questions are all multi-hop);
- query_ms: mean milliseconds per question.

Indexes are cached under --data-dir (default /tmp/kbgraph-eval), one per dataset and embedder, and
reused by later runs (unchanged passages are skipped), so the retrieval code can be changed and
re-measured without re-indexing. No LLM is used: query analysis falls back to the nlp extractor.
Similarity threshold 0, so every mode ranks the same candidate pool. ``--set`` overrides a
retrieval parameter for an experiment, e.g. ``--set ppr.damping=0.6 --set mix.rrf_k=20``.
``--split dev`` / ``--split heldout`` keeps one fixed half of each set's questions (``split_of``: a
hash of the question's text), so a parameter tuned on the dev half is judged on the other;
``--dump DIR`` writes every question's ranking per set and mode (for bench/bridge_report.py-style
reading).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from kbgraph.engine import Engine
from kbgraph.config import load_settings
from kbgraph.meta.schemas import GraphConfig
from kbgraph.search.chains import ChainParams
from kbgraph.search.kg.params import KGParams
from kbgraph.search.ppr_search import PPRParams
from kbgraph.search.retrieve import MODES, MixParams, retrieve

KB_NAME = "eval"
TOP = 10
HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("KBGRAPH_EVAL_DATA", HERE.parent.parent.parent / "shared" / "data"))
DEV_SETS = ("musique-kag-train100", "hotpotqa-kag-train100")


@dataclass
class Question:
    text: str
    gold: set[str]
    hops: int


def suite() -> list[Path]:
    """The shared dev sets that are present, then our own sets under bench/data."""
    found = [SHARED / name for name in DEV_SETS if (SHARED / name / "corpus.jsonl").exists()]
    found += sorted(p for p in (HERE / "data").iterdir() if (p / "corpus.jsonl").exists()) \
        if (HERE / "data").is_dir() else []
    return found


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load(dataset: Path) -> tuple[list[dict], list[Question]]:
    corpus = _jsonl(dataset / "corpus.jsonl")
    rows = _jsonl(dataset / "questions.jsonl")
    questions = []
    for q in rows:
        gold = set(q["gold_passage_ids"])
        # HotpotQA's comparison questions need both passages too: every dev question is multi-hop
        hops = int(q.get("hops") or (2 if len(gold) > 1 else 1))
        questions.append(Question(q["question"], gold, hops))
    return corpus, questions


def split_of(question: str) -> str:
    """``dev`` or ``heldout``: a fixed half of every set's questions by a hash of the question's text
    (parameters are tuned on the dev half; the held-out half says whether a change carries over)."""
    return "dev" if hashlib.sha1(question.encode("utf-8")).digest()[0] % 2 == 0 else "heldout"


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


def score(questions: list[Question], rankings: list[list[str]]) -> dict[str, float]:
    """The metrics of the module docstring (query_ms aside) for rankings in question order."""
    sums = dict.fromkeys(("recall@2", "recall@5", "all_recall@5", "precision@5", "hits@1",
                          "mh_recall@5", "mh_all@5"), 0.0)
    multi = 0
    for q, ranked in zip(questions, rankings):
        top5 = set(ranked[:5])
        r5 = len(q.gold & top5) / len(q.gold)
        every = float(q.gold <= top5)
        sums["recall@2"] += len(q.gold & set(ranked[:2])) / len(q.gold)
        sums["recall@5"] += r5
        sums["all_recall@5"] += every
        sums["precision@5"] += len(q.gold & top5) / min(5, len(q.gold))
        sums["hits@1"] += float(bool(ranked) and ranked[0] in q.gold)
        if q.hops >= 2:
            multi += 1
            sums["mh_recall@5"] += r5
            sums["mh_all@5"] += every
    n = max(1, len(questions))
    out = {k: round(v / (max(1, multi) if k.startswith("mh_") else n), 4) for k, v in sums.items()}
    out["multi_hop"] = multi
    return out


def evaluate(engine: Engine, questions: list[Question], mode: str, overrides: dict[str, Any] | None = None
             ) -> tuple[dict[str, float], list[list[str]]]:
    kb = engine.kb(KB_NAME)
    elapsed = 0.0
    rankings = []
    for q in questions:
        started = time.perf_counter()
        result = retrieve(engine.store, engine.tenant, [kb.id], q.text, mode, embedder=engine.embedder,
                          chat=None, settings=engine.settings, top_n=TOP, entity_types=kb.graph.entity_types,
                          **(overrides or {}))
        elapsed += time.perf_counter() - started
        rankings.append(passages_of(result))
    metrics = score(questions, rankings)
    metrics["query_ms"] = round(1000 * elapsed / max(1, len(questions)), 1)
    return metrics, rankings


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parameter_overrides(items: list[str]) -> dict[str, Any]:
    """``--set ppr.damping=0.6`` -> {"ppr_params": PPRParams(damping=0.6)}; ``ppr.kg.x`` reaches the
    KG parameters inside the PPR ones, ``ppr.chains.x`` the passage chains' (``ppr.chains=null``: none)."""
    params: dict[str, Any] = {"kg": KGParams(), "ppr": PPRParams(), "mix": MixParams()}
    touched: set[str] = set()
    for item in items:
        path, _, raw = item.partition("=")
        part, *names = path.strip().split(".")
        if part not in params or not names:
            raise SystemExit(f"--set {item!r}: expected kg.FIELD=, ppr.FIELD=, ppr.kg.FIELD= or mix.FIELD=")
        touched.add(part)
        if len(names) == 2 and names[0] == "kg" and part == "ppr":
            params["ppr"] = replace(params["ppr"], kg=replace(params["ppr"].kg, **{names[1]: _value(raw)}))
            continue
        if len(names) == 2 and names[0] == "chains" and part == "ppr":
            chains = params["ppr"].chains or ChainParams()
            params["ppr"] = replace(params["ppr"], chains=replace(chains, **{names[1]: _value(raw)}))
            continue
        if names == ["chains"] and part == "ppr" and _value(raw) is None:
            params["ppr"] = replace(params["ppr"], chains=None)  # --set ppr.chains=null: the walk's own ranking
            continue
        known = {f.name for f in fields(params[part])}
        if names[0] not in known:
            raise SystemExit(f"--set {item!r}: {part} has no parameter {names[0]!r}")
        params[part] = replace(params[part], **{names[0]: _value(raw)})
    return {f"{part}_params": params[part] for part in touched}


def run_dataset(dataset: Path, modes: list[str], args: argparse.Namespace, overrides: dict[str, Any]
                ) -> dict[str, dict[str, float]]:
    corpus, questions = load(dataset)
    if args.split != "all":
        questions = [q for q in questions if split_of(q.text) == args.split]
    if args.limit:
        questions = questions[:args.limit]
    data_dir = args.data_dir / f"{dataset.name}-{args.embedding}"
    settings_overrides = {} if args.vector_weight is None else {"vector_similarity_weight": args.vector_weight}
    settings = load_settings(data_dir=data_dir, embedding_provider=args.embedding, similarity_threshold=0.0,
                             **settings_overrides)
    out: dict[str, dict[str, float]] = {}
    with Engine.open(settings) as engine:
        index_s = build_index(engine, corpus, data_dir, args.json)
        for mode in modes:
            metrics, rankings = evaluate(engine, questions, mode, overrides)
            if args.dump is not None:
                args.dump.mkdir(parents=True, exist_ok=True)
                (args.dump / f"{dataset.name}-{mode}.json").write_text(json.dumps(
                    [{"question": q.text, "gold": sorted(q.gold), "hops": q.hops, "ranked": r}
                     for q, r in zip(questions, rankings)], ensure_ascii=False))
            out[mode] = {**metrics, "index_s": round(index_s, 1), "questions": len(questions),
                         "passages": len(corpus)}
            if not args.json:
                print(f"{dataset.name} {mode:6s} " + "  ".join(f"{k} {v}" for k, v in metrics.items()),
                      file=sys.stderr)
    return out


COLUMNS = ("recall@2", "recall@5", "all_recall@5", "precision@5", "hits@1", "mh_recall@5", "mh_all@5")


def table(results: dict[str, dict[str, dict[str, float]]], embedding: str) -> str:
    lines = [f"embedding {embedding}; mh_* = multi-hop questions only", "",
             "| set (questions / multi-hop / passages) | mode | " + " | ".join(COLUMNS) + " | query_ms |",
             "|---|---|" + "---|" * (len(COLUMNS) + 1)]
    for name, per_mode in results.items():
        for mode, m in per_mode.items():
            label = f"{name} ({m['questions']} / {m['multi_hop']} / {m['passages']})"
            lines.append(f"| {label} | {mode} | " + " | ".join(f"{m[c]:.3f}" for c in COLUMNS)
                         + f" | {m['query_ms']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", type=Path, nargs="*", help="dataset folders (default: the whole suite)")
    parser.add_argument("--modes", default="naive,kg,ppr,mix")
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions (the corpus stays whole)")
    parser.add_argument("--split", choices=["all", "dev", "heldout"], default="all",
                        help="every question, or the dev / held-out half of each set (split_of)")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write each set's and mode's rankings per question to DIR/<set>-<mode>.json")
    parser.add_argument("--json", action="store_true", help="print only the metrics as one JSON object")
    parser.add_argument("--embedding", choices=["local", "hash"], default="local")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/kbgraph-eval"),
                        help="root of the cached indexes (one folder per dataset and embedder)")
    parser.add_argument("--vector-weight", type=float, default=None,
                        help="vector_similarity_weight of the naive part (default: the embedder's own, EMBEDDER_VECTOR_WEIGHT)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="PART.FIELD=VALUE",
                        help="override a retrieval parameter (kg., ppr., ppr.kg., mix.)")
    args = parser.parse_args(argv)

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES or m == "global"]
    if unknown:
        parser.error(f"unknown or unsupported mode(s) {unknown}; choose from naive, kg, ppr, mix")
    datasets = args.datasets or suite()
    if not datasets:
        parser.error("no dataset given and none found for the suite")
    overrides = parameter_overrides(args.overrides)
    results = {d.name: run_dataset(d, modes, args, overrides) for d in datasets}
    if args.json:
        print(json.dumps(results))
    else:
        print("\n" + table(results, args.embedding))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
