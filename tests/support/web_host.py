"""The in-process pieces the service and page tests run against: a real Celery worker (threads) on the
test Redis, beating like a deployed worker, and the Flask app served over real HTTP on a free port."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from kbgraph.config import Settings
from task_executor.celery_app import KBCelery, make_celery
from task_executor.heartbeat import WorkerHeartbeat


@contextmanager
def celery_worker(settings: Settings, *, refresh_delay: float, shutdown_timeout: float = 30) -> Iterator[KBCelery]:
    """A worker of two threads taking the app's tasks. Celery's test worker sends no worker_ready, so
    the heartbeat a real worker starts then is started here: without it the web app would answer
    "no worker is running" beside a worker that runs."""
    from celery.contrib.testing.worker import start_worker

    app = make_celery(settings, refresh_delay=refresh_delay)
    heartbeat = WorkerHeartbeat(app)
    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING",
                      shutdown_timeout=shutdown_timeout):
        heartbeat.start()
        try:
            yield app
        finally:
            heartbeat.stop()
    app.close_process_state()


@contextmanager
def web_server(settings: Settings, celery: KBCelery) -> Iterator[str]:
    """The web app (REST API and pages) on a free loopback port; yields its base URL."""
    from werkzeug.serving import make_server

    from web import create_app

    app = create_app(settings, celery=celery)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)
        app.extensions["kbgraph"].close()
