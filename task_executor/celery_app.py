"""The Celery application: Redis broker and result backend, every key under settings.redis_prefix.

Tasks are registered with ``shared_task`` (task_executor.tasks), so any app made here runs them;
they find their settings, Redis client and engines on the app that executes them. This module
imports neither the tasks nor the sweeper (both import it): the app names them in ``include``,
which a worker imports at start, and a sender imports the tasks it sends (task_executor.submit).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import redis
from celery import Celery
from celery.signals import worker_process_init, worker_process_shutdown

from kbgraph.config import Settings
from kbgraph.meta import MetaDB
from task_executor.engines import EnginePool

QUEUE = "kbgraph"
_APPS: "weakref.WeakSet[KBCelery]" = weakref.WeakSet()


class KBCelery(Celery):
    """A Celery app that also carries kbgraph's settings and per-process resources."""

    def __init__(self, settings: Settings, *, refresh_delay: float | None = None, **kwargs: Any) -> None:
        super().__init__("kbgraph", **kwargs)
        self.settings = settings
        # seconds a finished document waits before the KB refresh runs, so a batch shares one refresh
        self.refresh_delay = settings.graph_refresh_delay if refresh_delay is None else refresh_delay
        self._engine_pool: EnginePool | None = None
        self._redis: redis.Redis | None = None
        self._meta: MetaDB | None = None
        self._guard = threading.Lock()
        self.sweeper: Any = None  # the worker main process's StaleTaskSweeper
        self.heartbeat: Any = None  # ... and its WorkerHeartbeat (task_executor/heartbeat.py)

    @property
    def redis(self) -> redis.Redis:
        with self._guard:
            if self._redis is None:
                self._redis = redis.Redis.from_url(self.settings.redis_url)
            return self._redis

    def engines(self) -> EnginePool:
        """This process's engines (opened at worker_process_init under prefork, else on first use)."""
        with self._guard:
            if self._engine_pool is None:
                self._engine_pool = EnginePool(self.settings)
            return self._engine_pool

    def meta_db(self) -> MetaDB:
        """A metadata DB for submitters (the web app passes its own instead)."""
        with self._guard:
            if self._meta is None:
                self._meta = MetaDB.open(self.settings.meta_url)
            return self._meta

    def reset_process_state(self, open_now: bool) -> None:
        # a forked child must not use its parent's connections: drop them, open its own
        with self._guard:
            self._engine_pool, self._redis, self._meta = None, None, None
        if open_now:
            self.engines()

    def close_process_state(self) -> None:
        with self._guard:
            pool, self._engine_pool = self._engine_pool, None
        if pool is not None:
            pool.close()


def unacked_restore_options(visibility_timeout: float) -> dict[str, int]:
    """How often a worker looks for messages whose worker died holding them. kombu's default scans
    every tenth look of every 10 s (100 s), so a message a killed worker had taken but not started
    waited far beyond its visibility timeout; here every look scans, a few per timeout."""
    return {"unacked_restore_interval": max(1, min(10, int(visibility_timeout / 4))), "unacked_restore_throttle": 1}


def make_celery(settings: Settings, *, refresh_delay: float | None = None) -> KBCelery:
    prefix = settings.redis_prefix
    # by name, not imported here: a worker imports them at start (the sweeper hooks worker_ready)
    app = KBCelery(settings, refresh_delay=refresh_delay, include=[
        "task_executor.tasks", "task_executor.sweeper", "task_executor.heartbeat", "task_executor.metrics"])
    app.conf.update(
        broker_url=settings.redis_url,
        result_backend=settings.redis_url,
        # a message taken by a worker that was then killed goes back to the queue after this long;
        # a duplicate of a task still running elsewhere finds its claim held
        broker_transport_options={"global_keyprefix": prefix,
                                  "visibility_timeout": settings.broker_visibility_timeout,
                                  **unacked_restore_options(settings.broker_visibility_timeout),
                                  "socket_keepalive": True, "health_check_interval": 30},
        result_backend_transport_options={"global_keyprefix": prefix},
        broker_connection_retry_on_startup=True,
        task_default_queue=QUEUE,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        # a task is acknowledged when it ends, so a worker killed mid-document hands it to another;
        # the pipeline's deterministic ids make the rerun rewrite the same rows
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # a worker that lost Redis stops its acks-late tasks: the broker redelivers them anyway
        worker_cancel_long_running_tasks_on_connection_loss=True,
        worker_prefetch_multiplier=1,
        task_track_started=True,
        result_expires=24 * 3600,
        worker_hijack_root_logger=False,
    )

    _APPS.add(app)
    return app


@worker_process_init.connect
def _open_engines(**_: Any) -> None:
    for app in list(_APPS):
        app.reset_process_state(open_now=True)


@worker_process_shutdown.connect
def _close_engines(**_: Any) -> None:
    for app in list(_APPS):
        app.close_process_state()
