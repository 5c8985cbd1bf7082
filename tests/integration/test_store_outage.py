"""Store outage drills on a real Elasticsearch node this test stops and starts (tests/es_node/es-node.sh
on KBGRAPH_TEST_ES_DRILL_PORT, default 9240; ``stop`` keeps the node's data, ``start`` starts on it).

The node is stopped in the middle of an indexing run (during its merge, and during the graph refresh
after it); with the store down, the commands that need only metadata still answer; once the node is
back, the same ``kbgraph index`` (every file unchanged or failed) finishes what was left, and the
graph then equals a clean build of the same knowledge base: rows (kbgraph/graph/invariants.py) and
phases (tests/support/graph_phases.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ES_TEST_REFRESH_INTERVAL, require_service
from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.engine import Engine
from kbgraph.graph.invariants import ENTITY_FIELDS, RELATION_FIELDS, check_graph, stored_graph
from kbgraph.index.repair import REPAIR_MARK
from kbgraph.meta import GraphConfig
from kbgraph.store.base import StoreError, StoreUnavailable
from kbgraph.utils.progress import Progress
from support.graph_phases import assert_same_phases, phase_products
from support.processes import service_env

pytestmark = [pytest.mark.slow]

ES_NODE = Path(__file__).resolve().parents[1] / "es_node" / "es-node.sh"
DRILL_PORT = int(os.environ.get("KBGRAPH_TEST_ES_DRILL_PORT", "9240"))
KBGRAPH = Path(sys.executable).parent / "kbgraph"


class DrillNode:
    """The drill's own node: started once per module, stopped and started by the tests."""

    def __init__(self, port: int) -> None:
        self.port, self.url = port, f"http://127.0.0.1:{port}"
        self.env = {**os.environ, "KBGRAPH_ES_PORT": str(port)}

    def run(self, *args: str) -> None:
        done = subprocess.run(["bash", str(ES_NODE), *args], env=self.env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"es-node.sh {' '.join(args)}: {done.stderr[-2000:]}"

    def start(self) -> None:
        self.run("start")

    def stop(self) -> None:
        self.run("stop")


@pytest.fixture(scope="module")
def node() -> Iterator[DrillNode]:
    missing = [tool for tool in ("java", "mvn", "javac", "curl") if shutil.which(tool) is None]
    if missing:
        require_service("Elasticsearch drill node", f"{', '.join(missing)} not installed")
    drill = DrillNode(DRILL_PORT)
    drill.start()
    yield drill
    drill.run("stop", "--wipe")


@pytest.fixture
def drill_settings(node: DrillNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for key in list(os.environ):
        if key.startswith("KBGRAPH_") and key != "KBGRAPH_REQUIRE_SERVICES":
            monkeypatch.delenv(key, raising=False)
    node.start()  # a test that failed midway may have left it stopped
    return load_settings(data_dir=tmp_path / "data", embedding_provider="hash", embedding_dim=64,
                         store="elasticsearch", es_url=node.url, es_index_prefix=f"kbgraph_drill_{uuid.uuid4().hex[:8]}_",
                         es_refresh_interval=ES_TEST_REFRESH_INTERVAL, es_request_timeout=10, es_query_timeout=5)


def _corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for path in sorted(SAMPLE_CORPUS_DIR.iterdir()):
        if path.suffix in {".md", ".txt"}:
            shutil.copy(path, folder / path.name)
    return folder


def _stop_at(node: DrillNode, phase: str, when: Callable[[Progress], bool] = lambda e: True) -> Callable[[Progress], None]:
    """A progress callback that stops the node, once, at the first event of ``phase`` that ``when``
    accepts: the run goes on against a store that is gone."""
    stopped: list[bool] = []

    def progress(event: Progress) -> None:
        if not stopped and event.phase == phase and when(event):
            stopped.append(True)
            node.stop()

    return progress


def _kbgraph(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KBGRAPH), *args], env=service_env(settings), capture_output=True, text=True,
                          timeout=300)


def _comparable(settings: Settings, engine: Engine, kb_id: str) -> tuple[Any, ...]:
    graph = stored_graph(engine.store, engine.tenant, kb_id)
    entities = {k: tuple(getattr(e, f) for f in ENTITY_FIELDS) for k, e in graph.entities.items()}
    relations = {k: tuple(getattr(r, f) for f in RELATION_FIELDS) for k, r in graph.relations.items()}
    return entities, relations


def _assert_equals_clean_build(settings: Settings, kb_name: str) -> None:
    """The graph as it stands, then the same knowledge base's graph dropped and built again from its
    documents (the nlp method is deterministic): the two are equal, rows and phases."""
    with Engine.open(settings) as engine:
        kb = engine.kb(kb_name)
        assert REPAIR_MARK not in kb.extra
        assert check_graph(engine.store, engine.tenant, kb.id, engine.context(kb).describer()) == []
        repaired_rows = _comparable(settings, engine, kb.id)
        repaired_phases = phase_products(engine.store, engine.tenant, kb.id)
        engine.clear_graph_for_rebuild(kb_name)
        report = engine.build_graph(kb_name)
        assert report.count("failed") == 0
        engine.store.refresh(engine.tenant)
        assert repaired_rows == _comparable(settings, engine, kb.id)
        assert_same_phases(repaired_phases, phase_products(engine.store, engine.tenant, kb.id))
        assert repaired_phases.pagerank and repaired_phases.reports


@pytest.mark.parametrize("phase", ["pagerank", "communities"])
def test_outage_mid_refresh_is_finished_by_the_next_index_run(node: DrillNode, drill_settings: Settings,
                                                               tmp_path: Path, phase: str) -> None:
    corpus = _corpus(tmp_path)
    with Engine.open(drill_settings) as engine:
        engine.create_kb("drill", graph=GraphConfig(enabled=True, method="nlp", community=True))
        with pytest.raises(StoreUnavailable) as failure:
            engine.index_paths("drill", [corpus], progress=_stop_at(node, phase))
        # the message says what happened and what will finish the work
        message = str(failure.value)
        assert "cannot be reached" in message and "unfinished" in message and "`kbgraph index`" in message
        assert engine.kb("drill").extra[REPAIR_MARK]["state"] in {"phases", "rows"}
        assert all(d.status == "done" for d in engine.list_documents("drill"))

    # the store is down: what needs only the metadata database still works
    listed = _kbgraph(drill_settings, "docs", "list", "--kb", "drill")
    assert listed.returncode == 0, listed.stderr
    assert "salt_war.md" in listed.stdout
    kbs = _kbgraph(drill_settings, "kb", "list")
    assert kbs.returncode == 0 and "drill" in kbs.stdout, kbs.stderr

    node.start()
    again = _kbgraph(drill_settings, "index", str(corpus), "--kb", "drill")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1].startswith("0 indexed,"), again.stdout
    assert "left unfinished are finished now" in again.stderr
    _assert_equals_clean_build(drill_settings, "drill")


class _StopBeforeVersionBump:
    """The engine's real store, which stops the real node right before a merge's graph version is
    written: the merge's rows are all stored, the version that counts them is not. Any other call
    goes straight through."""

    def __init__(self, store: Any, node: DrillNode) -> None:
        self._store, self._node, self.stopped = store, node, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def upsert(self, tenant: str, kb_id: str, docs: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.stopped and any(d.get("knowledge_graph_kwd") == "graph_meta" for d in docs):
            self.stopped = True
            self._node.stop()
        return self._store.upsert(tenant, kb_id, docs, *args, **kwargs)


def test_outage_between_a_merges_rows_and_its_version(node: DrillNode, drill_settings: Settings,
                                                      tmp_path: Path) -> None:
    """The node goes after a merge wrote its rows and before it wrote the graph version counting
    them: graph_meta says every phase is current, yet the rows changed. The documents fail; their
    rerun finds the rows written and changes nothing, so only the metadata database's mark (rows
    were changing) makes the repair recompute the phases."""
    corpus = _corpus(tmp_path)
    later = tmp_path / "later"
    later.mkdir()
    for path in sorted(corpus.iterdir())[::2]:
        path.rename(later / path.name)
    with Engine.open(drill_settings) as engine:
        engine.create_kb("drill", graph=GraphConfig(enabled=True, method="nlp", community=True))
        first = engine.index_paths("drill", [corpus])
        assert first.count("indexed") and first.refresh is not None
        engine._store = _StopBeforeVersionBump(engine._store, node)  # type: ignore[assignment]
        with pytest.raises(StoreUnavailable, match="unfinished"):  # the repair it tried at once
            engine.index_paths("drill", [later])
        assert engine._store.stopped
        failed = [d for d in engine.list_documents("drill") if d.name in {p.name for p in later.iterdir()}]
        assert failed and all(d.status == "failed" for d in failed), [(d.name, d.status, d.error) for d in failed]
        assert any("cannot be reached" in (d.error or "") for d in failed), [d.error for d in failed]
        assert engine.kb("drill").extra[REPAIR_MARK]["state"] == "rows"

    node.start()
    again = _kbgraph(drill_settings, "index", str(corpus), str(later), "--kb", "drill")
    assert again.returncode == 0, again.stderr
    _assert_equals_clean_build(drill_settings, "drill")


@pytest.fixture
def service_drill(drill_settings: Settings) -> Iterator[Settings]:
    from conftest import REDIS_URL, scratch_redis_prefix

    with scratch_redis_prefix() as prefix:
        yield drill_settings.replace(redis_url=REDIS_URL, redis_prefix=prefix, task_heartbeat=1,
                                     graph_refresh_delay=0.5)


def _node_pid(node: DrillNode) -> int:
    return int((ES_NODE.parent / "build" / f"run-{node.port}" / "node.pid").read_text())


def test_service_answers_store_unavailable_quickly_when_down_or_hung(node: DrillNode, service_drill: Settings,
                                                                     tmp_path: Path) -> None:
    import signal
    import time

    from web import create_app

    corpus = _corpus(tmp_path)
    with Engine.open(service_drill) as engine:
        kb = engine.create_kb("drill")
        engine.index_paths("drill", [corpus])
        key = engine.meta.create_api_key("default")[1]
    app = create_app(service_drill)
    client = app.test_client()
    auth = {"Authorization": f"Bearer {key}"}
    ask = {"question": "Who founded the guild?", "dataset_ids": [kb.id]}
    try:
        assert client.post("/api/v1/retrieval", headers=auth, json=ask).get_json()["code"] == 0
        node.stop()  # refused connections: a clear answer at once
        started = time.monotonic()
        body = client.post("/api/v1/retrieval", headers=auth, json=ask).get_json()
        assert body["code"] == 105 and body["message"].startswith("The document store is unavailable"), body
        assert time.monotonic() - started < 5
        assert "9240" not in body["message"] and "kbgraph_" not in body["message"]
        listed = client.get(f"/api/v1/datasets/{kb.id}/documents", headers=auth).get_json()
        assert listed["code"] == 0 and listed["data"]["total"] > 0  # metadata only: still answers
        ready = client.get("/ready")
        assert ready.status_code == 503 and "store" in ready.get_json()["missing"]

        node.start()
        for _ in range(40):  # the client gives a node it saw fail a few seconds' rest
            if client.post("/api/v1/retrieval", headers=auth, json=ask).get_json()["code"] == 0:
                break
            time.sleep(0.5)
        pid = _node_pid(node)
        os.kill(pid, signal.SIGSTOP)  # hung: connections open, nothing answers
        try:
            started = time.monotonic()
            body = client.post("/api/v1/retrieval", headers=auth, json=ask).get_json()
            waited = time.monotonic() - started
        finally:
            os.kill(pid, signal.SIGCONT)
        assert body["code"] == 105 and "unavailable" in body["message"], body
        assert waited < service_drill.es_query_timeout + 5, waited  # es_query_timeout, not es_request_timeout
    finally:
        app.extensions["kbgraph"].close()


def test_a_service_start_finishes_what_an_outage_left(node: DrillNode, service_drill: Settings,
                                                      tmp_path: Path) -> None:
    import time

    import redis

    from support.processes import Worker
    from task_executor.celery_app import QUEUE
    from task_executor.tasks import refresh_pending_key
    from web import create_app

    corpus = _corpus(tmp_path)
    with Engine.open(service_drill) as engine:
        kb = engine.create_kb("drill", graph=GraphConfig(enabled=True, method="nlp", community=True))
        with pytest.raises(StoreUnavailable):
            engine.index_paths("drill", [corpus], progress=_stop_at(node, "communities"))
    node.start()
    app = create_app(service_drill)  # the web server's start queues the refresh (no worker yet)
    app.extensions["kbgraph"].close()
    client = redis.Redis.from_url(service_drill.redis_url)
    queue = service_drill.redis_prefix + QUEUE
    assert client.exists(refresh_pending_key(service_drill.redis_prefix, kb.id)) and client.llen(queue) == 1
    # dropped again: the worker's own start must queue it
    client.delete(refresh_pending_key(service_drill.redis_prefix, kb.id), queue)
    with Worker(service_drill, tmp_path / "worker.log", concurrency=1) as worker:
        deadline = time.monotonic() + 60
        with Engine.open(service_drill) as engine:
            while REPAIR_MARK in engine.kb("drill").extra and time.monotonic() < deadline:
                time.sleep(0.5)
        assert time.monotonic() < deadline, worker.output()
    _assert_equals_clean_build(service_drill, "drill")


def _wait_for_repair(settings: Settings, kb_name: str, worker: Any, seconds: float) -> None:
    import time

    deadline = time.monotonic() + seconds
    with Engine.open(settings) as engine:
        while REPAIR_MARK in engine.kb(kb_name).extra and time.monotonic() < deadline:
            time.sleep(0.5)
    assert time.monotonic() < deadline, worker.output()


def test_the_next_worker_task_of_the_kb_finishes_what_an_outage_left(node: DrillNode, service_drill: Settings,
                                                                     tmp_path: Path) -> None:
    """A worker already running when a `kbgraph index` run met the outage (so its start saw no mark):
    the next task of that knowledge base, even one that fails at once (its file is gone), queues the
    refresh that finishes the phases."""
    import time

    from support.processes import Worker
    from task_executor.submit import enqueue_documents

    corpus = _corpus(tmp_path)
    with Worker(service_drill, tmp_path / "worker.log", concurrency=1) as worker:
        worker.wait_ready()  # its start's repairs are over before the outage marks the knowledge base
        with Engine.open(service_drill) as engine:
            kb = engine.create_kb("drill", graph=GraphConfig(enabled=True, method="nlp", community=True))
            with pytest.raises(StoreUnavailable):
                engine.index_paths("drill", [corpus], progress=_stop_at(node, "communities"))
            node.start()
            time.sleep(3)  # nobody repairs on their own: the worker started before the mark was set
            assert REPAIR_MARK in engine.kb("drill").extra
            doc = next(d for d in engine.list_documents("drill") if d.name == "salt_war.md")
        (corpus / "salt_war.md").unlink()  # the task fails reading its file, before any indexing
        [task] = enqueue_documents(service_drill, "default", kb.id, [doc.id])
        _wait_for_repair(service_drill, "drill", worker, 90)
        with Engine.open(service_drill) as engine:
            assert engine.meta.get_task(kb.id, task.id).status == "failed"
            # a clean build leaves a failed document out, its rows kept by the graph: compare without it
            engine.delete_document("drill", doc.id)
    _assert_equals_clean_build(service_drill, "drill")


def test_a_refresh_the_store_failed_on_a_worker_is_tried_again(node: DrillNode, service_drill: Settings,
                                                               tmp_path: Path) -> None:
    """A refresh a worker runs while the store is down fails, says the store is unavailable and when
    it is tried again, and queues itself: once the node is back, it finishes without anyone asking."""
    import time

    from support.processes import Worker
    from task_executor.submit import celery_for
    from task_executor.tasks import schedule_refresh

    corpus = _corpus(tmp_path)
    with Worker(service_drill, tmp_path / "worker.log", concurrency=1) as worker:
        worker.wait_ready()  # its start's repairs are over before the outage marks the knowledge base
        with Engine.open(service_drill) as engine:
            kb = engine.create_kb("drill", graph=GraphConfig(enabled=True, method="nlp", community=True))
            with pytest.raises(StoreUnavailable):
                engine.index_paths("drill", [corpus], progress=_stop_at(node, "pagerank"))
            schedule_refresh(celery_for(service_drill), "default", kb.id, delay=0)  # unless one waits already
            deadline = time.monotonic() + 60
            failed: list[Any] = []
            while not failed and time.monotonic() < deadline:
                failed = [t for t in engine.meta.list_tasks(kb.id, kind="refresh") if t.status == "failed"]
                time.sleep(0.5)
            assert failed, worker.output()
            assert "unavailable" in failed[0].message and "tried again in" in (failed[0].error or "")
        node.start()
        _wait_for_repair(service_drill, "drill", worker, 90)
    _assert_equals_clean_build(service_drill, "drill")


def test_pages_say_the_store_is_unavailable_and_list_documents_without_it(node: DrillNode, service_drill: Settings,
                                                                         tmp_path: Path) -> None:
    """A signed-in user's pages while the node is down: what reads the store answers 503 with the
    store's message (never an internal error), the documents list (metadata only) still answers."""
    from web import create_app
    from ui.test_accounts import create_kb, sign_up

    app = create_app(service_drill)
    client = app.test_client()
    try:
        sign_up(client, "outage@example.com")
        kb_id = create_kb(client, "outage")
        assert client.get(f"/ui/api/kbs/{kb_id}/graph").status_code == 200
        node.stop()
        graph = client.get(f"/ui/api/kbs/{kb_id}/graph")
        text = graph.get_data(as_text=True)
        assert graph.status_code == 503 and "store is unavailable" in text, text
        assert "Traceback" not in text and "9240" not in text
        listed = client.get(f"/ui/api/kbs/{kb_id}/documents")
        assert listed.status_code == 200, listed.get_data(as_text=True)
        assert client.get(f"/kbs/{kb_id}").status_code == 200
    finally:
        node.start()
        app.extensions["kbgraph"].close()
