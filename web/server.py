"""The production server: gunicorn (gthread workers) running ``web.create_app``, sized by settings.

Each worker process builds its own app after the fork, so no SQLite, Redis or database connection is
ever shared between processes; inside a process requests reuse the store's bounded connection pool.
"""

from __future__ import annotations

from typing import Any

from gunicorn.app.base import BaseApplication

from kbgraph.config import Settings
from kbgraph.meta import upgrade_database


def gunicorn_options(settings: Settings, bind: str) -> dict[str, Any]:
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
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "info",
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
    # the schema once, here in the master before any worker forks: workers find it ready (racing
    # workers each creating it made 2 of 3 first starts on a new PostgreSQL database fail)
    upgrade_database(settings.meta_url)
    KBGraphServer(settings, f"{host}:{port}").run()
