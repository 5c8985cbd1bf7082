"""The benchmark scripts still run: each on a small input, as a user would start it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

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
        # every mode times questions no mode asked before it (a question asked again finds its reads cached)
        assert result[mode]["asked_before"] == 0
    assert result["machine"]["walk_step_ms"] > 0  # the reference the p50s of different days are compared through


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
        assert all(result[mode]["first_asked"][store] > 0 for store in ("es", "sqlite"))  # the warm-up pass
    assert set(result["met"]) == {"index", "naive", "kg", "ppr", "mix", "rm"}
    shape = result["index_after_queries"]  # what the queries' kNN searches walked
    assert shape["live"] > 0 and shape["segments"] >= 1 and 0 <= shape["dead_share"] < 1
    assert "ratio" in answer.stdout and "target" in answer.stdout
    local_node = shutil.which("jcmd") and urlsplit(url or "").hostname in ("127.0.0.1", "localhost")
    if local_node:  # the node's JIT compile time during the index (a fresh node compiles for minutes)
        assert result["node"]["index"]["jit_s"] >= 0 and "jit_s" in answer.stdout


def _tiny_kag_corpus(folder: Path) -> Path:
    """The bundled sample corpus in the KAG form the bench scripts read (corpus.jsonl, questions.jsonl)."""
    from kbgraph.data import SAMPLE_CORPUS_DIR, SAMPLE_QUESTIONS

    folder.mkdir(parents=True)
    files = sorted(p for p in SAMPLE_CORPUS_DIR.iterdir() if p.is_file() and not p.name.startswith("_"))
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for n, path in enumerate(files[:8]):
            out.write(json.dumps({"id": f"s{n:03d}", "title": path.stem, "text": path.read_text(encoding="utf-8")}) + "\n")
    with open(folder / "questions.jsonl", "w", encoding="utf-8") as out:
        for q in json.loads(SAMPLE_QUESTIONS.read_text(encoding="utf-8"))[:4]:
            out.write(json.dumps({"question": q["question"]}) + "\n")
    return folder


@pytest.mark.cluster
def test_capacity_measures_a_cluster_and_checks_the_model(es_cluster: EsCluster, tmp_path: Path):
    """bench/capacity.py on the 3-node cluster with the sample corpus; a model no run can meet is
    reported as off and the script exits 1."""
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"tolerance": 1.01, "per_node": {"docs_per_s_per_node": 1e6,
                                                                  "disk_gb_per_million_chunks": 1e-6}}))
    figures = tmp_path / "figures.json"
    env = {**os.environ, "KBGRAPH_ES_URL": es_cluster.url}
    answer = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "capacity.py"), "--corpus", str(_tiny_kag_corpus(tmp_path / "corpus")),
         "--limit", "8", "--workers", "1,2", "--clients", "2", "--seconds", "5", "--rows", "500",
         "--workdir", str(tmp_path / "work"), "--model", str(model), "--json", str(figures)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert answer.returncode == 1, answer.stderr[-3000:]
    assert "docs_per_s_per_node" in answer.stdout and "OFF" in answer.stdout
    result = json.loads(figures.read_text())
    assert result["cluster"]["nodes"] == 3
    assert [run["workers"] for run in result["indexing"]] == [1, 2]
    assert all(run["documents"] == 8 and run["failed"] == 0 and run["docs_per_s"] > 0 for run in result["indexing"])
    assert all(result["queries"][mode]["n"] > 0 for mode in ("naive", "kg", "ppr", "mix"))
    for kind in ("chunk", "entity", "mention"):
        size = result["size"][kind]
        assert size["docs"] == 500 and 0 <= size["vector_bytes"] < size["primary_bytes"]
        assert (size["vector_bytes"] > 0) == (kind != "mention")
        assert size["total_bytes"] == 2 * size["primary_bytes"]  # one replica


def test_embedded_scale_builds_a_synthetic_kb_and_times_it(tmp_path: Path):
    figures = tmp_path / "figures.json"
    env = {key: value for key, value in os.environ.items() if not key.startswith("KBGRAPH_")}
    answer = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "embedded_scale.py"), "--data-dir", str(tmp_path / "kb"),
         "--entities", "2000", "--queries", "8", "--warmup", "2", "--cold-runs", "1", "--json", str(figures)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert answer.returncode == 0, answer.stderr[-3000:]
    (result,) = json.loads(figures.read_text())
    assert (result["entities"], result["chunks"]) == (2000, 200) and result["relations"] > 2000
    assert result["disk"]["store_mb"] > 0 and result["disk"]["data_dir_mb"] >= result["disk"]["store_mb"]
    for mode in ("naive", "kg", "ppr", "mix"):
        assert 0 < result["warm"][mode]["p50_ms"] <= result["warm"][mode]["p99_ms"]
    assert result["cold"]["kg"]["wall_s"] > 0 and result["cold"]["mix"]["runs"] == 1


def test_graphbench_report_labels_the_report_scope_from_the_setting() -> None:
    import importlib.util

    from kbgraph.config import load_settings

    spec = importlib.util.spec_from_file_location("graphbench_kbgraph", ROOT / "bench" / "graphbench_kbgraph.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    default = script.report_scope_label(load_settings(None))
    assert "largest connected component" in default and "every connected component" not in default
    every = script.report_scope_label(load_settings(None, report_scope="all", report_min_entities=5))
    assert "every connected component" in every and "5 or more" in every
