"""Workers say they are alive: each worker's main process beats every ``task_heartbeat`` seconds into
one Redis sorted set (``<prefix>workers``: member ``host:pid``, score the time of its last beat).

The web app reads it: ``/ready`` needs at least one worker seen within three beats, and a document
waiting for a worker says "no worker is running" instead of "queued" when none is. A worker that
stops cleanly leaves the set at once; a killed one drops out of the window three beats later.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Any

import redis
from celery.signals import worker_ready, worker_shutdown

from kbgraph.config import Settings
from task_executor.celery_app import KBCelery

log = logging.getLogger(__name__)


def workers_key(prefix: str) -> str:
    return f"{prefix}workers"


def worker_window(settings: Settings) -> float:
    """How recent a beat must be for its worker to count as running: three beats, as for claims."""
    return 3 * settings.task_heartbeat


def workers_seen(client: redis.Redis, settings: Settings) -> list[str]:
    """The workers (``host:pid``) that beat within the window, oldest beat first."""
    key = workers_key(settings.redis_prefix)
    now = time.time()
    # beats long gone are dropped now and then: the set stays as small as the deployment
    client.zremrangebyscore(key, "-inf", now - 100 * worker_window(settings))
    return [m.decode() if isinstance(m, bytes) else str(m)
            for m in client.zrangebyscore(key, now - worker_window(settings), "+inf")]


def no_worker_running(client: redis.Redis, settings: Settings) -> bool:
    """True when no worker beat within the window (False when Redis cannot say: nothing to claim)."""
    try:
        return not workers_seen(client, settings)
    except redis.RedisError:
        return False


class WorkerHeartbeat:
    """A daemon thread of a worker's main process: a beat now, then one every ``task_heartbeat``."""

    def __init__(self, app: KBCelery) -> None:
        self.app = app
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.every = app.settings.task_heartbeat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kbgraph-heartbeat", daemon=True)

    def beat(self) -> None:
        self.app.redis.zadd(workers_key(self.app.settings.redis_prefix), {self.name: time.time()})

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        try:
            self.app.redis.zrem(workers_key(self.app.settings.redis_prefix), self.name)
        except redis.RedisError:
            pass  # it drops out of the window by itself

    def _run(self) -> None:
        while True:
            try:
                self.beat()
            except Exception:  # Redis is down for a moment: the next beat tries again
                log.exception("the worker's heartbeat failed")
            if self._stop.wait(self.every):
                return


# connected when a worker imports this module at start (the app's ``include``)
@worker_ready.connect
def _start_heartbeat(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if isinstance(app, KBCelery) and app.heartbeat is None:
        app.heartbeat = WorkerHeartbeat(app)
        app.heartbeat.start()


@worker_shutdown.connect
def _stop_heartbeat(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if isinstance(app, KBCelery) and app.heartbeat is not None:
        app.heartbeat.stop()
        app.heartbeat = None
