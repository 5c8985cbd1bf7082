"""What operators and their tools ask a web server: ``/health`` (the process answers: 200, nothing
else consulted), ``/ready`` (every dependency it needs, each named, 503 when one is missing) and
``/metrics`` (Prometheus; task_executor/metrics.py), plus the request metrics of every route.

``/ready`` checks the metadata database, Redis, the document store, the blob store where uploads
are kept and that at least one worker beat within the heartbeat window (task_executor/heartbeat.py).
A check's failure says what it is; the details (hosts, paths) go to the log under an id, since
these routes answer anyone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis
import sqlalchemy.exc
from flask import Blueprint, Flask, Response, g, jsonify, request

from kbgraph.blob import BlobUnavailable
from kbgraph.store.base import StoreError
from task_executor.celery_app import QUEUE
from task_executor.heartbeat import worker_window, workers_seen
from task_executor.metrics import metrics, scrape_registry
from web.envelope import log_internal_error
from web.services import Services, services

log = logging.getLogger(__name__)

blueprint = Blueprint("ops", __name__)

Check = Callable[[Services], str]
# failures that mean "cannot be reached" rather than "answered wrongly"
UNAVAILABLE = (StoreError, BlobUnavailable, ConnectionError, OSError, redis.RedisError, sqlalchemy.exc.OperationalError)


def _meta(svc: Services) -> str:
    svc.meta.list_kbs("default", limit=1)
    return "ok"


def _redis(svc: Services) -> str:
    svc.pool.redis.ping()
    return "ok"


def _store(svc: Services) -> str:
    # a read of the default tenant's index: it answers whether or not the index exists, and within
    # es_query_timeout when the cluster hangs
    svc.pool.base.store_handle.index_exists(svc.pool.base.tenant)
    return "ok"


def _blob_store(svc: Services) -> str:
    # the store's own probe: the folder writable, or the S3 bucket reachable with these credentials
    svc.blobs.check()
    return "ok"


def _workers(svc: Services) -> str:
    seen = workers_seen(svc.pool.redis, svc.settings)
    window = worker_window(svc.settings)
    if not seen:
        raise LookupError(f"no worker is running: none beat within {window:g} s; start `kbgraph-worker`")
    return f"ok: {len(seen)} worker(s) seen within {window:g} s"


READY_CHECKS: dict[str, Check] = {"meta": _meta, "redis": _redis, "store": _store, "blob_store": _blob_store,
                                  "workers": _workers}


def _failure(name: str, exc: Exception) -> str:
    error_id = log_internal_error(f"readiness check {name} failed")
    if isinstance(exc, LookupError):  # written for this answer: nothing internal in it
        return f"error: {exc}"
    what = "unavailable" if isinstance(exc, UNAVAILABLE) else "error"
    return f"{what} (id {error_id})"


@blueprint.get("/health")
def health() -> Response:
    """The process is alive and serving: no dependency is consulted (that is /ready)."""
    return jsonify({"status": "ok"})


@blueprint.get("/ready")
def ready() -> tuple[Response, int]:
    svc = services()
    checks: dict[str, str] = {}
    for name, check in READY_CHECKS.items():
        try:
            checks[name] = check(svc)
        except Exception as exc:  # reported, never raised: this is how a failure is seen
            checks[name] = _failure(name, exc)
    ok = all(v.startswith("ok") for v in checks.values())
    missing = [n for n, v in checks.items() if not v.startswith("ok")]
    return jsonify({"status": "ready" if ok else "not ready", "missing": missing, "checks": checks}), 200 if ok else 503


class DeploymentCollector:
    """Read at each scrape: task rows by kind and state (the metadata database), the broker's queue
    depth and the workers alive (Redis). What cannot be read is left out of that scrape."""

    def __init__(self, svc: Services) -> None:
        self.svc = svc

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        try:
            tasks = GaugeMetricFamily("kbgraph_task_rows", "Task rows by kind and state (pending: queued, not yet "
                                      "taken by a worker)", labels=["kind", "state"])
            for (kind, state), n in sorted(self.svc.meta.count_tasks_by_status().items()):
                tasks.add_metric([kind, state], n)
            yield tasks
        except Exception:
            log.exception("metrics: the task rows could not be counted")
        try:
            redis, prefix = self.svc.pool.redis, self.svc.settings.redis_prefix
            # kombu keeps one list per priority step of the queue (the plain name is priority 0)
            depth = sum(redis.llen(prefix + name) for name in (QUEUE, *(f"{QUEUE}\x06\x16{p}" for p in (3, 6, 9))))
            yield GaugeMetricFamily("kbgraph_queue_depth", "Task messages waiting in the broker's queue", value=depth)
            yield GaugeMetricFamily("kbgraph_workers_alive", "Workers that beat within the heartbeat window",
                                    value=len(workers_seen(redis, self.svc.settings)))
        except Exception:
            log.exception("metrics: Redis could not be read")


@blueprint.get("/metrics")
def prometheus_metrics() -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    registry = scrape_registry(DeploymentCollector(services()))
    return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)


def _started() -> None:
    g.ops_started = time.perf_counter()


def _answered(response: Response) -> Response:
    started = g.pop("ops_started", None)
    if started is not None and request.path != "/metrics":
        # the route's pattern, not the path: one series per route, whatever the ids in it
        route = request.url_rule.rule if request.url_rule is not None else "unmatched"
        try:
            m = metrics()
            m.requests.labels(request.method, route, str(response.status_code)).inc()
            m.latency.labels(request.method, route).observe(time.perf_counter() - started)
        except Exception:  # a metric lost, never an answer
            log.exception("request metrics failed")
    return response


def register_ops(app: Flask) -> None:
    """The routes, and request metrics for every route of the app."""
    app.register_blueprint(blueprint)
    app.before_request(_started)
    app.after_request(_answered)
