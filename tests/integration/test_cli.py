"""The `kbgraph` command as a user runs it: real processes, real files, the embedded store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import networkx as nx
import pytest

from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.store.records import chunk_id

KBGRAPH = [sys.executable, "-m", "kbgraph.cli"]
SAMPLE_DOCS = len(list(SAMPLE_CORPUS_DIR.iterdir()))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KBGRAPH_")}
    clean.update(KBGRAPH_DATA_DIR=str(tmp_path / "data"), KBGRAPH_EMBEDDING_PROVIDER="hash",
                 KBGRAPH_EMBEDDING_DIM="64")
    return clean


def run(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([*KBGRAPH, *args], env=env, capture_output=True, text=True, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"kbgraph {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def test_index_query_graph_and_remove(env: dict[str, str], tmp_path: Path) -> None:
    run(env, "kb", "create", "lore", "--graph", "nlp", "--community")
    indexed = run(env, "index", str(SAMPLE_CORPUS_DIR), "--kb", "lore")
    assert f"{SAMPLE_DOCS} indexed, 0 unchanged, 0 failed" in indexed.stdout
    again = run(env, "index", str(SAMPLE_CORPUS_DIR), "--kb", "lore")
    assert f"0 indexed, {SAMPLE_DOCS} unchanged" in again.stdout

    answer = json.loads(run(env, "query", "Who founded the Lumen Cartographers Guild?", "--kb", "lore", "--json").stdout)
    assert answer["mode"] == "mix"  # the default with a graph
    assert answer["chunks"] and answer["chunks"][0]["score"] >= answer["chunks"][-1]["score"]
    assert {"chunk_id", "doc_name", "content", "score", "similarity", "vector_similarity", "term_similarity"} <= set(answer["chunks"][0])
    assert answer["entities"] and answer["citations"]
    naive = json.loads(run(env, "query", "Who founded the Lumen Cartographers Guild?", "--kb", "lore", "--json",
                           "--mode", "naive", "--top-k", "3").stdout)
    assert naive["mode"] == "naive" and 0 < len(naive["chunks"]) <= 3 and not naive["entities"]
    assert all(c["similarity"] >= 0.2 for c in naive["chunks"])  # the default threshold

    stats = json.loads(run(env, "graph", "stats", "--kb", "lore", "--json").stdout)
    assert stats["entities"] > 20 and stats["relations"] > 20 and stats["reports"] > 0
    assert not stats["phases"]["pagerank"]["stale"]
    shown = json.loads(run(env, "graph", "show", "Mira Castell", "--kb", "lore", "--json").stdout)
    assert shown["name"] == "Mira Castell" and shown["neighbours"] and "mira_castell.md" in shown["documents"].values()

    graphml = tmp_path / "lore.graphml"
    run(env, "graph", "export", "--kb", "lore", "--format", "graphml", "-o", str(graphml))
    graph = nx.read_graphml(graphml)
    assert graph.number_of_nodes() == stats["entities"] and graph.number_of_edges() == stats["relations"]
    exported = json.loads(run(env, "graph", "export", "--kb", "lore", "--format", "json").stdout)
    assert len(exported["nodes"]) == stats["entities"]

    run(env, "docs", "rm", "mira_castell.md", "--kb", "lore")
    listed = json.loads(run(env, "docs", "list", "--kb", "lore", "--json").stdout)
    assert len(listed) == SAMPLE_DOCS - 1 and all(d["name"] != "mira_castell.md" for d in listed)
    hits = json.loads(run(env, "query", "Mira Castell mapmaker Duskmoor", "--kb", "lore", "--json", check=False).stdout)
    assert all(c["doc_name"] != "mira_castell.md" for c in hits["chunks"])


def test_errors_are_clear_and_exit_codes_mean_something(env: dict[str, str], tmp_path: Path) -> None:
    missing = run(env, "query", "anything", "--kb", "nope", check=False)
    assert missing.returncode == 2 and "no knowledge base named 'nope'" in missing.stderr
    no_file = run(env, "index", str(tmp_path / "absent.txt"), "--kb", "nope", check=False)
    assert no_file.returncode == 2 and "does not exist" in no_file.stderr
    assert "nope" not in run(env, "kb", "list").stdout  # nothing created for a failed command
    single = tmp_path / "note.txt"
    single.write_text("Marley was dead: to begin with.")
    created = run(env, "index", str(single), "--kb", "fresh")
    assert "created knowledge base 'fresh'" in created.stderr and "1 indexed" in created.stdout
    run(env, "kb", "create", "docs")
    duplicate = run(env, "kb", "create", "docs", check=False)
    assert duplicate.returncode == 2 and "already exists" in duplicate.stderr
    llm_needed = run(env, "kb", "create", "smart", "--graph", "general", check=False)
    assert llm_needed.returncode == 2 and "KBGRAPH_LLM_BASE_URL" in llm_needed.stderr

    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "good.md").write_text("# Harbor\nThe harbor of Varrow opens at dawn.")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7 this is not really a pdf")
    (folder / "empty.txt").write_text("")
    result = run(env, "index", str(folder), "--kb", "docs", check=False)
    assert result.returncode == 1
    assert "1 indexed" in result.stdout and "2 failed" in result.stdout
    assert "broken.pdf" in result.stderr and "empty.txt" in result.stderr
    statuses = {d["name"]: d for d in json.loads(run(env, "docs", "list", "--kb", "docs", "--json").stdout)}
    assert statuses["good.md"]["status"] == "done"
    assert statuses["broken.pdf"]["status"] == "failed" and statuses["broken.pdf"]["error"]


def _chunk_rows(data_dir: Path) -> tuple[list[tuple[str, str, int]], dict]:
    from kbgraph.config import load_settings
    from kbgraph.store.base import missing
    from kbgraph.store.sqlite import SQLiteStore

    store = SQLiteStore(load_settings(data_dir=data_dir).sqlite_store_path)
    try:
        from kbgraph.meta.repo import MetaDB

        meta = MetaDB.open(load_settings(data_dir=data_dir).meta_url)
        kb = meta.get_kb_by_name("default", "big")
        rows = [(d["id"], d["doc_id"], d["position_int"]) for d in
                store.scan("default", [kb.id], [missing("knowledge_graph_kwd")], fields=["doc_id", "position_int"])]
        docs = {d.id: d for d in meta.list_documents(kb.id, limit=None)}
        meta.close()
        return rows, docs
    finally:
        store.close()


def test_killed_indexing_resumes_without_duplicates(env: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "big"
    folder.mkdir()
    paragraph = ("The harbor masters of Varrow kept ledgers of every ship, its cargo, its captain and its crew. "
                 "Each ledger was copied twice and sent to the Glass Tower for safekeeping. ")
    # enough documents that indexing cannot finish between two polls, however fast it gets
    total = 120
    for n in range(total):
        (folder / f"ledger_{n:03d}.txt").write_text(f"Ledger {n}. " + paragraph * 60)
    run(env, "kb", "create", "big", "--graph", "nlp", "--chunk-tokens", "128", "--chunk-overlap", "16")
    # one document per batch, so documents finish one after another and the kill lands between them
    proc = subprocess.Popen([*KBGRAPH, "index", str(folder), "--kb", "big"],
                            env={**env, "KBGRAPH_INDEX_BATCH_DOCUMENTS": "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data_dir = Path(env["KBGRAPH_DATA_DIR"])
    deadline = time.time() + 120
    while time.time() < deadline:  # kill it once some documents are done and others are not
        time.sleep(0.1)
        done = [d for d in _chunk_rows(data_dir)[1].values() if d.status == "done"]
        if len(done) >= 5:
            break
    assert proc.poll() is None, "indexing finished before it could be killed; make the corpus bigger"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows, docs = _chunk_rows(data_dir)
    assert 5 <= sum(d.status == "done" for d in docs.values()) < total

    resumed = run(env, "index", str(folder), "--kb", "big")
    assert "0 failed" in resumed.stdout
    rows, docs = _chunk_rows(data_dir)
    assert len(docs) == total and all(d.status == "done" for d in docs.values())
    assert len(rows) == len({r[0] for r in rows}) == sum(d.chunk_count for d in docs.values())
    for doc_id, doc in docs.items():
        ids = {r[0] for r in rows if r[1] == doc_id}
        assert ids == {chunk_id(doc_id, i) for i in range(doc.chunk_count)}


def test_demo_indexes_the_sample_corpus_and_answers(env: dict[str, str]) -> None:
    first = run(env, "demo")
    assert f"indexed {SAMPLE_CORPUS_DIR}: {SAMPLE_DOCS} new" in first.stdout
    assert "mode: mix" in first.stdout and "lumen_cartographers_guild.md" in first.stdout
    second = run(env, "demo", "Who built the Kestrel Observatory?")
    assert f"0 new, {SAMPLE_DOCS} unchanged" in second.stdout and "kestrel_observatory.html" in second.stdout
