"""Accounts: sign up (each new user gets a tenant of their own), sign in, sign out, and the
settings page where a user creates and revokes the REST API's keys (shown once, stored hashed)."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

from flask import Response, flash, g, redirect, render_template, request, session, url_for
from werkzeug.security import check_password_hash, generate_password_hash

from kbgraph.meta import AlreadyExists, MetaError
from web.services import services
from web.ui.common import PageError, current_user, page_blueprint, tenant

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
    session.clear()  # a fresh session (and CSRF token) at every sign-in
    session["user_id"] = user_id
    session.permanent = True


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
    user = services().meta.find_user_by_email(email) if email else None
    valid = check_password_hash(user.password_hash if user else _DUMMY_HASH, request.form.get("password") or "")
    if user is None or not valid:
        return render_template("login.html", error="Wrong e-mail address or password.", email=email,  # type: ignore[return-value]
                               next=next_page), 401
    _sign_in(user.id)
    return redirect(_safe_next(next_page))


@blueprint.post("/logout")
def logout() -> Response:
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
    return render_template("settings.html", keys=keys, new_key=session.pop("new_api_key", None))


@blueprint.post("/settings/api-keys")
def create_api_key() -> Response:
    _signed_in()
    name = (request.form.get("name") or "").strip()[:128]
    _, token = services().meta.create_api_key(tenant(), name)
    # shown on the next page once, then gone: only its hash is stored
    session["new_api_key"] = token
    return redirect(url_for("ui_auth.settings_page"))


@blueprint.post("/settings/api-keys/<token_hash>/revoke")
def revoke_api_key(token_hash: str) -> Response:
    _signed_in()
    if not services().meta.delete_api_key(tenant(), token_hash):
        raise PageError("No such API key.", 404)
    flash("The API key is revoked: requests using it are refused from now on.")
    return redirect(url_for("ui_auth.settings_page"))
