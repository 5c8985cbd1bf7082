"""What every page blueprint shares: the session's user and tenant, login and CSRF checks, and
errors shown as pages (or as ``{"error": ...}`` to the pages' scripts), never as a stack trace."""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, current_app, g, jsonify, redirect, render_template, request, session, url_for
from flask_wtf.csrf import CSRFError, CSRFProtect
from werkzeug.exceptions import HTTPException

from kbgraph.engine import Engine, KBGraphError
from kbgraph.config import Settings
from kbgraph.meta import KnowledgeBase, MetaError, NotFound, User
from kbgraph.store.base import StoreError
from web.envelope import store_failure_message
from web.services import services

log = logging.getLogger(__name__)
csrf = CSRFProtect()
UI_DIR = Path(__file__).parent
BUILD_DIR = UI_DIR / "static" / "build"

static_blueprint = Blueprint("ui_static", __name__, static_folder="static", static_url_path="/ui-static",
                             template_folder="templates")


@static_blueprint.get("/favicon.ico")
def _favicon() -> Any:
    # browsers ask for /favicon.ico on their own (a page's link names the same icon): never a 404
    return redirect(url_for("ui_static.static", filename="favicon.svg"), 301)


class PageError(Exception):
    """Something the user asked cannot be done; the message says what to change."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def secret_key(settings: Settings) -> str:
    """The session-signing key: the configured one, else a random one kept in the data dir so that
    sessions survive a restart."""
    if settings.web_secret_key:
        return settings.web_secret_key
    path = settings.data_dir / "web_secret_key"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        # written aside, then linked into place: of several workers starting at once exactly one
        # key wins, and nobody reads a half-written file
        partial = path.with_name(f".web_secret_key-{secrets.token_hex(8)}")
        partial.write_text(secrets.token_urlsafe(48), encoding="utf-8")
        partial.chmod(0o600)
        try:
            os.link(partial, path)
        except FileExistsError:
            pass
        finally:
            partial.unlink()
    return path.read_text(encoding="utf-8").strip()


def wants_json() -> bool:
    return request.path.startswith("/ui/api/") or request.accept_mimetypes.best == "application/json"


def _error_response(message: str, status: int) -> Response | tuple[Any, int]:
    if wants_json():
        return jsonify({"error": message}), status
    return render_template("error.html", message=message, status=status), status


def page_blueprint(name: str, *, login: bool = True) -> Blueprint:
    """A blueprint of pages: signed-in users only (unless ``login`` is False), CSRF-checked on every
    state-changing request, with errors rendered for people."""
    bp = Blueprint(name, __name__, template_folder="templates")

    @bp.before_request
    def _guard() -> Response | None:
        user = current_user()
        g.user = user
        if login and user is None:
            if wants_json():
                return jsonify({"error": "you are signed out: sign in again"}), 401  # type: ignore[return-value]
            return redirect(url_for("ui_auth.login", next=request.full_path.rstrip("?")))
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            csrf.protect()
        return None

    @bp.errorhandler(CSRFError)
    def _csrf(exc: CSRFError) -> Any:
        return _error_response(f"The form expired or came from another site ({exc.description}); reload the page "
                               "and try again.", 400)

    @bp.errorhandler(PageError)
    def _page(exc: PageError) -> Any:
        return _error_response(str(exc), exc.status)

    @bp.errorhandler(NotFound)
    def _not_found(exc: NotFound) -> Any:
        return _error_response("Not found: it does not exist, or it is not yours.", 404)

    @bp.errorhandler(MetaError)
    @bp.errorhandler(KBGraphError)
    def _user_error(exc: Exception) -> Any:
        return _error_response(str(exc), 400)

    @bp.errorhandler(StoreError)
    def _store(exc: StoreError) -> Any:
        return _error_response(store_failure_message(exc), 503)

    @bp.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> Any:
        return _error_response(exc.description or exc.name, exc.code or 500)

    @bp.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Any:
        log.exception("page error")
        return _error_response(f"Something went wrong on the server ({type(exc).__name__}); the error is logged.", 500)

    return bp


SESSION_KEY = "sid"  # the session cookie's one sign-in value: a token the server keeps the user of


def session_lifetime_ms() -> int:
    """How long a sign-in lasts (Flask's PERMANENT_SESSION_LIFETIME, the cookie's own lifetime)."""
    return int(current_app.permanent_session_lifetime.total_seconds() * 1000)


def current_user() -> User | None:
    token = session.get(SESSION_KEY)
    if not isinstance(token, str) or not token:
        return None
    user = services().meta.user_for_web_session(token, session_lifetime_ms())
    if user is None:  # signed out (here or elsewhere), or the account is gone: forget the session
        session.clear()
    return user


def tenant() -> str:
    return str(g.user.tenant_id)


def engine() -> Engine:
    return services().engine(tenant())


def own_kb(kb_id: str) -> KnowledgeBase:
    """The signed-in tenant's knowledge base; another tenant's id is simply not found."""
    return services().meta.get_kb(tenant(), kb_id)


def form_int(name: str, default: int, low: int, high: int) -> int:
    raw = (request.form.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise PageError(f"{name.replace('_', ' ')} must be a whole number, not {raw!r}") from None
    if not low <= value <= high:
        raise PageError(f"{name.replace('_', ' ')} must be from {low} to {high}, not {value}")
    return value


def json_body() -> dict[str, Any]:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise PageError("the request needs a JSON object body")
    return body


def assets_built() -> bool:
    return (BUILD_DIR / "graph-lib.js").is_file()

