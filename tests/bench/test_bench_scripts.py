"""The benchmark scripts still run: each on a small input, as a user would start it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.es_cluster import EsCluster

ROOT = Path(__file__).resolve().parents[2]


def test_query_latency_builds_a_small_graph_and_times_every_mode(tmp_path: Path):
    figures = tmp_path / "figures.json"
    answer = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "query_latency.py"), "--data-dir", str(tmp_path / "kb"),
         "--entities", "600", "--relations", "1800", "--chunks", "200", "--queries", "12", "--warmup", "3",
         "--json", str(figures)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert answer.returncode == 0, answer.stderr[-3000:]
    result = json.loads(figures.read_text())
    assert result["kb"]["entities"] == 600 and result["kb"]["relations"] == 1800
    for mode in ("kg", "ppr"):
        assert result[mode]["queries"] == 12
        assert result[mode]["empty_results"] < 12  # the questions name entities the graph holds
        assert 0 < result[mode]["p50_ms"] <= result[mode]["p99_ms"]


@pytest.mark.cluster
def test_tenant_move_moves_a_written_tenant_and_times_it(es_cluster: EsCluster, tmp_path: Path):
    env = {**os.environ, "KBGRAPH_ES_URL": es_cluster.url}
    answer = subprocess.run([sys.executable, str(ROOT / "bench" / "tenant_move.py"), "--rows", "2000", "--shards", "2"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert answer.returncode == 0, answer.stderr[-3000:]
    result = json.loads(answer.stdout.strip().splitlines()[-1])
    assert result["moved_equals_acknowledged"] and result["writes"] > 0 and result["listing_page_rows"] == 10


def test_es_speed_measures_both_stores_side_by_side(tmp_path: Path):
    """bench/es_speed.py (issue 40's speed table) on the bundled sample corpus, two questions."""
    from conftest import require_service

    url = os.environ.get("KBGRAPH_ES_URL")
    if not url:
        require_service("Elasticsearch", "KBGRAPH_ES_URL not set (bash tests/es_node/es-node.sh start)")
    figures = tmp_path / "figures.json"
    env = {key: value for key, value in os.environ.items() if not key.startswith("KBGRAPH_") or key in (
        "KBGRAPH_ES_URL", "KBGRAPH_REQUIRE_SERVICES")}
    answer = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "es_speed.py"), "--corpus", "sample", "--questions", "2",
         "--rm-docs", "1", "--count-requests", "--workdir", str(tmp_path), "--json", str(figures)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert answer.returncode == 0, answer.stderr[-3000:]
    result = json.loads(figures.read_text())
    assert result["files"] >= 10 and result["questions"] == 2
    assert all(seconds > 0 for seconds in result["index_s"]) and all(seconds > 0 for seconds in result["rm_s"][:2])
    for mode in ("naive", "kg", "ppr", "mix"):
        assert result[mode]["n"] == 2
        for store in ("es", "sqlite"):
            p50, p99 = result[mode][store]
            assert 0 < p50 <= p99
        assert result["same_chunks"][mode]["overlap"] > 0.5  # both stores answered, mostly alike
    assert set(result["met"]) == {"index", "naive", "kg", "ppr", "mix", "rm"}
    assert "ratio" in answer.stdout and "target" in answer.stdout
