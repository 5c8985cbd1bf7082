"""Latency of chunks edited by hand (the REST API's chunk add/update/delete/list), engine level.

    python bench/chunk_edit_latency.py [--repeat 20]

Indexes the sample corpus (15 documents) with the graph on (method `nlp`, no LLM), the hash embedder
and the embedded store, then, per round on one document: adds a chunk naming new entities, rewrites
it (its mentions are extracted again and the graph rows they name re-derived), lists the document's
chunks matching a keyword, and deletes the chunk (its mentions leave the graph). Prints the median of
each step. A REST call adds the HTTP round trip and the metadata update to these.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kbgraph.engine import Engine
from kbgraph.config import load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.meta.schemas import GraphConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    settings = load_settings(data_dir=Path(tempfile.mkdtemp()) / "data", embedding_provider="hash",
                             embedding_dim=64, store="sqlite")
    steps: dict[str, list[float]] = {"add": [], "update": [], "keyword list": [], "delete": []}
    with Engine.open(settings) as engine:
        engine.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp"))
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR])
        kb = engine.kb("lore")
        doc = engine.list_documents("lore")[0]
        for i in range(args.repeat):
            started = time.perf_counter()
            chunk = engine.add_chunk(kb, doc, f"Captain Orlan Vey {i} sailed the Glass Tower ferry to Port Halvane.").chunk
            steps["add"].append(time.perf_counter() - started)
            assert chunk is not None
            current = engine.get_chunk(kb, chunk.id)
            assert current is not None
            started = time.perf_counter()
            engine.update_chunk(kb, current, content=f"Mira Castell {i} met Tobias Wren in Hollin Ford.")
            steps["update"].append(time.perf_counter() - started)
            started = time.perf_counter()
            engine.chunk_page(kb, doc.id, keywords="Mira")
            steps["keyword list"].append(time.perf_counter() - started)
            started = time.perf_counter()
            engine.delete_chunks(kb, doc, [chunk.id])
            steps["delete"].append(time.perf_counter() - started)
    print(" | ".join(f"{name} median {statistics.median(times) * 1000:.1f} ms" for name, times in steps.items()))


if __name__ == "__main__":
    main()
