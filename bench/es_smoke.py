"""Smoke run of kbgraph on a live Elasticsearch: index the sample corpus with the graph on,
query in every mode, delete a document, check the graph invariant, drop the index, print timings.

    KBGRAPH_ES_URL=http://elastic:$ELASTIC_PASSWORD@localhost:9200 python bench/es_smoke.py
    python bench/es_smoke.py --embedded     # the same steps on the embedded store

Uses a throw-away tenant (its own index) and data dir, the hash embedder and no LLM, so it needs
nothing but the cluster. Exit status: 0 ok, 1 a check failed, 2 no cluster configured.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MODES = ("naive", "kg", "ppr", "mix")  # global needs an LLM; this smoke test runs without one
QUESTION = "Who founded the Lumen Cartographers Guild and what did they map?"


@contextmanager
def timed(timings: list[tuple[str, float]], label: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings.append((label, time.perf_counter() - start))


def main() -> int:
    url = os.environ.get("KBGRAPH_ES_URL", "")
    embedded = "--embedded" in sys.argv  # the same steps on the embedded store, to check this script itself
    if not url and not embedded:
        print("es_smoke: set KBGRAPH_ES_URL to a cluster, e.g. "
              "KBGRAPH_ES_URL=http://elastic:$ELASTIC_PASSWORD@localhost:9200 (or pass --embedded)", file=sys.stderr)
        return 2

    from kbgraph.engine import Engine
    from kbgraph.config import load_settings
    from kbgraph.graph.invariants import check_graph
    from kbgraph.meta.schemas import GraphConfig

    corpus = Path(__file__).resolve().parents[1] / "kbgraph" / "data" / "sample_corpus"
    tenant = f"smoke-{uuid.uuid4().hex[:8]}"
    timings: list[tuple[str, float]] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as data_dir:
        engine_settings = {"store": "sqlite"} if embedded else {"store": "elasticsearch", "es_url": url}
        settings = load_settings(data_dir=data_dir, embedding_provider="hash", embedding_dim=64, **engine_settings)
        with timed(timings, "open + ensure index"):
            engine = Engine.open(settings, tenant=tenant)
        try:
            kb = engine.create_kb("smoke", graph=GraphConfig(enabled=True, method="nlp", community=True))
            with timed(timings, f"index {len(list(corpus.iterdir()))} files"):
                engine.index_paths(kb.name, [corpus])
            for mode in MODES:
                with timed(timings, f"query {mode}"):
                    answer = engine.query([kb.name], QUESTION, mode=mode)
                if not answer.chunks:
                    problems.append(f"mode {mode!r} returned nothing")
            docs = engine.list_documents(kb.name)
            victim = docs[0]
            with timed(timings, f"delete {victim.name}"):
                engine.delete_document(kb.name, victim.id)
            ctx = engine.context(engine.kb(kb.name))
            with timed(timings, "check graph invariant"):
                problems += check_graph(engine.store, engine.tenant, kb.id, ctx.describer())
        finally:
            with timed(timings, "drop index"):
                engine.store.drop_index(tenant)
            engine.close()

    width = max(len(label) for label, _ in timings)
    for label, seconds in timings:
        print(f"{label:<{width}}  {seconds:8.3f} s")
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    print("es_smoke: " + ("ok" if not problems else f"{len(problems)} problems"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
