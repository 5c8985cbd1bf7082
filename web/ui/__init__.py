"""The web pages people use (knowledge bases, documents, retrieval test, graph view, chat).

Server-rendered jinja2 pages with small vanilla scripts, served by the same Flask app as the REST
API and talking to the same engine. Pages authenticate by a signed session cookie; every state
change they make (forms and their scripts' JSON calls) carries a CSRF token. ``register_ui`` is the
one call the app factory makes.
"""

from __future__ import annotations

from flask import Flask

from kbgraph.config import Settings
from web.ui.common import csrf, secret_key


def register_ui(app: Flask, settings: Settings) -> None:
    from web.ui import auth, chat, documents, graph, graph_edit, kbs, providers, retrieval
    from web.ui.common import static_blueprint

    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = secret_key(settings)
    app.config["SESSION_COOKIE_HTTPONLY"] = True
    app.config["SESSION_COOKIE_SAMESITE"] = "Lax"
    # checked by the pages' blueprints only: the REST API authenticates by API key, not cookie
    app.config["WTF_CSRF_CHECK_DEFAULT"] = False
    app.config["WTF_CSRF_TIME_LIMIT"] = None  # valid for the session's lifetime
    csrf.init_app(app)
    from web.ui.auth import THROTTLE
    from web.ui.throttle import LoginThrottle

    app.extensions[THROTTLE] = LoginThrottle(settings)
    app.register_blueprint(static_blueprint)
    for module in (auth, providers, kbs, documents, retrieval, graph, graph_edit, chat):
        app.register_blueprint(module.blueprint)


__all__ = ["register_ui"]
