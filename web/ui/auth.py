"""Accounts: sign up (each new user gets a tenant of their own), sign in, sign out, and the
settings page where a user creates and revokes the REST API's keys (shown once, stored hashed)."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

from flask import Response, current_app, flash, g, make_response, redirect, render_template, request, session, url_for
from werkzeug.security import check_password_hash, generate_password_hash

from kbgraph.meta import AlreadyExists, MetaError
from web.services import services
from web.ui.common import SESSION_KEY, PageError, current_user, page_blueprint, session_lifetime_ms, tenant
from web.ui.throttle import LoginThrottle

THROTTLE = "kbgraph_login_throttle"  # the app extension holding the sign-in throttle

blueprint = page_blueprint("ui_auth", login=False)
MIN_PASSWORD = 8
# compared against when the e-mail is unknown, so a wrong address costs as long as a wrong password
_DUMMY_HASH = generate_password_hash("not a password")


def _safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this site only (never another host)."""
    if target and target.startswith("/") and not target.startswith("//") and not urlsplit(target).netloc:
        return target
    return url_for("ui_kb.list_kbs")


def _sign_in(user_id: str) -> None:
    _end_session()
    session.clear()  # a fresh session (and CSRF token) at every sign-in
    # the cookie holds a random token only; the server keeps whom it signs in, until sign-out
    session[SESSION_KEY] = services().meta.create_web_session(user_id, session_lifetime_ms())
    session.permanent = True


def _end_session() -> None:
    token = session.get(SESSION_KEY)
    if isinstance(token, str):
        services().meta.delete_web_session(token)


def _throttle() -> LoginThrottle:
    return current_app.extensions[THROTTLE]  # type: ignore[no-any-return]


def _throttled(email: str, next_page: str | None) -> Response | None:
    refusal = _throttle().check(email, request.remote_addr or "")
    if refusal is None:
        return None
    minutes = max(1, round(refusal.retry_after / 60))
    page = render_template("login.html", email=email, next=next_page,
                           error=f"Too many wrong passwords for {refusal.what}: signing in is paused for about "
                                 f"{minutes} minute{'s' if minutes != 1 else ''}. Try again later.")
    response = make_response(page, 429)
    response.headers["Retry-After"] = str(refusal.retry_after)
    return response


@blueprint.get("/")
def home() -> Response:
    return redirect(url_for("ui_kb.list_kbs") if current_user() else url_for("ui_auth.login"))


@blueprint.route("/signup", methods=["GET", "POST"])
def signup() -> Response | str:
    if request.method == "GET":
        return render_template("signup.html")
    email = (request.form.get("email") or "").strip()
    password = request.form.get("password") or ""
    error = None
    if len(password) < MIN_PASSWORD:
        error = f"The password needs at least {MIN_PASSWORD} characters."
    elif password != request.form.get("confirm", ""):
        error = "The two passwords differ."
    if error is None:
        try:
            user = services().meta.create_user(email, generate_password_hash(password), "u" + uuid.uuid4().hex)
        except AlreadyExists:
            error = "An account with this e-mail address exists already: sign in instead."
        except MetaError as exc:
            error = str(exc)
    if error is not None:
        return render_template("signup.html", error=error, email=email), 400  # type: ignore[return-value]
    _sign_in(user.id)
    flash("Welcome! Create your first knowledge base below.")
    return redirect(url_for("ui_kb.list_kbs"))


@blueprint.route("/login", methods=["GET", "POST"])
def login() -> Response | str:
    next_page = request.values.get("next")
    if request.method == "GET":
        return render_template("login.html", next=next_page)
    email = (request.form.get("email") or "").strip()
    refused = _throttled(email, next_page)
    if refused is not None:  # the right password too: guessing must not go on until it "wins"
        return refused
    user = services().meta.find_user_by_email(email) if email else None
    valid = check_password_hash(user.password_hash if user else _DUMMY_HASH, request.form.get("password") or "")
    if user is None or not valid:
        _throttle().failed(email, request.remote_addr or "")
        return render_template("login.html", error="Wrong e-mail address or password.", email=email,  # type: ignore[return-value]
                               next=next_page), 401
    _throttle().succeeded(email)
    _sign_in(user.id)
    return redirect(_safe_next(next_page))


@blueprint.post("/logout")
def logout() -> Response:
    _end_session()  # the cookie, kept or copied, signs nobody in any more
    session.clear()
    flash("You are signed out.")
    return redirect(url_for("ui_auth.login"))


def _signed_in() -> None:
    if g.user is None:
        raise PageError("Sign in first.", 401)


@blueprint.get("/settings")
def settings_page() -> Response | str:
    if g.user is None:
        return redirect(url_for("ui_auth.login", next="/settings"))
    keys = services().meta.list_api_keys(tenant())
    return render_template("settings.html", keys=keys, providers=services().meta.list_providers(tenant()))


@blueprint.post("/settings/api-keys")
def create_api_key() -> Response:
    _signed_in()
    name = (request.form.get("name") or "").strip()[:128]
    _, token = services().meta.create_api_key(tenant(), name)
    # shown by this answer only, never put in a cookie or kept: the database has its hash
    page = make_response(render_template("settings.html", keys=services().meta.list_api_keys(tenant()),
                                         providers=services().meta.list_providers(tenant()), new_key=token), 201)
    page.headers["Cache-Control"] = "no-store"
    return page


@blueprint.post("/settings/api-keys/<token_hash>/revoke")
def revoke_api_key(token_hash: str) -> Response:
    _signed_in()
    if not services().meta.delete_api_key(tenant(), token_hash):
        raise PageError("No such API key.", 404)
    flash("The API key is revoked: requests using it are refused from now on.")
    return redirect(url_for("ui_auth.settings_page"))
