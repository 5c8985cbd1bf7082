"""What operators ask a deployment: /health, /ready (each dependency named), /metrics scraped from a
real gunicorn server and a real worker, the access log, "no worker is running" instead of "queued",
a task's claim kept alive while it runs, and 400 clients against a server limited to 256 descriptors."""

from __future__ import annotations

import dataclasses
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from conftest import REDIS_URL, scratch_redis_prefix
from kbgraph.config import Settings, load_settings
from kbgraph.meta import MetaDB
from support.processes import WebServer, Worker, free_port
from task_executor.celery_app import make_celery
from task_executor.heartbeat import WorkerHeartbeat
from task_executor.locks import task_claim_key
from task_executor.submit import NO_WORKER_MESSAGE
from task_executor.sweeper import requeue_orphaned_tasks
from task_executor.tasks import run_once
from web.server import gunicorn_options

pytestmark = [pytest.mark.services]


@pytest.fixture
def ops_settings(tmp_path: Path) -> Iterator[Settings]:
    with scratch_redis_prefix() as prefix:
        yield load_settings(data_dir=tmp_path / "data", store="sqlite", embedding_provider="hash", embedding_dim=64,
                            redis_url=REDIS_URL, redis_prefix=prefix, task_heartbeat=1, web_workers=2, web_threads=4,
                            graph_refresh_delay=0.5)


def _key(settings: Settings, tenant: str = "ops") -> str:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with MetaDB.open(settings.meta_url) as meta:
        meta.ensure_tenant(tenant)
        return meta.create_api_key(tenant)[1]


def _ready(client: Any) -> tuple[int, dict[str, Any]]:
    r = client.get("/ready")
    return r.status_code, r.get_json()


def test_ready_names_each_missing_dependency(ops_settings: Settings) -> None:
    from web import create_app

    app = create_app(ops_settings)
    client = app.test_client()
    svc = app.extensions["kbgraph"]
    try:
        assert client.get("/health").get_json() == {"status": "ok"}
        status, body = _ready(client)  # everything up but no worker has ever run
        assert status == 503 and body["missing"] == ["workers"], body
        assert body["checks"]["workers"].startswith("error: no worker is running")

        heartbeat = WorkerHeartbeat(svc.celery)
        heartbeat.beat()
        status, body = _ready(client)
        assert status == 200 and body["status"] == "ready", body
        assert set(body["checks"]) == {"meta", "redis", "store", "blob_store", "workers"}
        assert body["checks"]["workers"].startswith("ok: 1 worker(s)")

        uploads = ops_settings.data_dir / "uploads"  # the blob store's folder cannot be made
        shutil.rmtree(uploads, ignore_errors=True)
        uploads.write_text("not a folder")
        status, body = _ready(client)
        assert status == 503 and body["missing"] == ["blob_store"], body
        uploads.unlink()

        meta_file = ops_settings.data_dir / "meta.db"  # the metadata database is gone
        moved = meta_file.with_suffix(".moved")
        svc.meta.engine.dispose()
        meta_file.rename(moved)
        meta_file.mkdir()
        status, body = _ready(client)
        assert status == 503 and "meta" in body["missing"], body
        assert body["checks"]["meta"].startswith("unavailable (id ") and str(ops_settings.data_dir) not in str(body)
        meta_file.rmdir()
        moved.rename(meta_file)
        svc.meta.engine.dispose()

        time.sleep(3.2 * ops_settings.task_heartbeat)  # the beat is older than three beats now
        status, body = _ready(client)
        assert status == 503 and body["missing"] == ["workers"], body
    finally:
        svc.close()


def test_ready_names_a_stopped_s3_server(ops_settings: Settings) -> None:
    from conftest import s3_overrides
    from web import create_app

    running = s3_overrides()  # the test S3 server answers (or the test skips, or fails in CI)
    stopped = {**running, "s3_endpoint_url": f"http://127.0.0.1:{free_port()}"}  # nothing listens there
    for overrides, expected in ((running, "ok"), (stopped, "missing")):
        settings = dataclasses.replace(ops_settings, **overrides)
        app = create_app(settings)
        svc = app.extensions["kbgraph"]
        try:
            WorkerHeartbeat(svc.celery).beat()
            status, body = _ready(app.test_client())
            if expected == "ok":
                assert status == 200 and body["checks"]["blob_store"] == "ok", body
            else:
                assert status == 503 and body["missing"] == ["blob_store"], body
                assert body["checks"]["blob_store"].startswith("unavailable"), body
        finally:
            svc.close()


def test_a_waiting_document_says_no_worker_is_running(ops_settings: Settings) -> None:
    from web import create_app

    key = _key(ops_settings)
    app = create_app(ops_settings)
    client = app.test_client()
    auth = {"Authorization": f"Bearer {key}"}
    svc = app.extensions["kbgraph"]
    try:
        ds = client.post("/api/v1/datasets", headers=auth, json={"name": "waiting"}).get_json()["data"]["id"]
        doc = client.post(f"/api/v1/datasets/{ds}/documents", headers=auth,
                          data={"file": (Path(__file__).open("rb"), "notes.txt")}).get_json()["data"][0]
        assert client.post(f"/api/v1/datasets/{ds}/chunks", headers=auth, json={"document_ids": [doc["id"]]}
                           ).get_json() == {"code": 0}
        row = client.get(f"/api/v1/datasets/{ds}/documents", headers=auth).get_json()["data"]["docs"][0]
        assert row["run"] == "RUNNING" and row["progress_msg"] == NO_WORKER_MESSAGE, row
        assert "queued" not in row["progress_msg"].split(":")[0]

        WorkerHeartbeat(svc.celery).beat()  # a worker is alive: the task is queued, as it says
        row = client.get(f"/api/v1/datasets/{ds}/documents", headers=auth).get_json()["data"]["docs"][0]
        assert row["progress_msg"] == "Task is queued..."
    finally:
        svc.close()


def test_a_running_task_keeps_its_claim_past_three_beats(ops_settings: Settings) -> None:
    """The claim lapses after three missed beats: a task that runs longer keeps it only because the
    worker beats for it. Without the beats the sweeper would queue it again and a second copy would run."""
    settings = ops_settings.replace(task_heartbeat=0.3)
    app = make_celery(settings)
    meta = app.engines().meta
    kb = meta.create_kb("default", f"claims {uuid.uuid4().hex[:6]}")
    task = meta.create_task(kb.id, "refresh")
    seen: list[Any] = []

    def long_task() -> dict[str, Any]:
        meta.update_task(task.id, status="running")
        for _ in range(10):  # 3 s: more than three claim lifetimes (0.9 s each)
            time.sleep(0.3)
            seen.append(bool(app.redis.exists(task_claim_key(settings.redis_prefix, task.id))))
        seen.append(requeue_orphaned_tasks(app))  # the sweeper finds it alive
        seen.append(run_once(app, kb.id, task.id, lambda: {"status": "ran twice"}))  # a redelivery
        return {"status": "done"}

    try:
        assert run_once(app, kb.id, task.id, long_task, "refresh") == {"status": "done"}
        assert all(seen[:10]), seen
        assert seen[10] == []
        assert seen[11] == {"status": "skipped", "reason": "another worker runs the task"}
    finally:
        app.close_process_state()


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = requests.get(url, timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _total(samples: dict, name: str, **labels: str) -> float:
    return sum(v for (n, found), v in samples.items()
               if n == name and all(dict(found).get(k) == want for k, want in labels.items()))


@pytest.mark.slow
def test_metrics_access_log_and_workers_of_a_real_deployment(ops_settings: Settings, tmp_path: Path) -> None:
    key = _key(ops_settings)
    auth = {"Authorization": f"Bearer {key}"}
    worker_port = free_port()
    settings = ops_settings.replace(worker_metrics_port=worker_port)
    log = tmp_path / "web.log"
    with WebServer(settings, log) as web:
        ds = requests.post(web.url + "/api/v1/datasets", headers=auth, json={"name": "metered"}, timeout=30).json()
        ds_id = ds["data"]["id"]
        for _ in range(6):  # served by both gunicorn workers, counted together
            assert requests.get(web.url + "/api/v1/datasets", headers=auth, timeout=30).json()["code"] == 0
        doc = requests.post(f"{web.url}/api/v1/datasets/{ds_id}/documents", headers=auth, timeout=30,
                            files=[("file", ("guild.txt", b"The Lumen Cartographers Guild mapped Varrow. " * 40))]
                            ).json()["data"][0]
        requests.post(f"{web.url}/api/v1/datasets/{ds_id}/chunks", headers=auth, json={"document_ids": [doc["id"]]},
                      timeout=30)
        samples = _scrape(web.url + "/metrics")
        assert _total(samples, "kbgraph_http_requests_total", route="/api/v1/datasets", method="GET",
                      status="200") == 6
        assert _total(samples, "kbgraph_http_request_duration_seconds_count", route="/api/v1/datasets",
                      method="GET") == 6
        assert _total(samples, "kbgraph_task_rows", kind="index", state="pending") == 1
        assert _total(samples, "kbgraph_queue_depth") == 1
        assert _total(samples, "kbgraph_workers_alive") == 0
        assert requests.get(web.url + "/ready", timeout=10).json()["missing"] == ["workers"]

        with Worker(settings, tmp_path / "worker.log", concurrency=1) as worker:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                row = requests.get(f"{web.url}/api/v1/datasets/{ds_id}/documents", headers=auth,
                                   timeout=30).json()["data"]["docs"][0]
                if row["run"] == "DONE":
                    break
                time.sleep(0.5)
            assert row["run"] == "DONE", worker.output()
            ready = requests.get(web.url + "/ready", timeout=10)
            assert ready.status_code == 200 and ready.json()["checks"]["workers"].startswith("ok: 1"), ready.text
            samples = _scrape(web.url + "/metrics")
            assert _total(samples, "kbgraph_task_rows", kind="index", state="done") == 1
            assert _total(samples, "kbgraph_queue_depth") == 0 and _total(samples, "kbgraph_workers_alive") == 1
            work = _scrape(f"http://127.0.0.1:{worker_port}/metrics")
            assert _total(work, "kbgraph_tasks_total", kind="index", status="indexed") == 1
            assert _total(work, "kbgraph_task_duration_seconds_count", kind="index") == 1
            assert _total(work, "kbgraph_model_calls_total", phase="embed", outcome="answered") >= 1
            assert _total(work, "kbgraph_model_tokens_total", phase="embed", kind="prompt") > 0
            assert _total(work, "kbgraph_embedder_texts_total", side="passage") >= 1
            assert _total(work, "kbgraph_embedder_seconds_total", side="passage") > 0
        deadline = time.monotonic() + 10  # a stopped worker leaves at once
        while requests.get(web.url + "/ready", timeout=10).status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert requests.get(web.url + "/ready", timeout=10).json()["missing"] == ["workers"]
    access = [line for line in log.read_text().splitlines() if '"GET /api/v1/datasets HTTP/1.1" 200' in line]
    assert len(access) == 6, log.read_text()[-2000:]
    assert gunicorn_options(settings.replace(web_access_log=""), "127.0.0.1:1")["accesslog"] is None


def _one_client(port: int, together: threading.Barrier) -> str:
    """Connect, wait until every client is connected (400 connections open at once), then ask."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            together.wait(60)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
        return "answered" if answer.startswith(b"HTTP/1.1 200") else f"other: {answer[:40]!r}"
    except (OSError, threading.BrokenBarrierError) as exc:
        return f"refused: {type(exc).__name__}"


@pytest.mark.slow
def test_400_clients_under_256_descriptors_kill_no_worker(ops_settings: Settings, tmp_path: Path) -> None:
    log = tmp_path / "web.log"
    with WebServer(ops_settings.replace(web_access_log=""), log, open_files=256) as web:
        before = web.workers()
        with ThreadPoolExecutor(400) as pool:
            together = threading.Barrier(400)
            outcomes = list(pool.map(lambda _: _one_client(web.port, together), range(400)))
        assert web.workers() == before, log.read_text()[-3000:]  # the same gunicorn workers, none restarted
        assert requests.get(web.url + "/health", timeout=10).status_code == 200
    text = log.read_text()
    assert "Too many open files" not in text and text.count("Booting worker") == 2, text[-3000:]
    answered = outcomes.count("answered")
    assert answered + sum(o.startswith("refused") for o in outcomes) == 400, outcomes
    assert answered >= 200, sorted(set(outcomes))
    print(f"400 clients: {answered} answered, {400 - answered} refused")
