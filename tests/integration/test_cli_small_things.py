"""The small surprises of a user's everyday session (issue 38, item 7), each with the command as a user
runs it: `kb reembed` on the model it has, `apikey list`, `query --mode global`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from integration.test_cli_everyday import kbgraph  # noqa: F401  (the in-process `kbgraph` fixture)

from kbgraph.data import SAMPLE_CORPUS_DIR


def test_reembed_on_the_same_model_re_embeds_nothing(kbgraph) -> None:
    kbgraph("kb", "create", "lore", "--graph", "nlp")
    kbgraph("index", str(SAMPLE_CORPUS_DIR), "--kb", "lore")
    same = kbgraph("kb", "reembed", "lore").stdout
    assert "nothing to re-embed" in same and "hash" in same and "re-embedded" not in same
    forced = kbgraph("kb", "reembed", "lore", "--force").stdout
    assert re.search(r"re-embedded [1-9]\d* rows", forced)
    moved = kbgraph("kb", "reembed", "lore", env={"KBGRAPH_EMBEDDING_DIM": "32"}).stdout
    assert re.search(r"re-embedded [1-9]\d* rows of 'lore': hash-64 -> hash-32", moved), moved


def test_reembed_kb_returns_zero_rows_on_the_same_model(tmp_path: Path) -> None:
    from kbgraph.config import load_settings
    from kbgraph.engine import Engine

    settings = load_settings(None, data_dir=tmp_path / "d", embedding_provider="hash", embedding_dim=64)
    with Engine.open(settings) as engine:
        engine.create_kb("lore")
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR])
        assert engine.reembed_kb("lore") == 0
        assert engine.reembed_kb("lore", force=True) > 0


def test_apikey_list_prints_readable_times(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KBGRAPH_")},
           "KBGRAPH_DATA_DIR": str(tmp_path / "data")}
    created = subprocess.run([sys.executable, "-m", "web.cli", "apikey", "create", "--tenant", "acme", "--name", "ci"],
                             env=env, capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    listed = subprocess.run([sys.executable, "-m", "web.cli", "apikey", "list", "--tenant", "acme"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    line = listed.stdout.strip()
    assert re.search(r"ci  created 20\d\d-\d\d-\d\d \d\d:\d\d:\d\d UTC$", line), line
    assert not re.search(r"\d{13}", line)  # no epoch milliseconds


def test_global_query_prints_its_answer_and_no_nothing_found(kbgraph, scripted_llm) -> None:
    def respond(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if "Key points:" in prompt:  # the reduce step
            return "The Lumen Cartographers Guild was founded by Mira Castell."
        if "Reports:" in prompt:  # the map step
            return json.dumps({"points": [{"description": "Mira Castell founded the guild", "score": 90}]})
        return "{}"

    kbgraph("kb", "create", "lore", "--graph", "nlp", "--community")
    kbgraph("index", str(SAMPLE_CORPUS_DIR), "--kb", "lore")
    scripted_llm.responder = respond
    llm = {"KBGRAPH_LLM_BASE_URL": scripted_llm.base_url, "KBGRAPH_LLM_MODEL": "scripted"}
    answered = kbgraph("query", "Who founded the guild?", "--kb", "lore", "--mode", "global", env=llm)
    assert "founded by Mira Castell" in answered.stdout
    assert "nothing found" not in answered.stdout + answered.stderr
    naive = kbgraph("query", "zzzz qqqq", "--kb", "lore", "--mode", "naive", code=1, env=llm)
    assert "nothing found above the similarity threshold" in naive.stdout  # still said when nothing is found


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("where", ["refused", "unknown host"])
def test_an_unreachable_model_is_reported_at_once_with_its_url_and_setting(kbgraph, tmp_path: Path,
                                                                           where: str) -> None:
    # the default retries (llm_max_retries 4): a model that is not there is not tried again
    url = f"http://127.0.0.1:{_free_port()}/v1" if where == "refused" else "http://no-such-host.invalid/v1"
    note = tmp_path / "note.md"
    note.write_text("Mira Castell founded the Lumen Cartographers Guild in Varrow in 790.\n")
    kbgraph("index", str(note), "--kb", "lore")
    llm = {"KBGRAPH_LLM_BASE_URL": url, "KBGRAPH_LLM_MODEL": "m"}
    failed = kbgraph("chat", "--kb", "lore", "-q", "Who founded the guild?", code=1, env=llm)
    said = failed.stderr
    assert ("connection refused" if where == "refused" else "unknown host") in said, said
    assert url in said and "llm_base_url (KBGRAPH_LLM_BASE_URL)" in said
    assert "gave up after" not in said  # not retried

    embeddings = {"KBGRAPH_EMBEDDING_PROVIDER": "openai", "KBGRAPH_EMBEDDING_MODEL": "e",
                  "KBGRAPH_EMBEDDING_BASE_URL": url}
    failed = kbgraph("index", str(note), "--kb", "other", code=None, env=embeddings)
    said = failed.stdout + failed.stderr
    assert failed.exit_code != 0 and url in said and "embedding_base_url" in said, said
    assert "gave up after" not in said
