"""The Flask app factory: services on ``app.extensions``, the REST blueprint, RAGFlow-style errors."""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from kbgraph.config import Settings, load_settings
from kbgraph.meta import MetaError
from task_executor.celery_app import KBCelery
from web.envelope import DATA_ERROR, ApiError, exception_response
from web.services import EXTENSION, Services, services

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, *, celery: KBCelery | None = None) -> Flask:
    """The web app. ``celery`` is the app tasks are sent with (default: one made from ``settings``)."""
    settings = settings or load_settings()
    app = Flask(__name__)
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions[EXTENSION] = Services.open(settings, celery)

    from web.api import authenticate, blueprint

    app.before_request(authenticate)  # app-wide: an unknown /api/v1 route is authenticated too
    app.register_blueprint(blueprint)

    from web.ui import register_ui

    register_ui(app, settings)

    @app.get("/health")
    def health() -> Response:
        svc = services()
        checks = {}
        for name, probe in (("redis", svc.pool.redis.ping), ("meta", lambda: svc.meta.list_kbs("default", limit=1))):
            try:
                probe()
                checks[name] = "ok"
            except Exception as exc:  # report, do not fail: health is how the failure is seen
                checks[name] = f"error: {type(exc).__name__}: {exc}"
        healthy = all(v == "ok" for v in checks.values())
        return jsonify({"status": "ok" if healthy else "degraded", **checks}), 200 if healthy else 503

    @app.errorhandler(ApiError)
    def api_error(exc: ApiError) -> Response:
        return exc.response()

    @app.errorhandler(MetaError)
    def meta_error(exc: MetaError) -> Response:
        # the metadata layer's messages are written for users ("... name must be ...")
        return jsonify({"code": DATA_ERROR, "message": str(exc)})

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        return exception_response(exc)  # RAGFlow: code 100, "<NotFound '404: Not Found'>", HTTP 200

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response:
        log.exception("unhandled error")
        return exception_response(exc)

    return app
