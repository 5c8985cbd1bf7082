"""Hybrid chunk search on a dev set at several vector weights, with and without the similarity floor.

    python bench/hybrid_weights.py DATA/musique-kag-train100 [--weights 0.3,0.5,0.7] [--floor 0.7]

Embeds the passages (title + text) and questions once with the local embedder (vectors cached in
/tmp), stores them in a scratch embedded store, and prints dense recall@5 and the share of questions
with all gold passages in the top 5, for BM25 alone, vectors alone and each weight with floor 0 and
the given floor.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from kbgraph.llm.embedders import LocalEmbedder
from kbgraph.parse.tokenize import token_string, tokenize_query
from kbgraph.store.base import SearchRequest, TextQuery, VectorQuery
from kbgraph.store.sqlite import SQLiteStore


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--weights", default="0.3,0.5,0.7")
    ap.add_argument("--floor", type=float, default=LocalEmbedder.similarity_floor)
    args = ap.parse_args()

    corpus, questions = read_jsonl(args.folder / "corpus.jsonl"), read_jsonl(args.folder / "questions.jsonl")
    cache = Path(tempfile.gettempdir()) / f"kbgraph-hybrid-{args.folder.name}.npz"
    if cache.exists():
        held = np.load(cache)
        passages, asked = held["passages"], held["questions"]
    else:
        embedder = LocalEmbedder()
        passages = embedder.embed([f"{p['title']}\n{p['text']}" for p in corpus])
        asked = embedder.embed_query([q["question"] for q in questions])
        np.savez(cache, passages=passages, questions=asked)
    with tempfile.TemporaryDirectory() as scratch:
        store = SQLiteStore(Path(scratch) / "store.db")
        store.ensure_index("t")
        store.upsert("t", "kb", [{"id": p["id"], "content_ltks": token_string(f"{p['title']}\n{p['text']}"),
                                  "q_384_vec": passages[i]} for i, p in enumerate(corpus)])

        def recall(text: bool, vector: bool, weight: float, floor: float) -> str:
            found, whole = [], []
            for q, v in zip(questions, asked):
                request = SearchRequest(
                    kb_ids=["kb"], limit=5, candidates=200, vector_weight=weight,
                    text=TextQuery(tokenize_query(q["question"]), {"content_ltks": 1.0}) if text else None,
                    vector=VectorQuery("q_384_vec", v.tolist(), floor=floor) if vector else None)
                top = {h.id for h in store.search("t", request).hits}
                gold = set(q["gold_passage_ids"])
                found.append(len(gold & top) / len(gold))
                whole.append(gold <= top)
            return f"{np.mean(found):.3f} / {np.mean(whole):.2f}"

        print(f"{args.folder.name}: recall@5 / all gold in the top 5")
        print(f"  BM25 only     {recall(True, False, 0.0, 0.0)}")
        print(f"  vectors only  {recall(False, True, 1.0, 0.0)}")
        for weight in (float(w) for w in args.weights.split(",")):
            print(f"  w {weight}: floor 0 {recall(True, True, weight, 0.0)}, "
                  f"floor {args.floor} {recall(True, True, weight, args.floor)}")
        store.close()


if __name__ == "__main__":
    main()
