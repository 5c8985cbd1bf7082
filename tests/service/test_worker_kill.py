"""Kill drills for the worker: ``kill -9`` of a whole ``kbgraph-worker`` process group (main process
and pool children, nothing gets to clean up) while it extracts and while it merges, then a fresh
worker. Real Redis, real Celery prefork workers, the real openai client against the scripted model.

Each drill checks that the killed worker's model slots free themselves within a few beats (the
model calls it had in flight held them all), that the killed documents are taken up again well
within a minute, that no task ran twice at once or redid what it had finished, and that the graph
equals an uninterrupted run of the same documents.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from conftest import REDIS_URL, scratch_redis_prefix
from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.meta import FINISHED, GraphConfig, MetaDB
from support.graph_model import GraphModel, _last_user
from support.graphs import Graph, graph_by_names
from support.processes import Worker
from support.scripted_llm import ScriptedLLM
from task_executor.celery_app import KBCelery, make_celery
from task_executor.submit import enqueue_documents, run_in_progress

pytestmark = [pytest.mark.services, pytest.mark.slow]

HEARTBEAT = 1.0  # a killed worker's claims, locks and model slots lapse after 3 s
# few model slots for the whole deployment: a kill leaves every one of them held by the dead worker
# (its calls in flight), so the new worker's calls wait until they lapse
LLM_SLOTS = 4
TENANT = "drill"


class KillSwitch:
    """The scripted model's answers (order-independent summaries, so two runs compare), plus a trap:
    the ``nth`` request of a kind runs ``action`` (kill the worker) before it is answered."""

    def __init__(self) -> None:
        self.model = GraphModel()
        self.asked: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.trap: tuple[str, int, Callable[[], None]] | None = None
        self.fired_at: float | None = None
        self.fired = threading.Event()
        self._lock = threading.Lock()

    def arm(self, kind: str, nth: int, action: Callable[[], None]) -> None:
        with self._lock:
            self.kinds.clear()
            self.asked.clear()
            self.trap, self.fired_at = (kind, nth, action), None
            self.fired.clear()

    def __call__(self, request: dict[str, Any]) -> str:
        prompt = _last_user(request)
        kind, answer = self.model._answer(prompt)
        if kind == "summarize":
            fragments = sorted(line[2:] for line in prompt.splitlines() if line.startswith("- "))
            answer = " ".join(fragments)[:400] or "A summary."
        with self._lock:
            self.asked[hashlib.sha256(prompt.encode()).hexdigest()] += 1
            self.kinds[kind] += 1
            fire = self.trap is not None and self.trap[0] == kind and self.kinds[kind] >= self.trap[1]
            action = self.trap[2] if fire and self.trap else None
            if fire:
                self.trap = None
        if action is not None:
            action()
            self.fired_at = time.monotonic()
            self.fired.set()
        return answer


@pytest.fixture(scope="module")
def switch() -> KillSwitch:
    return KillSwitch()


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, switch: KillSwitch) -> Iterator[Settings]:
    with scratch_redis_prefix() as prefix:
        base = load_settings(data_dir=tmp_path_factory.mktemp("drill") / "data", store="sqlite", embedding_provider="hash",
                             embedding_dim=64, redis_url=REDIS_URL, redis_prefix=prefix, task_heartbeat=HEARTBEAT,
                             broker_visibility_timeout=4.0, graph_refresh_delay=0.3, summary_max_tokens=24,
                             llm_max_retries=1, llm_concurrency=LLM_SLOTS)
        with ScriptedLLM(responder=switch) as llm:
            yield llm.settings(base)


@pytest.fixture(scope="module")
def sender(settings: Settings) -> Iterator[KBCelery]:
    app = make_celery(settings)
    yield app
    app.close_process_state()


@pytest.fixture(scope="module")
def meta(settings: Settings) -> Iterator[MetaDB]:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with MetaDB.open(settings.meta_url) as db:
        db.ensure_tenant(TENANT)
        yield db


def _kb_with(meta: MetaDB, name: str, files: list[str]) -> tuple[str, dict[str, str]]:
    kb = meta.create_kb(TENANT, name, embedding_model="hash-64", chunk_tokens=96, chunk_overlap=8,
                        graph=GraphConfig(enabled=True, method="light", community=False, max_gleanings=0))
    names = {}
    for file in files:
        path = SAMPLE_CORPUS_DIR / file
        doc, _ = meta.upsert_document(kb.id, file, str(path), path.stat().st_size)
        names[doc.id] = file
    return kb.id, names


def _held_slots(settings: Settings) -> dict[str, list[tuple[str, int]]]:
    """The chat model's slots held in Redis now: key -> (holder, seconds its lease has left)."""
    client = redis.Redis.from_url(settings.redis_url)
    try:
        now = time.time()
        held = {key.decode(): [(m.decode(), round(score - now))
                               for m, score in client.zrangebyscore(key, now, "+inf", withscores=True)]
                for key in client.scan_iter(match=f"{settings.redis_prefix}llm:slots:*") if client.type(key) == b"zset"}
        return {key: holders for key, holders in held.items() if holders}  # lapsed ones are dropped lazily
    finally:
        client.close()


def _wait_finished(meta: MetaDB, kb_id: str, timeout: float, worker: Worker | None = None,
                   settings: Settings | None = None) -> list[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tasks = meta.list_tasks(kb_id, kind="index")
        if tasks and all(t.status in FINISHED for t in tasks):
            return tasks
        time.sleep(0.1)
    rows = "\n".join(f"  {t.id} {t.status} attempts={t.attempts} progress={t.progress:.2f} {t.message!r} "
                     f"updated {t.updated - t.created} ms after creation" for t in meta.list_tasks(kb_id))
    slots = f"\nthe model's slots (holder, seconds left): {_held_slots(settings)}" if settings is not None else ""
    log = f"\nthe worker's log:\n{worker.output()}" if worker is not None else ""
    raise AssertionError(f"tasks still unfinished after {timeout:g} s:\n{rows}{slots}{log}")


def _graph(settings: Settings, kb_id: str, names: dict[str, str]) -> Graph:
    return graph_by_names(settings, TENANT, kb_id, names)


def _drill(settings: Settings, meta: MetaDB, sender: KBCelery, switch: KillSwitch, tmp_path: Path,
           files: list[str], trap: tuple[str, int]) -> None:
    crashed, names = _kb_with(meta, f"crashed {trap[0]}", files)
    first = Worker(settings, tmp_path / "worker1.log", concurrency=2).start()
    switch.arm(trap[0], trap[1], first.kill9)
    enqueue_documents(settings, TENANT, crashed, list(names), meta=meta, app=sender)
    assert switch.fired.wait(60), f"the trap never fired:\n{first.output()}"
    killed_at = switch.fired_at
    assert not first.alive()
    running = [t for t in meta.list_tasks(crashed, kind="index") if t.status not in FINISHED]
    assert running, "the kill should leave unfinished tasks"
    answered_before = sum(switch.asked.values())
    # the web app refuses a new parse of a document whose run is alive; a killed one's stops
    # counting once its claim lapsed (three beats), so the user is never locked out for long
    orphan = next(t for t in running if t.status == "running")
    assert run_in_progress(sender, meta, crashed, orphan.doc_id)
    deadline = time.monotonic() + 10 * HEARTBEAT
    while run_in_progress(sender, meta, crashed, orphan.doc_id):
        assert time.monotonic() < deadline, "a killed worker's run still counts as in progress"
        time.sleep(0.1)
    # nor do the model slots its calls in flight held stay taken (each worker's calls would wait)
    while held := _held_slots(settings):
        assert time.monotonic() < deadline, f"the killed worker's model slots are still held: {held}"
        time.sleep(0.1)

    with Worker(settings, tmp_path / "worker2.log", concurrency=2) as second:
        tasks = _wait_finished(meta, crashed, 60 - (time.monotonic() - killed_at), second, settings)
        taken_up_after = time.monotonic() - killed_at
        assert all(t.status == "done" for t in tasks), [(t.status, t.error) for t in tasks]
        # started once by the killed worker, once by the new one (a duplicate delivery never ran);
        # a task still queued at the kill, once
        started = {t.id: 2 if t.status == "running" else 1 for t in running}
        assert {t.id: t.attempts for t in tasks if t.id in started} == started, second.output()
        assert 2 in started.values()
        assert all(meta.get_document(crashed, d).status == "done" for d in names)
        crashed_graph = _graph(settings, crashed, names)
        repeated = sum(n - 1 for n in switch.asked.values() if n > 1)
        # answers given before the kill came from the cache afterwards: only requests cut off by
        # the kill (at most the two pool children's concurrent calls) were asked again
        assert repeated <= 2 * settings.llm_concurrency, (repeated, answered_before)

        reference, ref_names = _kb_with(meta, f"uninterrupted {trap[0]}", files)
        enqueue_documents(settings, TENANT, reference, list(ref_names), meta=meta, app=sender)
        assert all(t.status == "done" for t in _wait_finished(meta, reference, 60, second, settings))
    assert crashed_graph[0] and crashed_graph == _graph(settings, reference, ref_names)
    assert taken_up_after < 60


def test_worker_killed_mid_extract(settings: Settings, meta: MetaDB, sender: KBCelery, switch: KillSwitch,
                                   tmp_path: Path) -> None:
    _drill(settings, meta, sender, switch, tmp_path,
           ["mira_castell.md", "lumen_cartographers_guild.md", "salt_war.md", "tobias_wren.txt"], ("extract", 6))


def test_worker_killed_mid_merge(settings: Settings, meta: MetaDB, sender: KBCelery, switch: KillSwitch,
                                 tmp_path: Path) -> None:
    _drill(settings, meta, sender, switch, tmp_path,
           ["glass_tower.md", "great_flood_of_varrow.md", "order_of_the_tidewardens.md"], ("summarize", 1))
