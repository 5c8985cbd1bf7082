"""Accounts and the pages' protections through Flask's test client (no browser): password rules,
hashed storage, sign-in, CSRF on every state change, safe redirects, API keys shown once and stored
hashed, and one tenant's pages and page calls never reaching another's knowledge bases."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from kbgraph.config import Settings

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture
def app(settings: Settings) -> Iterator[Flask]:
    from web import create_app

    app = create_app(settings)
    yield app
    app.extensions["kbgraph"].close()


def token(client: FlaskClient, path: str = "/signup") -> str:
    found = TOKEN.search(client.get(path).get_data(as_text=True))
    assert found, f"no CSRF token on {path}"
    return found.group(1)


def sign_up(client: FlaskClient, email: str, password: str = "secret pass") -> None:
    reply = client.post("/signup", data={"email": email, "password": password, "confirm": password,
                                         "csrf_token": token(client)})
    assert reply.status_code == 302 and reply.location.endswith("/kbs"), reply.get_data(as_text=True)


def create_kb(client: FlaskClient, name: str) -> str:
    reply = client.post("/kbs", data={"name": name, "graph": "on", "method": "nlp", "entity_types": "person",
                                      "csrf_token": token(client, "/kbs")})
    assert reply.status_code == 302, reply.get_data(as_text=True)
    return reply.location.rsplit("/", 1)[1]


def test_sign_up_stores_a_hash_and_sign_in_checks_it(app: Flask) -> None:
    client = app.test_client()
    short = client.post("/signup", data={"email": "a@example.com", "password": "short", "confirm": "short",
                                         "csrf_token": token(client)})
    assert short.status_code == 400 and "at least 8" in short.get_data(as_text=True)
    sign_up(client, "A@Example.com")
    user = app.extensions["kbgraph"].meta.find_user_by_email("a@example.com")
    assert user is not None and "secret pass" not in user.password_hash and user.password_hash.startswith("scrypt:")
    again = app.test_client()
    duplicate = again.post("/signup", data={"email": "a@example.com", "password": "other pass1",
                                            "confirm": "other pass1", "csrf_token": token(again)})
    assert duplicate.status_code == 400 and "exists already" in duplicate.get_data(as_text=True)

    client.post("/logout", data={"csrf_token": token(client, "/kbs")})
    assert client.get("/kbs").status_code == 302  # signed out
    wrong = client.post("/login", data={"email": "a@example.com", "password": "wrong pass",
                                        "csrf_token": token(client, "/login")})
    assert wrong.status_code == 401 and "Wrong e-mail address or password" in wrong.get_data(as_text=True)
    right = client.post("/login", data={"email": "a@example.com", "password": "secret pass", "next": "//evil.example/x",
                                        "csrf_token": token(client, "/login")})
    assert right.status_code == 302 and right.location == "/kbs"  # never redirected off the site
    page = client.get("/kbs")
    assert page.status_code == 200
    # the knowledge base form says what the entity types do for the nlp method (issue 41)
    assert "The nlp method (no model)" in page.get_data(as_text=True) and "<code>other</code>" in page.get_data(as_text=True)


STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}


def _state_changing_page_routes(app: Flask) -> list[tuple[str, str, str]]:
    """(endpoint, method, rule) of every state-changing route the app registers outside the REST API
    (which takes API keys, never the session cookie)."""
    return [(rule.endpoint, method, rule.rule) for rule in app.url_map.iter_rules()
            for method in sorted((rule.methods or set()) & STATE_CHANGING)
            if not rule.rule.startswith("/api/v1")]


def test_every_state_change_needs_the_csrf_token(app: Flask) -> None:
    """Walks every state-changing route the app registers, with real ids (so that a route left
    unprotected would do its work, and answer otherwise than the refusal)."""
    client = app.test_client()
    sign_up(client, "b@example.com")
    kb_id = create_kb(client, "notes")
    svc = app.extensions["kbgraph"]
    tenant_id = svc.meta.find_user_by_email("b@example.com").tenant_id
    doc = svc.meta.create_document(kb_id, "a.txt", "", 1, "0" * 64)
    assistant = svc.meta.create_assistant(tenant_id, "helper")
    session = svc.meta.create_session(tenant_id, assistant.id, "s")
    ids = {"kb_id": kb_id, "doc_id": doc.id, "chunk_id": "0123456789abcdef", "assistant_id": assistant.id,
           "session_id": session.id, "token_hash": "0" * 64, "name": "acme"}
    routes = _state_changing_page_routes(app)
    assert {"ui_docs.delete_chunk", "ui_kb.delete_kb", "ui_auth.logout"} <= {r[0] for r in routes}
    for endpoint, method, rule in routes:
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", lambda m: ids[m.group(1)], rule)
        for extra in ({"data": {"name": "forged", "confirm_name": "notes"}}, {"json": {"ids": [doc.id]}}):
            answer = client.open(path, method=method, **extra)
            text = answer.get_data(as_text=True)
            assert answer.status_code == 400 and "CSRF" in text, (endpoint, method, answer.status_code, text[:200])
    assert [kb.name for kb in svc.engine(tenant_id).list_kbs()] == ["notes"]
    assert client.get("/kbs").status_code == 200  # still signed in: the forged sign-out did nothing
    # the REST API never takes the session cookie for a key
    assert client.post("/api/v1/datasets", json={"name": "forged"}).get_json()["message"] == "`Authorization` can't be empty"


def test_api_key_is_shown_once_and_revocable(app: Flask) -> None:
    client = app.test_client()
    sign_up(client, "c@example.com")
    made = client.post("/settings/api-keys", data={"name": "ci", "csrf_token": token(client, "/settings")})
    assert made.status_code == 201 and made.headers["Cache-Control"] == "no-store"
    key = re.search(r'id="new-key" class="secret">([^<]+)<', made.get_data(as_text=True)).group(1)
    assert key not in client.get("/settings").get_data(as_text=True)  # shown once
    meta = app.extensions["kbgraph"].meta
    user = meta.find_user_by_email("c@example.com")
    assert meta.tenant_for_api_key(key) == user.tenant_id
    stored = meta.list_api_keys(user.tenant_id)[0]
    assert key not in stored.token_hash
    client.post(f"/settings/api-keys/{stored.token_hash}/revoke", data={"csrf_token": token(client, "/settings")})
    assert meta.tenant_for_api_key(key) is None


def test_another_tenants_pages_and_calls_are_not_found(app: Flask) -> None:
    alice, bob = app.test_client(), app.test_client()
    sign_up(alice, "alice@example.com")
    sign_up(bob, "bob@example.com")
    kb_id = create_kb(alice, "private")
    assert "private" not in bob.get("/kbs").get_data(as_text=True)
    for path in (f"/kbs/{kb_id}", f"/kbs/{kb_id}/settings", f"/kbs/{kb_id}/retrieval?question=x",
                 f"/kbs/{kb_id}/graph", f"/kbs/{kb_id}/graph/export.json", f"/ui/api/kbs/{kb_id}/graph"):
        assert bob.get(path).status_code == 404, path
    bob_token = token(bob, "/kbs")
    deleted = bob.post(f"/kbs/{kb_id}/delete", data={"confirm_name": "private", "csrf_token": bob_token})
    assert deleted.status_code == 404
    settings = bob.post(f"/kbs/{kb_id}/settings", data={"chunk_tokens": "64", "csrf_token": bob_token})
    assert settings.status_code == 404
    assert "private" in alice.get("/kbs").get_data(as_text=True)


def test_errors_are_pages_not_stack_traces(app: Flask) -> None:
    client = app.test_client()
    sign_up(client, "d@example.com")
    missing = client.get("/kbs/0123456789abcdef/retrieval")
    assert missing.status_code == 404 and "Traceback" not in missing.get_data(as_text=True)
    assert "<h1>Not found</h1>" in missing.get_data(as_text=True)
    kb_id = create_kb(client, "k")
    bad = client.get(f"/kbs/{kb_id}/retrieval?question=x&top_n=abc")
    assert bad.status_code == 400 and "top n must be a number" in bad.get_data(as_text=True)
    off = client.post("/kbs", data={"name": "llm", "graph": "on", "method": "general",
                                    "csrf_token": token(client, "/kbs")})
    assert off.status_code == 400 and "needs no LLM" in off.get_data(as_text=True)


def test_graph_page_says_how_to_install_missing_assets(app: Flask, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path) -> None:  # type: ignore[no-untyped-def]
    from web.ui import assets, common

    client = app.test_client()
    sign_up(client, "e@example.com")
    kb_id = create_kb(client, "g")
    monkeypatch.setattr(common, "BUILD_DIR", tmp_path / "nothing-built")
    page = client.get(f"/kbs/{kb_id}/graph").get_data(as_text=True)
    assert "kbgraph-web setup-assets" in page and "graph.js" not in page
    monkeypatch.setattr(assets, "BUNDLE", tmp_path / "nothing-built" / "graph-lib.js")
    monkeypatch.setattr(assets.shutil, "which", lambda _: None)
    with pytest.raises(assets.AssetsError, match="npm is not installed"):
        assets.setup_assets()


def test_assistants_are_edited_and_stay_with_their_tenant(app: Flask) -> None:
    alice, bob = app.test_client(), app.test_client()
    sign_up(alice, "f@example.com")
    sign_up(bob, "g@example.com")
    kb_id = create_kb(alice, "lore")
    made = alice.post("/chat", data={"name": "Guide", "kb_ids": [kb_id], "use_kg": "on", "quote": "on",
                                     "temperature": "0.3", "top_n": "4", "csrf_token": token(alice, "/chat")})
    assert made.status_code == 302
    assistant_id = made.location.split("/chat/")[1].split("?")[0]
    meta = app.extensions["kbgraph"].meta
    tenant_of = meta.find_user_by_email("f@example.com").tenant_id
    assistant = meta.get_assistant(tenant_of, assistant_id)
    assert assistant.kb_ids == [kb_id] and assistant.prompt_config["use_kg"] is True and assistant.top_n == 4
    assert "{knowledge}" in assistant.prompt_config["system"]
    alice.post(f"/chat/{assistant_id}/edit", data={"name": "Guide", "top_n": "9", "temperature": "0.5",
                                                   "csrf_token": token(alice, f"/chat/{assistant_id}")})
    edited = meta.get_assistant(tenant_of, assistant_id)
    assert edited.kb_ids == [] and edited.prompt_config["use_kg"] is False and edited.top_n == 9
    assert edited.llm_setting["temperature"] == 0.5
    session = meta.list_sessions(tenant_of, assistant_id)[0]
    assert bob.get(f"/chat/{assistant_id}").status_code == 404
    asked = bob.post(f"/ui/api/chat/{assistant_id}/sessions/{session.id}/ask", json={"question": "hi"},
                     headers={"X-CSRFToken": token(bob, "/chat")})
    assert asked.status_code == 404
    assert bob.post(f"/chat/{assistant_id}/delete", data={"csrf_token": token(bob, "/chat")}).status_code == 404
    assert meta.get_assistant(tenant_of, assistant_id).name == "Guide"
