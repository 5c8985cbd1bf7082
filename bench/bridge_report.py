"""What the nlp graph offers a set's multi-hop questions: the question's entities, the entities its
gold passages share (the bridge a chain could follow), and, with ``--chains``, where ppr's chains went
instead for the questions whose gold passages ppr leaves out of its first five.

    python bench/bridge_report.py DATASET_DIR [--chains --data-dir DIR --embedding hash|local] [--limit N]

DATASET_DIR is a set of bench/eval_retrieval.py (corpus.jsonl, questions.jsonl). Passages are read
as eval_retrieval indexes them (``title + "\\n" + text``), each through the nlp extractor alone;
``(n)`` after an entity is the number of passages citing it. ``--chains`` opens the index
eval_retrieval cached under ``--data-dir`` for that set and embedder (run eval_retrieval first) and
asks naive and ppr again: for each multi-hop question ppr misses, the question's entities as the
query analysis read them, the walk's top entities, each passage ppr put in its first five that naive
had not (with the entities it shares with naive's first five: the likely chain) and the missed gold
passages' entities.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [p for p in (str(HERE.parent), str(HERE)) if p not in sys.path]

from kbgraph.graph.extract.nlp.extractor import NLPExtractor  # noqa: E402
from kbgraph.graph.keys import normalize_key  # noqa: E402


def passage_entities(corpus: list[dict]) -> dict[str, set[str]]:
    ex = NLPExtractor()
    return {c["id"]: {normalize_key(e.name) for e in ex.extract(f"{c['title']}\n{c['text']}").entities} for c in corpus}


def bridges(dataset: Path, limit: int = 0) -> tuple[list[str], dict]:
    import eval_retrieval as ev
    corpus, questions = ev.load(dataset)
    rows = ev._jsonl(dataset / "questions.jsonl")
    keys = passage_entities(corpus)
    df = Counter(k for ks in keys.values() for k in ks)
    ex = NLPExtractor()
    lines, n, shared, rare, named = [], 0, 0, 0, 0
    for q, row in list(zip(questions, rows))[: limit or None]:
        if q.hops < 2:
            continue
        n += 1
        gold = [g for g in row["gold_passage_ids"]]
        common = set.intersection(*(keys[g] for g in gold)) if gold else set()
        qk = {normalize_key(e.name) for e in ex.extract(q.text).entities}
        in_gold = qk & set().union(*(keys[g] for g in gold))
        shared += bool(common)
        rare += any(df[k] <= 5 for k in common)
        named += bool(in_gold)
        lines.append(f"{row.get('id', '?')} {q.text}\n  question entities {sorted(qk)}; in a gold passage {sorted(in_gold)}"
                     f"\n  shared by the gold passages: " + ", ".join(f"{k} ({df[k]})" for k in sorted(common, key=df.get)))
    summary = {"multi_hop": n, "gold_share_an_entity": shared, "gold_share_one_cited_5_or_fewer": rare,
               "question_entity_in_gold": named, "passages": len(corpus),
               "most_cited": df.most_common(15)}
    return lines, summary


def chains(dataset: Path, data_dir: Path, embedding: str, limit: int = 0) -> list[str]:
    import eval_retrieval as ev
    from kbgraph.config import load_settings
    from kbgraph.engine import Engine
    from kbgraph.search.retrieve import retrieve
    corpus, questions = ev.load(dataset)
    rows = ev._jsonl(dataset / "questions.jsonl")
    keys = passage_entities(corpus)
    out: list[str] = []
    index = data_dir / f"{dataset.name}-{embedding}"
    if not (index / "eval_index.json").exists():
        raise SystemExit(f"no index of {dataset.name} under {index}: run bench/eval_retrieval.py {dataset} "
                         f"--embedding {embedding} --data-dir {data_dir} first")
    settings = load_settings(data_dir=index, embedding_provider=embedding,
                             similarity_threshold=0.0)
    with Engine.open(settings) as engine:
        kb = engine.kb(ev.KB_NAME)

        def ask(text: str, mode: str):  # type: ignore[no-untyped-def]
            return retrieve(engine.store, engine.tenant, [kb.id], text, mode, embedder=engine.embedder, chat=None,
                            settings=engine.settings, top_n=ev.TOP, entity_types=kb.graph.entity_types)
        for q, row in list(zip(questions, rows))[: limit or None]:
            if q.hops < 2:
                continue
            naive = ev.passages_of(ask(q.text, "naive"))[:5]
            result = ask(q.text, "ppr")
            ppr = ev.passages_of(result)[:5]
            if q.gold <= set(ppr):
                continue
            out.append(f"{row.get('id', '?')} {q.text}\n  gold {sorted(q.gold)}\n  naive {naive}\n  ppr   {ppr}")
            out.append(f"  question entities: {result.analysis.entities if result.analysis else []}")
            out.append("  walk's top entities: " + ", ".join(f"{e.name} [{e.type}] {e.score:.2f}" for e in result.entities[:8]))
            for pid in ppr:
                if pid not in naive:
                    via = sorted({k for src in naive for k in keys[pid] & keys[src]})
                    out.append(f"  + {pid} ({'gold' if pid in q.gold else 'not gold'}) shares with naive's five: {via[:10]}")
            for g in sorted(q.gold - set(ppr)):
                out.append(f"  - missed {g}: {sorted(keys[g])[:15]}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--chains", action="store_true", help="also ask the cached index where ppr's chains went")
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/kbgraph-eval"))
    ap.add_argument("--embedding", choices=["local", "hash"], default="hash")
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions")
    ap.add_argument("--json", action="store_true", help="print the summary only, as JSON")
    args = ap.parse_args(argv)
    lines, summary = bridges(args.dataset, args.limit)
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
        return 0
    print("\n".join(lines))
    print(json.dumps(summary, ensure_ascii=False))
    if args.chains:
        print("\n".join(chains(args.dataset, args.data_dir, args.embedding, args.limit)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
