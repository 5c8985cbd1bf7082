"""Delete every tenth document of a knowledge base built by bench/graphbench_kbgraph.py, refresh
once, and compare the graph with a rebuild from the remaining mentions (issue 26).

    python bench/graphbench_kbgraph.py --corpus DIR --base-url URL --workdir W --out kb.json
    python bench/delete_tenth_check.py --workdir W --base-url URL

Uses the settings that driver used (the same endpoint and model, so summaries of changed
descriptions come from the same scripted server). Prints the documents deleted, the refresh's
summaries and reports, and every difference ``kbgraph.graph.invariants.check_graph`` finds
(exit status 1 if any).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, required=True, help="the data dir graphbench_kbgraph.py kept")
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", default="gpt-4o-mini")
    ap.add_argument("--embedding-model", default="text-embedding-3-small")
    ap.add_argument("--kb", default="bench")
    ap.add_argument("--every", type=int, default=10, help="delete every N-th document by name")
    a = ap.parse_args(argv)

    from kbgraph.engine import Engine
    from kbgraph.config import load_settings
    from kbgraph.graph.invariants import check_graph

    settings = load_settings(None, data_dir=a.workdir, llm_base_url=a.base_url, llm_api_key="fake",
                             llm_model=a.model, embedding_provider="openai", embedding_model=a.embedding_model)
    with Engine.open(settings) as engine:
        kb = engine.kb(a.kb)
        names = sorted(d.name for d in engine.meta.list_documents(kb.id, limit=None))
        doomed = names[::a.every]
        started = time.perf_counter()
        for name in doomed:
            engine.delete_document(a.kb, name, refresh=False)
        refresh = engine.refresh_graph(a.kb)
        seconds = time.perf_counter() - started
        ctx = engine.context(kb)
        problems = check_graph(engine.store, engine.tenant, kb.id, ctx.describer())
    print(f"deleted {len(doomed)} of {len(names)} documents and refreshed in {seconds:.1f} s: "
          f"{refresh.summarized} summaries, {refresh.reports_generated} reports written")
    for problem in problems[:20]:
        print("  " + problem)
    print(f"{len(problems)} differences from a rebuild")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
