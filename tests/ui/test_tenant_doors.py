"""One tenant through every door (issue 38, item 5): knowledge bases an API key's tenant made are the
CLI's with `--tenant` (or the `tenant` setting), a web account an administrator creates for that tenant
or links to it sees them on its pages, and the API keys that account makes on its settings page act
for the same tenant; another tenant sees none of it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from flask import Flask
from flask.testing import FlaskClient

from kbgraph.cli import main
from kbgraph.config import Settings
from support.processes import service_env
from ui.test_accounts import sign_up, token


@pytest.fixture
def app(settings: Settings) -> Iterator[Flask]:
    from web import create_app

    app = create_app(settings)
    yield app
    app.extensions["kbgraph"].close()


def web_cli(settings: Settings, *args: str, input: str | None = None, code: int = 0) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "web.cli", *args], env=service_env(settings), input=input,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == code, f"kbgraph-web {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def kbgraph(settings: Settings, *args: str, code: int = 0, **env: str) -> Result:
    result = CliRunner().invoke(main, list(args), env={**{k: v for k, v in service_env(settings).items()
                                                          if k.startswith("KBGRAPH_")}, **env})
    assert result.exit_code == code, f"kbgraph {' '.join(args)}: {result.exit_code}\n{result.stdout}\n{result.stderr}"
    return result


def sign_in(client: FlaskClient, email: str, password: str) -> None:
    reply = client.post("/login", data={"email": email, "password": password, "csrf_token": token(client, "/login")})
    assert reply.status_code == 302, reply.get_data(as_text=True)


def datasets(client: FlaskClient, key: str) -> set[str]:
    reply = client.get("/api/v1/datasets", headers={"Authorization": f"Bearer {key}"}).get_json()
    assert reply["code"] == 0, reply
    return {d["name"] for d in reply["data"]}


def page_key(client: FlaskClient) -> str:
    made = client.post("/settings/api-keys", data={"name": "mine", "csrf_token": token(client, "/settings")})
    # the new key is shown by the answer to the form that made it, never kept for a later page
    found = re.search(r'id="new-key" class="secret">([^<]+)<', made.get_data(as_text=True))
    assert found
    return found.group(1)


def test_one_tenant_through_the_api_the_cli_and_the_pages(app: Flask, settings: Settings, tmp_path: Path) -> None:
    api_key = web_cli(settings, "apikey", "create", "--tenant", "acme").stdout.strip()
    client = app.test_client()
    made = client.post("/api/v1/datasets", json={"name": "from-api"}, headers={"Authorization": f"Bearer {api_key}"})
    assert made.get_json()["code"] == 0, made.get_json()

    # the CLI on that tenant: the option and the setting
    assert "from-api" in kbgraph(settings, "--tenant", "acme", "kb", "list").stdout
    note = tmp_path / "note.md"
    note.write_text("Mira Castell founded the Lumen Cartographers Guild in Varrow in 790.\n")
    kbgraph(settings, "--tenant", "acme", "index", str(note), "--kb", "from-cli")
    listed = json.loads(kbgraph(settings, "kb", "list", "--json", KBGRAPH_TENANT="acme").stdout)
    assert {k["name"] for k in listed} == {"from-api", "from-cli"}
    default = kbgraph(settings, "kb", "list").stdout
    assert "from-api" not in default and "from-cli" not in default and "no knowledge bases yet" in default
    typo = kbgraph(settings, "--tenant", "acmee", "kb", "list", code=2)
    assert "no tenant 'acmee'" in typo.stderr and "did you mean 'acme'" in typo.stderr.lower()
    assert datasets(client, api_key) == {"from-api", "from-cli"}

    # a web account made for the tenant, and one that signed up and is linked to it afterwards
    web_cli(settings, "user", "create", "--email", "ann@acme.example", "--tenant", "acme", "--password-stdin",
            input="ann's password\n")
    refused = web_cli(settings, "user", "create", "--email", "x@acme.example", "--tenant", "nobody",
                      "--password-stdin", input="long enough\n", code=2)
    assert "no tenant 'nobody'" in refused.stderr
    ann = app.test_client()
    sign_in(ann, "ann@acme.example", "ann's password")
    page = ann.get("/kbs").get_data(as_text=True)
    assert "from-api" in page and "from-cli" in page
    assert '<code id="tenant">acme</code>' in ann.get("/settings").get_data(as_text=True)
    bob = app.test_client()
    sign_up(bob, "bob@acme.example")
    assert "from-api" not in bob.get("/kbs").get_data(as_text=True)  # a tenant of his own so far
    linked = web_cli(settings, "user", "link", "--email", "bob@acme.example", "--tenant", "acme").stdout
    assert "now acts for tenant 'acme'" in linked
    assert "from-cli" in bob.get("/kbs").get_data(as_text=True)
    tenants = web_cli(settings, "tenants").stdout
    assert re.search(r"^acme: 2 knowledge base\(s\), 1 API key\(s\), accounts: ann@acme.example, bob@acme.example$",
                     tenants, re.M), tenants

    # keys made on the settings page act for the account's tenant; another tenant's key sees none of it
    assert datasets(client, page_key(ann)) == {"from-api", "from-cli"}
    assert datasets(client, page_key(bob)) == {"from-api", "from-cli"}
    carol = app.test_client()
    sign_up(carol, "carol@other.example")
    carols = page_key(carol)
    assert datasets(client, carols) == set()
    kb_id = next(k["id"] for k in listed if k["name"] == "from-cli")
    found = client.post("/api/v1/retrieval", json={"question": "Who founded the guild?", "dataset_ids": [kb_id]},
                        headers={"Authorization": f"Bearer {carols}"}).get_json()
    assert found["code"] != 0 and "from-cli" not in json.dumps(found)
