"""The worker runs documents through the same bounded pipeline as ``kbgraph index``: a real
``kbgraph-worker`` (prefork, two processes) against the scripted model answering after a delay.

- the chat model's concurrency limit holds for the worker's processes together (kept in Redis), as
  does a server's Retry-After and the per-minute budget (two Redis clients stand for two processes);
- the KB refresh after a batch reports its phases on its own task row, which the web UI shows;
- a graph build over documents parsed while the graph was off (RAGFlow's run_graphrag) extracts
  them concurrently, through IndexRun, with the build's phases as the task's progress.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from conftest import REDIS_URL, scratch_redis_prefix
from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.llm.base import Cancelled
from kbgraph.meta import FINISHED, GraphConfig, MetaDB, Task
from support.graph_model import GraphModel
from support.processes import Worker
from support.scripted_llm import ScriptedLLM
from task_executor.celery_app import KBCelery, make_celery
from task_executor.engines import call_limits
from task_executor.limits import RedisCallLimits
from task_executor.submit import enqueue_documents, enqueue_graph
from task_executor.tasks import REFRESH_SPANS

pytestmark = [pytest.mark.services, pytest.mark.slow]

TENANT = "pipe"
FILES = ["mira_castell.md", "lumen_cartographers_guild.md", "glass_tower.md", "salt_war.md"]
# other documents for the graph build: the model's answers for the first ones are in the LLM cache
LATER_FILES = ["brightwater_trading_company.md", "great_flood_of_varrow.md", "order_of_the_tidewardens.md",
               "guild_registry.md"]
GRAPH = GraphConfig(enabled=True, method="light", community=True, max_gleanings=0)
LIMIT = 3  # chat calls in flight for the whole worker
DELAY = 0.2  # seconds the scripted model takes per chat answer


class SlowModel(GraphModel):
    def __call__(self, request: dict[str, Any]) -> str:
        time.sleep(DELAY)
        return super().__call__(request)


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(responder=SlowModel()) as server:
        yield server


@pytest.fixture(scope="module")
def settings(llm: ScriptedLLM, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with scratch_redis_prefix() as prefix:
        data = tmp_path_factory.mktemp("pipeline") / "data"
        data.mkdir()
        yield llm.settings(load_settings(
            data_dir=data, store="sqlite", embedding_provider="hash", embedding_dim=64, chunk_tokens=96,
            chunk_overlap=8, summary_max_tokens=24, redis_url=REDIS_URL, redis_prefix=prefix,
            llm_concurrency=LIMIT, llm_kb_concurrency=0, graph_refresh_delay=0.2,
            report_min_entities=2, report_scope="all"))  # every community's report from the model: a phase that takes time


@pytest.fixture(scope="module")
def worker(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    with Worker(settings, tmp_path_factory.mktemp("worker") / "worker.log", concurrency=2) as running:
        yield running


@pytest.fixture(scope="module")
def meta(settings: Settings) -> Iterator[MetaDB]:
    with MetaDB.open(settings.meta_url) as db:
        db.ensure_tenant(TENANT)
        yield db


@pytest.fixture(scope="module")
def app(settings: Settings) -> Iterator[KBCelery]:
    celery = make_celery(settings)
    yield celery
    celery.close_process_state()


def _register(meta: MetaDB, kb_id: str, files: list[str] = FILES) -> list[str]:
    ids = []
    for name in files:
        path = SAMPLE_CORPUS_DIR / name
        doc, _ = meta.upsert_document(kb_id, name, str(path), path.stat().st_size)
        ids.append(doc.id)
    return ids


def _watch(read: Callable[[], Task | None], until: Callable[[Task], bool], what: str,
           timeout: float = 120) -> list[tuple[str, float, str]]:
    """Poll a task row until ``until``; every (status, progress, message) it showed on the way."""
    seen: list[tuple[str, float, str]] = []
    deadline = time.monotonic() + timeout
    while True:
        task = read()
        if task is not None:
            state = (task.status, task.progress, task.message or "")
            if not seen or seen[-1] != state:
                seen.append(state)
            if until(task):
                return seen
        assert time.monotonic() < deadline, f"{what} did not finish in {timeout:g} s: {seen[-5:]}"
        time.sleep(0.03)


def _latest(meta: MetaDB, kb_id: str, kind: str) -> Callable[[], Task | None]:
    def read() -> Task | None:
        found = meta.list_tasks(kb_id, kind=kind, newest_first=True, limit=1)
        return found[0] if found else None
    return read


def _all_indexed(meta: MetaDB, kb_id: str, doc_ids: list[str]) -> None:
    deadline = time.monotonic() + 120
    while any(meta.list_tasks(kb_id, doc_id=d, newest_first=True, limit=1)[0].status not in FINISHED
              for d in doc_ids):
        assert time.monotonic() < deadline, "documents not indexed within two minutes"
        time.sleep(0.05)
    assert [meta.get_document(kb_id, d).status for d in doc_ids] == ["done"] * len(doc_ids)


def _watch_refreshes(meta: MetaDB, kb_id: str, doc_ids: list[str]) -> dict[str, list[tuple[str, float, str]]]:
    """Every state of every refresh task row of the KB, from now until the documents are indexed
    and the last refresh has ended."""
    seen: dict[str, list[tuple[str, float, str]]] = {}
    deadline = time.monotonic() + 120
    while True:
        rows = meta.list_tasks(kb_id, kind="refresh", newest_first=True, limit=None)
        for task in rows:
            states = seen.setdefault(task.id, [])
            state = (task.status, task.progress, task.message or "")
            if not states or states[-1] != state:
                states.append(state)
        indexed = all(meta.get_document(kb_id, d).status == "done" for d in doc_ids)
        if indexed and rows and all(t.status in FINISHED for t in rows) and rows[0].finished \
                and time.time() * 1000 - rows[0].finished > 1500:  # no refresh queued after the last
            return seen
        assert time.monotonic() < deadline, f"not indexed and refreshed in two minutes: {seen}"
        time.sleep(0.03)


def test_worker_processes_share_the_limit_and_the_refresh_shows_its_phases(
        llm: ScriptedLLM, settings: Settings, worker: Worker, meta: MetaDB, app: KBCelery) -> None:
    kb = meta.create_kb(TENANT, "shared", embedding_model="hash-64", chunk_tokens=96, chunk_overlap=8, graph=GRAPH)
    doc_ids = _register(meta, kb.id)
    llm.reset()
    enqueue_documents(settings, TENANT, kb.id, doc_ids, meta=meta, app=app)
    refreshes = _watch_refreshes(meta, kb.id, doc_ids)
    # two processes each indexing a document of many chunks: one limit of 3 for both, reached (the
    # refreshes' report calls count against it too)
    assert llm.max_in_flight == LIMIT, (llm.max_in_flight, worker.output()[-3000:])

    # each debounced refresh has its own task row, with its phases as progress; it never goes back,
    # though the reports and the vectors overlap
    assert refreshes
    for states in refreshes.values():
        assert states[-1][0] == "done" and states[-1][1] == 1.0 and "communities" in states[-1][2], states
        progress = [p for status, p, _ in states if status == "running"]
        assert progress == sorted(progress), states
    running = [message for states in refreshes.values() for status, _, message in states if status == "running"]
    # a phase's name and count, not just "running" (how many a poll catches depends on timing)
    assert any(m.split()[0] in REFRESH_SPANS and "/" in m for m in running), refreshes


def test_graph_build_extracts_parsed_documents_concurrently(
        llm: ScriptedLLM, settings: Settings, worker: Worker, meta: MetaDB, app: KBCelery) -> None:
    kb = meta.create_kb(TENANT, "later", embedding_model="hash-64", chunk_tokens=96, chunk_overlap=8,
                        graph=GraphConfig(enabled=False))
    doc_ids = _register(meta, kb.id, LATER_FILES)
    enqueue_documents(settings, TENANT, kb.id, doc_ids, meta=meta, app=app)
    _all_indexed(meta, kb.id, doc_ids)
    chunks = {d: meta.get_document(kb.id, d).chunk_count for d in doc_ids}

    meta.update_kb(TENANT, kb.id, graph=GRAPH)
    llm.reset()
    task = enqueue_graph(settings, TENANT, kb.id, meta=meta, app=app)
    seen = _watch(lambda: meta.get_task(kb.id, task.id), lambda t: t.status in FINISHED, "the graph build")
    assert seen[-1][0] == "done", (seen[-1], worker.output()[-3000:])
    assert f"{len(doc_ids)} document(s) extracted" in seen[-1][2]
    messages = [m for s, _, m in seen if s == "running"]
    assert any(m.startswith("documents ") for m in messages), seen
    # the refresh after the extraction shows its phases too; which of them a poll catches depends on
    # how fast each runs (the summaries now overlap the reports)
    assert any(m.startswith(("summaries ", "embed ", "reports ", "communities ")) for m in messages), seen
    # the chunks of the documents were extracted at once, as many as the limit allows
    assert llm.max_in_flight == LIMIT
    assert sum(1 for r in llm.requests if r["kind"] == "chat") >= sum(chunks.values())
    for doc_id in doc_ids:
        doc = meta.get_document(kb.id, doc_id)
        assert doc.extracted and doc.status == "done" and doc.chunk_count == chunks[doc_id]


# -- the limits' Redis half, two clients standing for two processes --------------------------------

@pytest.fixture
def two_processes() -> Iterator[tuple[RedisCallLimits, RedisCallLimits]]:
    with scratch_redis_prefix() as prefix:
        clients = [redis.Redis.from_url(REDIS_URL) for _ in range(2)]
        yield tuple(RedisCallLimits(c, prefix, lease=30) for c in clients)  # type: ignore[misc]
        for client in clients:
            client.close()


def _never() -> None:
    return None


def test_slots_are_shared_and_a_release_wakes_a_waiter(two_processes: tuple[RedisCallLimits, RedisCallLimits]) -> None:
    first, second = two_processes
    a, b = first.slots("model|m", 2), second.slots("model|m", 2)
    held = [a.acquire(_never), a.acquire(_never)]
    assert b.try_acquire() is None and b.held() == 2

    def give_up() -> None:
        if time.monotonic() > stop_at:
            raise Cancelled("gave up")

    stop_at = time.monotonic() + 0.3
    with pytest.raises(Cancelled):
        b.acquire(give_up)  # both slots are the other process's
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(b.acquire(_never)))
    waiter.start()
    time.sleep(0.1)
    a.release(held.pop())
    waiter.join(timeout=5)
    assert got and b.held() == 2
    # another knowledge base's (another key's) slots are counted apart
    other = second.slots("kb:x|model|m", 1)
    assert other.try_acquire() is not None and other.try_acquire() is None
    b.release(got[0])
    a.release(held.pop())
    assert a.held() == 0


def test_budget_and_retry_after_hold_for_every_process(two_processes: tuple[RedisCallLimits, RedisCallLimits]) -> None:
    first, second = two_processes
    a, b = first.budget("model|m", 2, 0), second.budget("model|m", 2, 0)
    assert a.try_take(0) == 0 and a.try_take(0) == 0
    assert b.try_take(0) > 20  # two requests a minute, both spent by the other process

    tokens_a, tokens_b = first.budget("model|t", 0, 600), second.budget("model|t", 0, 600)
    assert tokens_a.try_take(500) == 0
    tokens_a.spend(100)  # the answer's tokens
    assert tokens_b.try_take(100) == pytest.approx(10, abs=1)  # 600 a minute: 100 more in 10 s

    free_a, free_b = first.budget("model|p", 0, 0), second.budget("model|p", 0, 0)
    assert free_b.try_take(0) == 0
    free_a.pause(2.0)  # a 429 with Retry-After: 2 seen by the first process
    assert 1.5 < free_b.try_take(0) <= 2.0


# a process that takes two slots of a model, says so and waits to be killed
_HOLDER = """
import sys, time, redis
from kbgraph.config import load_settings
from task_executor.engines import call_limits
settings = load_settings(redis_url=sys.argv[1], redis_prefix=sys.argv[2], task_heartbeat=float(sys.argv[3]))
slots = call_limits(redis.Redis.from_url(settings.redis_url), settings).slots("model|m", 3)
held = [slots.acquire(lambda: None) for _ in range(2)]
print("held", flush=True)
time.sleep(600)
"""


def test_a_live_process_keeps_its_slots_and_a_killed_ones_free_themselves() -> None:
    """A call may run longer than the slot's lease (its process extends it every beat), while the
    slots of a process killed in mid-call (kill -9: nothing releases them) free themselves after
    three beats, as its task claims and KB locks do, not minutes later: with the whole limit held
    by a dead worker, every other worker's calls waited."""
    beat = 0.5
    with scratch_redis_prefix() as prefix:
        settings = load_settings(redis_url=REDIS_URL, redis_prefix=prefix, task_heartbeat=beat)
        client = redis.Redis.from_url(REDIS_URL)
        limits = call_limits(client, settings)
        holder = subprocess.Popen([sys.executable, "-c", _HOLDER, REDIS_URL, prefix, str(beat)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            slots = limits.slots("model|m", 3)
            mine = slots.acquire(_never)
            time.sleep(5 * beat)  # over a lease and a half: kept by both processes' keepers
            assert slots.held() == 3, "a live process's slot lapsed while its call still ran"
            slots.release(mine)
            holder.kill()
            holder.wait(10)
            killed_at = time.monotonic()

            def give_up() -> None:
                if time.monotonic() - killed_at > 20 * beat:  # the old fixed lease held them for minutes
                    raise Cancelled("the killed process's slots stayed taken")

            taken = [slots.acquire(give_up) for _ in range(3)]  # the dead process's two among them
            for token in taken:
                slots.release(token)
        finally:
            holder.kill()
            holder.wait(10)
            limits.close()
            client.close()
