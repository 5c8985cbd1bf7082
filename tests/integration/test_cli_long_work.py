"""What ``kbgraph index`` shows around long work: a note with an estimate before it starts, and
progress through the graph refresh after the documents (PageRank, communities, reports), not only
through the documents themselves. The real command in-process against the scripted model."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kbgraph.cli import main
from kbgraph.data import SAMPLE_CORPUS_DIR
from support.graph_model import GraphModel
from support.scripted_llm import ScriptedLLM

FILES = ["mira_castell.md", "lumen_cartographers_guild.md", "glass_tower.md", "salt_war.md"]


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(responder=GraphModel()) as server:
        yield server


@pytest.fixture
def kbgraph(tmp_path: Path, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    for name in list(os.environ):
        if name.startswith("KBGRAPH_"):
            monkeypatch.delenv(name)
    # one chat call at a time: the estimate (~2 s per call a hosted model takes) passes a minute
    env = {"KBGRAPH_DATA_DIR": str(tmp_path / "data"), "KBGRAPH_EMBEDDING_PROVIDER": "hash",
           "KBGRAPH_EMBEDDING_DIM": "64", "KBGRAPH_LLM_BASE_URL": llm.base_url, "KBGRAPH_LLM_MODEL": "scripted",
           "KBGRAPH_LLM_API_KEY": "k", "KBGRAPH_LLM_CONCURRENCY": "1", "KBGRAPH_REPORT_MIN_ENTITIES": "2"}

    def run(*args: str) -> Result:
        result = CliRunner().invoke(main, list(args), env=env)
        assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
        return result

    return run


def test_index_warns_before_long_work_and_shows_the_refresh(kbgraph: Callable[..., Result], tmp_path: Path,
                                                           llm: ScriptedLLM) -> None:
    folder = tmp_path / "lore"
    folder.mkdir()
    for name in FILES:
        (folder / name).write_bytes((SAMPLE_CORPUS_DIR / name).read_bytes())
    kbgraph("kb", "create", "lore", "--graph", "light", "--community", "--chunk-tokens", "64", "--chunk-overlap", "8",
            "--gleanings", "0")

    indexed = kbgraph("index", str(folder), "--kb", "lore", "--progress")
    note = re.search(r"note: 4 file\(s\), [\d.]+ MB, ~(\d+) chunks, ~(\d+) LLM calls: expect roughly (\d+) minute",
                     indexed.stderr)
    assert note, indexed.stderr
    chunks, calls = int(note.group(1)), int(note.group(2))
    made = llm.counts["chat"]
    assert 0.5 * made <= calls <= 2 * made, (calls, made)  # the estimate is in the right range
    assert note.start() < indexed.stderr.index("documents")  # said before the work starts
    # a bar per phase: the documents (extraction, merges), then the refresh's own phases with their counts
    for phase in ("documents", "extract", "merge", "pagerank", "communities", "reports"):
        assert re.search(rf"\b{phase}:\s+\d+%", indexed.stderr), (phase, indexed.stderr[-2000:])
    reports = re.findall(r"reports:\s+100%\S*\s*\|[^|]*\|\s*(\d+)/(\d+)", indexed.stderr)
    assert reports and reports[-1][0] == reports[-1][1] != "0", indexed.stderr[-2000:]
    assert 4 == indexed.stdout.count("indexed ")

    # unchanged files: nothing to do, no note
    again = kbgraph("index", str(folder), "--kb", "lore")
    assert "note:" not in again.stderr and chunks > 0
