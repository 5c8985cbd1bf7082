"""The model-fault drill: a real ``kbgraph-worker`` talks to the model through a proxy that turns 30%
of the chat requests into faults (HTTP 500, 429, dropped connections, cut-off replies, garbage text).
Documents that end failed or partial are parsed again, as a user would; the final graph must hold
the entities and relations of a run with no faults and no garbage anywhere."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REDIS_URL, scratch_redis_prefix
from kbgraph.engine import Engine
from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.meta import FINISHED, GraphConfig, MetaDB
from support.fault_proxy import FAULTS, GARBAGE, FaultProxy
from support.graph_model import GraphModel
from support.graphs import graph_by_names
from support.processes import Worker
from support.scripted_llm import ScriptedLLM
from task_executor.celery_app import make_celery
from task_executor.submit import enqueue_documents

pytestmark = [pytest.mark.services, pytest.mark.slow]

TENANT = "faults"
FILES = ["mira_castell.md", "lumen_cartographers_guild.md", "glass_tower.md", "salt_war.md"]
GRAPH = GraphConfig(enabled=True, method="light", community=False, max_gleanings=0)
COMMON = {"store": "sqlite", "embedding_provider": "hash", "embedding_dim": 64, "chunk_tokens": 96,
          "chunk_overlap": 8, "summary_max_tokens": 24, "llm_max_retries": 3, "graph_refresh_delay": 0.3}


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    with scratch_redis_prefix() as prefix:
        yield prefix


def _clean_run(llm: ScriptedLLM, data_dir: Path) -> tuple:
    settings = llm.settings(load_settings(data_dir=data_dir, **COMMON))
    with Engine.open(settings, tenant=TENANT) as engine:
        engine.create_kb("clean", graph=GRAPH)
        # with the refresh: its summary pass is where summaries of the clean run are written
        report = engine.index_paths("clean", [SAMPLE_CORPUS_DIR / f for f in FILES])
        assert all(d.status == "indexed" for d in report.documents), report.documents
        kb_id = engine.kb("clean").id
        names = {d.id: d.name for d in engine.list_documents("clean")}
    return graph_by_names(settings, TENANT, kb_id, names)


def _parse_until_done(settings: Settings, meta: MetaDB, kb_id: str, doc_ids: list[str], rounds: int) -> int:
    """Parse the documents, then again those that ended failed or partial; returns the rounds used."""
    app = make_celery(settings)
    try:
        todo = list(doc_ids)
        for number in range(1, rounds + 1):
            enqueue_documents(settings, TENANT, kb_id, todo, meta=meta, app=app)
            deadline = time.monotonic() + 120
            while any(meta.list_tasks(kb_id, doc_id=d, newest_first=True, limit=1)[0].status not in FINISHED
                      for d in todo):
                assert time.monotonic() < deadline, "a parse did not finish within two minutes"
                time.sleep(0.1)
            todo = [d for d in todo if meta.get_document(kb_id, d).status != "done"]
            if not todo:
                return number
        raise AssertionError(f"still not done after {rounds} rounds: "
                             f"{[(d, meta.get_document(kb_id, d).error) for d in todo]}")
    finally:
        app.close_process_state()


def test_thirty_percent_model_faults_end_in_the_clean_graph(tmp_path: Path, redis_prefix: str) -> None:
    with ScriptedLLM(responder=GraphModel()) as llm, FaultProxy(llm.base_url, rate=0.3) as proxy:
        clean = _clean_run(llm, tmp_path / "clean")

        # entities and relations are compared: the KB phases (PageRank, communities) are held off
        settings = load_settings(data_dir=tmp_path / "faulty", redis_url=REDIS_URL, redis_prefix=redis_prefix,
                                 llm_base_url=proxy.base_url, llm_model="scripted", llm_api_key="test-key",
                                 **{**COMMON, "graph_refresh_delay": 3600.0})
        settings.data_dir.mkdir(parents=True)
        with MetaDB.open(settings.meta_url) as meta, Worker(settings, tmp_path / "worker.log") as worker:
            meta.ensure_tenant(TENANT)
            kb = meta.create_kb(TENANT, "faulty", embedding_model="hash-64", chunk_tokens=96, chunk_overlap=8,
                                graph=GRAPH)
            names = {}
            for file in FILES:
                doc, _ = meta.upsert_document(kb.id, file, str(SAMPLE_CORPUS_DIR / file),
                                              (SAMPLE_CORPUS_DIR / file).stat().st_size)
                names[doc.id] = file
            rounds = _parse_until_done(settings, meta, kb.id, list(names), rounds=8)
            assert worker.alive(), worker.output()
        faulty = graph_by_names(settings, TENANT, kb.id, names)

    assert set(proxy.injected) == set(FAULTS), proxy.injected  # every kind of fault happened
    assert sum(proxy.injected.values()) >= 0.2 * (sum(proxy.injected.values()) + proxy.forwarded)
    # the same entities (names, types, documents) and relations (pairs, weights, documents), and no
    # garbage in any description. Descriptions themselves are not compared: a clean run can leave a
    # long one as its stand-in where a rerun summarizes it (the summary pass's business, not faults')
    assert clean[0] and _structure(faulty) == _structure(clean), f"after {rounds} round(s)"
    descriptions = [d for _, fragments, _ in faulty[0].values() for d in fragments]
    descriptions += [d for fragments, _, _ in faulty[1].values() for d in fragments]
    assert not any(GARBAGE in d or "\ufffd" in d for d in descriptions)


def _structure(graph: tuple) -> tuple:
    nodes, edges = graph
    return ({name: (kind, docs) for name, (kind, _, docs) in nodes.items()},
            {pair: (weight, docs) for pair, (_, weight, docs) in edges.items()})
