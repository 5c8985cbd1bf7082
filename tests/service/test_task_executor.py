"""The task executor on its own: the Redis KB lock, the per-process engine pool, and the real
``kbgraph-worker`` / ``kbgraph-web`` commands as subprocesses (prefork pool, worker_process_init)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from conftest import REDIS_URL, require_service, store_overrides
from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.meta import FINISHED, MetaDB
from task_executor.celery_app import make_celery
from task_executor.engines import EnginePool
from task_executor.locks import KBLockTimeout, kb_lock_key, redis_kb_lock
from task_executor.submit import enqueue_documents

pytestmark = pytest.mark.services


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        require_service("Redis", f"{REDIS_URL}: {exc}")
    yield client
    client.close()


@pytest.fixture
def prefix(client: redis.Redis) -> Iterator[str]:
    prefix = f"kbgraph_test:{uuid.uuid4().hex[:8]}:"
    yield prefix
    for key in client.scan_iter(match=f"{prefix}*"):
        client.delete(key)


@pytest.fixture
def service_settings(tmp_path: Path, prefix: str) -> Settings:
    # the document store: SQLite, or Elasticsearch when KBGRAPH_ES_URL is set (as in CI)
    return load_settings(data_dir=tmp_path / "data", **store_overrides(), embedding_provider="hash",
                         embedding_dim=64, redis_url=REDIS_URL, redis_prefix=prefix)


def test_kb_lock_serializes_holders_across_clients(client: redis.Redis, prefix: str) -> None:
    # two clients stand for two worker processes
    locks = [redis_kb_lock(redis.Redis.from_url(REDIS_URL), prefix, timeout=5, blocking_timeout=10) for _ in range(2)]
    inside, overlaps, spans = [0], [], []
    guard = threading.Lock()

    def hold(lock_for, n: int) -> None:
        for _ in range(n):
            with lock_for("kb1"):
                with guard:
                    inside[0] += 1
                    overlaps.append(inside[0])
                assert client.exists(kb_lock_key(prefix, "kb1"))
                time.sleep(0.02)
                with guard:
                    inside[0] -= 1
            spans.append(1)

    threads = [threading.Thread(target=hold, args=(lk, 10)) for lk in locks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(spans) == 20 and max(overlaps) == 1
    assert not client.exists(kb_lock_key(prefix, "kb1"))
    with locks[0]("kb1"), locks[1]("kb2"):  # different knowledge bases do not wait for each other
        pass


def test_kb_lock_times_out_and_outlives_its_timeout(client: redis.Redis, prefix: str) -> None:
    lock_for = redis_kb_lock(client, prefix, timeout=0.6, blocking_timeout=0.3)
    with lock_for("kb"):
        time.sleep(1.5)  # longer than the timeout: the watchdog keeps it
        assert client.exists(kb_lock_key(prefix, "kb"))
        with pytest.raises(KBLockTimeout, match="another worker"):
            with lock_for("kb"):
                pass
    assert not client.exists(kb_lock_key(prefix, "kb"))


def test_engine_pool_shares_connections_and_embedder(service_settings: Settings, client: redis.Redis) -> None:
    pool = EnginePool(service_settings, client)
    try:
        a, b = pool.engine("t1"), pool.engine("t2")
        assert pool.engine("t1") is a and a is not b
        assert a.meta is b.meta is pool.meta and a.store is b.store and a.embedder is b.embedder
        assert a.tenant == "t1" and pool.meta.get_tenant("t2").id == "t2"
    finally:
        pool.close()


def test_celery_keys_live_under_the_prefix(service_settings: Settings) -> None:
    app = make_celery(service_settings)
    prefix = service_settings.redis_prefix
    assert app.conf.broker_transport_options["global_keyprefix"] == prefix
    assert app.conf.result_backend_transport_options["global_keyprefix"] == prefix
    assert app.conf.task_acks_late and app.conf.worker_prefetch_multiplier == 1
    assert app.conf.accept_content == ["json"] and app.conf.task_serializer == "json"


def _env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBGRAPH_")}
    env.update(KBGRAPH_DATA_DIR=str(settings.data_dir), KBGRAPH_STORE=settings.store, KBGRAPH_EMBEDDING_PROVIDER="hash",
               KBGRAPH_EMBEDDING_DIM="64", KBGRAPH_REDIS_URL=settings.redis_url,
               KBGRAPH_REDIS_PREFIX=settings.redis_prefix, KBGRAPH_ES_URL=settings.es_url,
               KBGRAPH_ES_INDEX_PREFIX=settings.es_index_prefix,
               KBGRAPH_ES_REFRESH_INTERVAL=settings.es_refresh_interval)
    return env


def test_worker_and_web_commands(service_settings: Settings, client: redis.Redis) -> None:
    bin_dir = Path(sys.executable).parent
    env = _env(service_settings)
    made = subprocess.run([str(bin_dir / "kbgraph-web"), "apikey", "create", "--tenant", "acme"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    with MetaDB.open(service_settings.meta_url) as meta:
        assert meta.tenant_for_api_key(token) == "acme"
        kb = meta.create_kb("acme", "notes", embedding_model="hash-64", chunk_tokens=128, chunk_overlap=16)
        doc_path = SAMPLE_CORPUS_DIR / "salt_war.md"
        doc, _ = meta.upsert_document(kb.id, "salt_war.md", str(doc_path), doc_path.stat().st_size)
        app = make_celery(service_settings)
        [task] = enqueue_documents(service_settings, "acme", kb.id, [doc.id], meta=meta, app=app)
        # the prefork pool: the child opens its engines at worker_process_init
        worker = subprocess.Popen([str(bin_dir / "kbgraph-worker"), "--pool", "prefork", "--concurrency", "1",
                                   "--loglevel", "WARNING"], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 40
            while meta.get_task(kb.id, task.id).status not in FINISHED and time.monotonic() < deadline:
                assert worker.poll() is None, worker.stdout.read() if worker.stdout else ""
                time.sleep(0.2)
            finished = meta.get_task(kb.id, task.id)
            assert finished.status == "done", finished
            assert meta.get_document(kb.id, doc.id).chunk_count > 0
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(20)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(10)
        app.close_process_state()
