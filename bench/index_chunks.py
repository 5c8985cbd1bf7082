"""Chunk indexing throughput: parse + chunk + tokenize + embed + store, on the embedded store.

    python bench/index_chunks.py [FILE] [--embedders hash,local] [--repeat 3]

Prints chunks/s per embedder (best of --repeat runs, each into a fresh store, embedding cache off
so every run embeds for real). FILE: a long plain-text book (A Christmas Carol in our runs).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from kbgraph.config import load_settings
from kbgraph.llm.factory import build_embedder
from kbgraph.parse.readers import read_document
from kbgraph.index.chunks import parse_document
from kbgraph.index.context import KBContext
from kbgraph.store.sqlite import SQLiteStore

DEFAULT_FILE = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "christmas-carol" / "book.txt"


def run_once(path: Path, provider: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=Path(tmp), embedding_provider=provider)
        embedder = build_embedder(settings, cache=False)
        embedder.embed(["warm up"])  # model load is a one-off cost, not throughput
        store = SQLiteStore(settings.sqlite_store_path)
        store.ensure_index("bench")
        ctx = KBContext(store=store, tenant="bench", kb_id="kb", settings=settings, embedder=embedder)
        started = time.perf_counter()
        parsed = read_document(path)
        result = parse_document(ctx, "doc", parsed)
        elapsed = time.perf_counter() - started
        assert store.count("bench", ["kb"]) == result.chunks
        store.close()
        return {"chunks": result.chunks, "tokens": result.tokens, "seconds": round(elapsed, 3),
                "chunks_per_s": round(result.chunks / elapsed, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--embedders", default="hash,local")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    report = {}
    for provider in args.embedders.split(","):
        runs = [run_once(args.file.resolve(), provider) for _ in range(args.repeat)]
        report[provider] = max(runs, key=lambda r: r["chunks_per_s"])
        print(f"{provider:>6}: {report[provider]}", flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
