"""The Flask app factory: services on ``app.extensions``, the REST blueprint, RAGFlow-style errors.

The factory sits on top of the web package: it imports the route modules and registers their
blueprints; they reach the app's services through ``web.services`` (Flask's ``current_app``), never
through this module.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, current_app, g, jsonify, render_template, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound

import web.chats
import web.chunks
import web.datasets
import web.document_update
import web.documents
import web.graph_corrections
import web.openai_compat
import web.retrieval
import web.sessions
import web.unavailable
from kbgraph.config import Settings, load_settings
from kbgraph.meta import MetaError
from task_executor.celery_app import KBCelery
from web.api import authenticate, blueprint
from kbgraph.store.base import StoreError
from web.envelope import (
    CONNECTION_ERROR, DATA_ERROR, EXCEPTION_ERROR, ApiError, http_error_response, log_internal_error,
    store_failure_message,
)
from web.limits import install_limits
from web.ops import register_ops
from web.security import install_security
from web.services import EXTENSION, Services
from web.ui import register_ui

log = logging.getLogger(__name__)

# the REST API's route modules: importing one adds its routes to web.api's blueprint, so all of
# them are imported before the factory registers it
API_ROUTES = (web.chats, web.chunks, web.datasets, web.document_update, web.documents, web.graph_corrections,
              web.openai_compat, web.retrieval, web.sessions, web.unavailable)


def create_app(settings: Settings | None = None, *, celery: KBCelery | None = None) -> Flask:
    """The web app. ``celery`` is the app tasks are sent with (default: one made from ``settings``)."""
    settings = settings or load_settings()
    app = Flask(__name__)
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions[EXTENSION] = Services.open(settings, celery)
    register_ops(app)  # /health, /ready, /metrics; first: every request is timed, refused ones too
    install_security(app, settings)  # before authentication: text no database takes never reaches a lookup
    app.before_request(authenticate)  # app-wide: an unknown /api/v1 route is authenticated too
    install_limits(app, settings)  # after authentication: a stranger learns nothing of the limits
    app.register_blueprint(blueprint)
    register_ui(app, settings)

    @app.errorhandler(StoreError)
    def store_error(exc: StoreError) -> Response:
        # a clear answer in RAGFlow's envelope, never "Internal server error": the store is down or hung
        return jsonify({"code": CONNECTION_ERROR, "message": store_failure_message(exc), "data": None})

    @app.errorhandler(ApiError)
    def api_error(exc: ApiError) -> Response:
        return exc.response()

    @app.errorhandler(MetaError)
    def meta_error(exc: MetaError) -> Response:
        # the metadata layer's messages are written for users ("... name must be ...")
        return jsonify({"code": DATA_ERROR, "message": str(exc)})

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response | tuple[object, int]:
        if _in_api():
            return http_error_response(_slash_tolerant(exc))
        return _page_error(exc.description or exc.name, exc.code or 500)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response | tuple[object, int]:
        # driver errors and tracebacks name hosts, paths and queries: they stay in the log
        error_id = log_internal_error(f"unhandled error in {request.method} {request.path}")
        message = f"Internal server error (id {error_id}); the server log has the details"
        if _in_api():
            return jsonify({"code": EXCEPTION_ERROR, "message": message, "data": None})
        return _page_error(message, 500)

    return app


def _in_api() -> bool:
    return request.path == "/api/v1" or request.path.startswith("/api/v1/")


def _page_error(message: str, status: int) -> tuple[object, int]:
    """An error outside the REST API: a page for people, ``{"error": ...}`` for scripts and probes."""
    if request.path.startswith("/ui/api/") or request.accept_mimetypes.best == "application/json":
        return jsonify({"error": message}), status
    g.setdefault("user", None)  # the page's header asks who is signed in; routing failed before anyone looked
    return render_template("error.html", message=message, status=status), status


def _slash_tolerant(exc: HTTPException) -> HTTPException:
    """An API path with a trailing slash (an empty last id, as in ``/chats/x/sessions/``) names the
    route without it, as RAGFlow routes it: a method that route lacks is a 405, not a 404."""
    path = request.path
    if not isinstance(exc, NotFound) or not path.startswith("/api/v1/") or not path.endswith("/"):
        return exc
    adapter = current_app.url_map.bind("localhost")
    try:
        adapter.match(path.rstrip("/"), method=request.method)
    except MethodNotAllowed as other:
        return other
    except HTTPException:
        pass
    return exc
