"""The production server: gunicorn (gthread workers) running ``web.create_app``, sized by settings.

Each worker process builds its own app after the fork, so no SQLite, Redis or database connection is
ever shared between processes; inside a process requests reuse the store's bounded connection pool.
"""

from __future__ import annotations

import logging
import os
import resource
from typing import Any

from gunicorn.app.base import BaseApplication

from kbgraph.config import Settings
from kbgraph.meta import upgrade_database
from task_executor.metrics import process_dead

log = logging.getLogger("web")

# descriptors a worker process may still open after it starts serving, besides its clients': per
# request thread a Redis connection, a metadata DB connection, an upload's temporary file and an
# Elasticsearch connection; the embedded store's pool (store_connections); and a margin for logs,
# the metrics' files and libraries. Measured: a worker with the app loaded holds 40-60 descriptors
DESCRIPTORS_PER_THREAD = 4
DESCRIPTOR_MARGIN = 48


def connection_limit(settings: Settings, open_now: int, soft_limit: int) -> int:
    """Clients one worker process holds at once: what its descriptor limit leaves after what it holds
    now and may still open. More clients wait in the listen queue (or are refused by the kernel when
    it is full); a worker that accepted past its limit died on accept() (EMFILE) with every request
    it was serving."""
    reserve = open_now + settings.store_connections + DESCRIPTORS_PER_THREAD * settings.web_threads + DESCRIPTOR_MARGIN
    return max(1, min(1000, soft_limit - reserve))  # 1000: gunicorn's own default


def _open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux: assume a loaded app's count
        return 64


def _raise_descriptor_limit() -> None:
    """The soft open-files limit up to the hard one (the usual soft 1024 is an old default)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass


def gunicorn_options(settings: Settings, bind: str) -> dict[str, Any]:

    def size_connections(worker: Any) -> None:  # post_worker_init: the app is loaded, nothing served yet
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        worker.worker_connections = connection_limit(settings, _open_descriptors(), soft)
        worker.max_keepalived = max(0, worker.worker_connections - settings.web_threads)
        log.info("worker %d: at most %d clients at once (open-files limit %d)", worker.pid,
                 worker.worker_connections, soft)

    return {
        "bind": bind,
        "workers": settings.web_workers,
        "threads": settings.web_threads,
        "worker_class": "gthread",
        "timeout": int(settings.web_timeout),
        "graceful_timeout": 30,
        "keepalive": 5,
        "preload_app": False,  # build the app in each worker: connections must not cross a fork
        # gunicorn's control socket is one path per user: several servers on a host would fight over it
        "control_socket_disable": True,
        # gunicorn's access log: "-" (standard output) by default, a file, or off ("")
        "accesslog": settings.web_access_log or None,
        "errorlog": "-",
        "loglevel": "info",
        "post_worker_init": size_connections,
        # a gunicorn worker that ended: its live gauges leave the metrics (prometheus multiprocess)
        "child_exit": lambda _server, worker: process_dead(worker.pid),
    }


class KBGraphServer(BaseApplication):  # type: ignore[misc]  (gunicorn is untyped)
    def __init__(self, settings: Settings, bind: str) -> None:
        self.settings = settings
        self.options = gunicorn_options(settings, bind)
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        from web.app import create_app

        return create_app(self.settings)


def serve(settings: Settings, host: str, port: int) -> None:
    """Run until stopped (SIGTERM or SIGINT: workers finish their requests first)."""
    _raise_descriptor_limit()
    # the schema once, here in the master before any worker forks: workers find it ready (racing
    # workers each creating it made 2 of 3 first starts on a new PostgreSQL database fail)
    upgrade_database(settings.meta_url)
    KBGraphServer(settings, f"{host}:{port}").run()
