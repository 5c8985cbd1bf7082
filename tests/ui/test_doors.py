"""Locked doors, through Flask's test client on the real app (real Redis, SQLite and PostgreSQL
metadata): the sign-in throttle per account and per address (Redis and in-process), sign-out ending
the session on the server, no secret in any cookie, the browser protections (CSP, framing, Secure
cookies behind HTTPS), text no database takes refused on every route the app registers, and unknown
addresses answering 404 without a Python repr."""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from conftest import REDIS_URL, scratch_postgres_database, scratch_redis_prefix
from kbgraph.config import Settings
from ui.test_accounts import create_kb, sign_up, token

PASSWORD = "secret pass"
REPR = re.compile(r"<\w+ '\d{3}: |\w+Error\(|Traceback")


def make_app(settings: Settings) -> Flask:
    from web import create_app

    return create_app(settings)


@pytest.fixture
def redis_settings(settings: Settings) -> Iterator[Settings]:
    with scratch_redis_prefix() as prefix:
        yield replace(settings, redis_url=REDIS_URL, redis_prefix=prefix, login_failures_per_account=3,
                      login_failures_per_address=5, login_window=60.0)


@pytest.fixture
def app(redis_settings: Settings) -> Iterator[Flask]:
    made = make_app(redis_settings)
    yield made
    made.extensions["kbgraph"].close()


def sign_in(client: FlaskClient, email: str, password: str, address: str = "10.0.0.1"):  # type: ignore[no-untyped-def]
    return client.post("/login", data={"email": email, "password": password, "csrf_token": token(client, "/login")},
                       environ_base={"REMOTE_ADDR": address})


def _throttle_drill(app: Flask, other: Flask) -> None:
    for email in ("victim@example.com", "bystander@example.com", "third@example.com"):
        client = app.test_client()
        sign_up(client, email)
    guesser = app.test_client()
    for _ in range(3):
        assert sign_in(guesser, "victim@example.com", "wrong guess").status_code == 401
    refused = sign_in(guesser, "victim@example.com", PASSWORD)  # the right password, while throttled
    assert refused.status_code == 429 and 0 < int(refused.headers["Retry-After"]) <= 60
    assert "Too many wrong passwords for this account" in refused.get_data(as_text=True)
    # the account is throttled from every address, and in every web process sharing the counts
    assert sign_in(other.test_client(), "victim@example.com", PASSWORD, address="10.9.9.9").status_code == 429
    # per address: two more failures on another account reach the address's limit of 5
    for _ in range(2):
        assert sign_in(guesser, "bystander@example.com", "wrong guess").status_code == 401
    blocked = sign_in(guesser, "third@example.com", PASSWORD)
    assert blocked.status_code == 429 and "your address" in blocked.get_data(as_text=True)
    # the same account from another address signs in
    assert sign_in(app.test_client(), "third@example.com", PASSWORD, address="10.0.0.2").status_code == 302


def test_sign_in_is_throttled_per_account_and_per_address_in_redis(app: Flask, redis_settings: Settings) -> None:
    other = make_app(redis_settings)  # a second web process: the counts are Redis's
    try:
        _throttle_drill(app, other)
    finally:
        other.extensions["kbgraph"].close()


def test_sign_in_is_throttled_in_the_process_without_redis(redis_settings: Settings) -> None:
    app = make_app(replace(redis_settings, redis_url="redis://127.0.0.1:1/0"))  # nothing listens there
    try:
        _throttle_drill(app, app)
    finally:
        app.extensions["kbgraph"].close()


def test_a_successful_sign_in_restarts_the_accounts_count(app: Flask) -> None:
    sign_up(app.test_client(), "typo@example.com")
    client = app.test_client()
    for _ in range(2):
        assert sign_in(client, "typo@example.com", "wrong guess").status_code == 401
    assert sign_in(client, "typo@example.com", PASSWORD, address="10.0.0.3").status_code == 302
    for _ in range(2):
        assert sign_in(app.test_client(), "typo@example.com", "wrong guess", address="10.0.0.4").status_code == 401
    assert sign_in(app.test_client(), "typo@example.com", PASSWORD, address="10.0.0.5").status_code == 302


def test_sign_out_ends_the_session_on_the_server(app: Flask) -> None:
    client = app.test_client()
    sign_up(client, "leaver@example.com")
    cookie = client.get_cookie("session")
    assert cookie is not None and client.get("/kbs").status_code == 200
    thief = app.test_client()
    thief.set_cookie("session", cookie.value)
    assert thief.get("/kbs").status_code == 200  # a copied cookie works while the session lives
    client.post("/logout", data={"csrf_token": token(client, "/kbs")})
    replay = thief.get("/kbs")
    assert replay.status_code == 302 and "/login" in replay.location
    assert thief.get("/ui/api/kbs").status_code in (401, 404)


def _session_payload(app: Flask, value: str) -> dict[str, object]:
    serializer = app.session_interface.get_signing_serializer(app)  # type: ignore[attr-defined]
    return dict(serializer.loads(value))


def test_no_secret_in_any_cookie(app: Flask) -> None:
    client = app.test_client()
    sign_up(client, "keeper@example.com")
    made = client.post("/settings/api-keys", data={"name": "ci", "csrf_token": token(client, "/settings")})
    key = re.search(r'id="new-key" class="secret">([^<]+)<', made.get_data(as_text=True)).group(1)
    for answer in (made, client.get("/settings")):
        for header in answer.headers.getlist("Set-Cookie"):
            assert key not in header
    payload = _session_payload(app, client.get_cookie("session").value)
    assert key not in repr(payload) and set(payload) <= {"sid", "csrf_token", "_permanent", "_flashes"}
    assert app.extensions["kbgraph"].meta.tenant_for_api_key(key) is not None


def test_pages_and_answers_carry_the_browser_protections(app: Flask) -> None:
    client = app.test_client()
    for path in ("/login", "/api/v1/datasets", "/nowhere", "/health"):
        headers = client.get(path).headers
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"], path
        assert "script-src 'self'" in headers["Content-Security-Policy"] and "unsafe" not in headers["Content-Security-Policy"]
        assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff"


def _session_cookie_header(client: FlaskClient, **kwargs: Any) -> str:
    # over HTTPS, Flask-WTF also wants the same-site Referer a browser sends
    kwargs.setdefault("headers", {})["Referer"] = "https://localhost/signup"
    answer = client.post("/signup", data={"email": f"s{uuid.uuid4().hex[:8]}@example.com", "password": PASSWORD,
                                          "confirm": PASSWORD, "csrf_token": token(client)}, **kwargs)
    assert answer.status_code == 302, answer.get_data(as_text=True)
    return next(h for h in answer.headers.getlist("Set-Cookie") if h.startswith("session="))


def test_the_session_cookie_is_secure_when_the_request_came_over_https(redis_settings: Settings) -> None:
    direct = make_app(redis_settings)
    proxied = make_app(replace(redis_settings, web_proxy_hops=1))
    try:
        assert "Secure" not in _session_cookie_header(direct.test_client())  # plain http: a local install
        assert "Secure" in _session_cookie_header(direct.test_client(), base_url="https://localhost")
        forwarded: dict[str, Any] = {"headers": {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "localhost"}}
        # a client's own X-Forwarded-Proto is not believed without a trusted proxy
        assert "Secure" not in _session_cookie_header(direct.test_client(), **copy.deepcopy(forwarded))
        behind_proxy = _session_cookie_header(proxied.test_client(), base_url="http://localhost",
                                              **copy.deepcopy(forwarded))
        assert "Secure" in behind_proxy and "HttpOnly" in behind_proxy
    finally:
        direct.extensions["kbgraph"].close()
        proxied.extensions["kbgraph"].close()


def test_unknown_addresses_answer_404_without_a_python_repr(app: Flask) -> None:
    client = app.test_client()
    page = client.get("/no-such-page")
    assert page.status_code == 404 and page.mimetype == "text/html" and "<h1>Not found</h1>" in page.get_data(as_text=True)
    assert client.get("/kbz", headers={"Accept": "application/json"}).status_code == 404
    sign_up(client, "lost@example.com")
    key_page = client.post("/settings/api-keys", data={"csrf_token": token(client, "/settings")})
    key = re.search(r'id="new-key" class="secret">([^<]+)<', key_page.get_data(as_text=True)).group(1)
    auth = {"Authorization": f"Bearer {key}"}
    for method, path in (("GET", "/api/v1/nowhere"), ("POST", "/api/v1/datasets/x/nothing"), ("GET", "/api/v1")):
        answer = client.open(path, method=method, headers=auth)
        assert answer.status_code == 404 and answer.get_json()["code"] == 404, path
        assert not REPR.search(answer.get_data(as_text=True)), answer.get_data(as_text=True)
    wrong_method = client.patch("/api/v1/datasets", headers=auth)
    assert wrong_method.status_code == 405 and not REPR.search(wrong_method.get_data(as_text=True))
    assert client.get("/ready-typo").status_code == 404 and client.get("/readyz").status_code == 404


@pytest.fixture(params=["sqlite", "postgresql"])
def any_meta_app(request: pytest.FixtureRequest, redis_settings: Settings) -> Iterator[Flask]:
    if request.param == "sqlite":
        made = make_app(redis_settings)
        yield made
        made.extensions["kbgraph"].close()
        return
    with scratch_postgres_database() as url:
        made = make_app(replace(redis_settings, database_url=url))
        yield made
        made.extensions["kbgraph"].close()


def _refused(answer, path: str) -> None:  # type: ignore[no-untyped-def]
    assert answer.status_code == 400, (path, answer.status_code, answer.get_data(as_text=True)[:300])
    body = answer.get_data(as_text=True)
    assert "not valid text" in body and not REPR.search(body), (path, body[:300])
    if path.startswith("/api/v1"):
        assert answer.get_json()["code"] == 101


def _filled(rule: str, value: str) -> str:
    return re.sub(r"<(?:[^:<>]+:)?[^<>]+>", value, rule)


def test_invalid_text_is_refused_on_every_route(any_meta_app: Flask) -> None:
    """Every route the app registers, each state-changing method, with a NUL in the path, the query,
    a form field and a JSON body, signed in (pages) or with a key (/api/v1): refused as bad input."""
    app = any_meta_app
    client = app.test_client()
    sign_up(client, "nul@example.com")
    kb_id = create_kb(client, "kept")
    key_page = client.post("/settings/api-keys", data={"csrf_token": token(client, "/settings")})
    key = re.search(r'id="new-key" class="secret">([^<]+)<', key_page.get_data(as_text=True)).group(1)
    auth = {"Authorization": f"Bearer {key}"}
    csrf = token(client, "/kbs")
    rules = [r for r in app.url_map.iter_rules() if r.endpoint != "ui_static.static"]
    assert len(rules) > 60
    for rule in rules:
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            path = _filled(rule.rule, kb_id)
            in_path = _filled(rule.rule, "a%00b") if "<" in rule.rule else None
            tries = [(in_path, {}), (path + "?name=a%00b", {}),
                     (path, {"json": {"name": "a\u0000b", "ids": ["x\u0000"]}}),
                     (path, {"data": '{"name": "\\ud800"}', "content_type": "application/json"})]
            if method != "GET":
                tries.append((path, {"data": {"name": "a\x00b", "csrf_token": csrf}}))
            for target, extra in tries:
                if target is None:
                    continue
                _refused(client.open(target, method=method, headers=auth, **extra), f"{method} {target}")
    meta = app.extensions["kbgraph"].meta
    user = meta.find_user_by_email("nul@example.com")
    assert [kb.name for kb in meta.list_kbs(user.tenant_id)] == ["kept"]


def test_nul_in_a_name_is_a_clear_error_not_a_server_error(any_meta_app: Flask) -> None:
    client = any_meta_app.test_client()
    sign_up(client, "names@example.com")
    page = client.post("/kbs", data={"name": "bad\x00name", "csrf_token": token(client, "/kbs")})
    assert page.status_code == 400 and "<h1>That did not work</h1>" in page.get_data(as_text=True)
    key_page = client.post("/settings/api-keys", data={"csrf_token": token(client, "/settings")})
    key = re.search(r'id="new-key" class="secret">([^<]+)<', key_page.get_data(as_text=True)).group(1)
    api = client.post("/api/v1/datasets", json={"name": "bad\u0000name"}, headers={"Authorization": f"Bearer {key}"})
    assert api.status_code == 400 and api.get_json() == {
        "code": 101, "message": "`name` holds a character that is not valid text (a NUL or an unpaired surrogate); "
                                "remove it and send the request again"}
    fine = client.post("/api/v1/datasets", json={"name": "good name"}, headers={"Authorization": f"Bearer {key}"})
    assert fine.get_json()["code"] == 0
