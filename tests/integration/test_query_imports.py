"""A `kbgraph query` process loads what answering needs and nothing else (issue 19's cold start).

The time itself is measured in bench/ (bench/cold_query.py); this checks the modules, so that a
query that starts importing the indexing pipeline, scipy or the PostgreSQL dialect again fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kbgraph.engine import Engine
from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.meta.schemas import GraphConfig

# the modules of indexing (parsers, extraction, merging), and packages the query path does without
NOT_ON_THE_QUERY_PATH = ("kbgraph.index", "kbgraph.graph.describe", "scipy",
                         "sqlalchemy.dialects.postgresql")

# runs `kbgraph query` once per mode in one new process, then prints the modules it loaded
QUERY_PROCESS = """
import json, sys
from kbgraph.cli import main
for mode in ("naive", "kg", "ppr", "mix"):
    sys.argv = ["kbgraph", "query", "Who founded the Lumen Cartographers Guild?", "--kb", "lore", "--json",
                "--mode", mode]
    try:
        main()
    except SystemExit as stop:
        assert not stop.code, f"kbgraph query --mode {mode} exited with {stop.code}"
print(json.dumps(sorted(sys.modules)))
"""


def test_a_query_process_does_not_import_the_indexing_pipeline(settings: Settings, tmp_path: Path) -> None:
    settings = settings.replace(store="sqlite")  # the subprocess reads the same embedded store
    with Engine.open(settings) as engine:
        engine.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp"))
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR / "lumen_cartographers_guild.md",
                                    SAMPLE_CORPUS_DIR / "tobias_wren.txt"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBGRAPH_")}
    env.update(KBGRAPH_DATA_DIR=str(settings.data_dir), KBGRAPH_STORE="sqlite")
    done = subprocess.run([sys.executable, "-c", QUERY_PROCESS], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert "kbgraph.search.ppr_search" in loaded and "kbgraph.meta.repo" in loaded  # the query ran
    assert [m for m in loaded if m.split(".")[0] == "scipy" or m in NOT_ON_THE_QUERY_PATH
            or any(m.startswith(p + ".") for p in NOT_ON_THE_QUERY_PATH)] == []
