"""Limits at the door, over HTTP to a real ``kbgraph-web serve``: every oversized or malformed request
is refused with a clear message naming the limit and its setting; only Bearer keys are accepted;
internal failures answer with an error id and nothing of the server's internals."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from conftest import REDIS_URL, scratch_redis_prefix
from kbgraph.config import Settings, load_settings
from kbgraph.meta import MetaDB
from support.processes import WebServer

pytestmark = [pytest.mark.services, pytest.mark.slow]

LIMITS = {"max_request_bytes": 300_000, "max_question_chars": 200, "max_list_items": 50, "max_page_size": 100}


@pytest.fixture(scope="module")
def limit_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with scratch_redis_prefix() as prefix:
        yield load_settings(data_dir=tmp_path_factory.mktemp("limits") / "data", store="sqlite", embedding_provider="hash",
                            embedding_dim=64, redis_url=REDIS_URL, redis_prefix=prefix, web_workers=1, web_threads=4,
                            **LIMITS)


@pytest.fixture(scope="module")
def key(limit_settings: Settings) -> str:
    limit_settings.data_dir.mkdir(parents=True, exist_ok=True)
    with MetaDB.open(limit_settings.meta_url) as meta:
        meta.ensure_tenant("lim")
        return meta.create_api_key("lim")[1]


@pytest.fixture(scope="module")
def server(limit_settings: Settings, key: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    with WebServer(limit_settings, tmp_path_factory.mktemp("weblog") / "web.log") as web:
        yield web


@pytest.fixture(scope="module")
def dataset(server: WebServer, key: str) -> str:
    r = requests.post(server.url + "/api/v1/datasets", json={"name": "limits"}, timeout=30,
                      headers={"Authorization": f"Bearer {key}"})
    return str(r.json()["data"]["id"])


def _post(server: WebServer, key: str, path: str, body: str | bytes) -> requests.Response:
    return requests.post(server.url + path, data=body, timeout=30,
                         headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})


def _refused(response: requests.Response, status: int, *parts: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == 101, body
    for part in parts:
        assert part in body["message"], body["message"]


def test_request_and_field_limits(server: WebServer, key: str, dataset: str) -> None:
    ask = f'{{"question": "%s", "dataset_ids": ["{dataset}"]}}'
    _refused(_post(server, key, "/api/v1/retrieval", b"x" * 400_000), 413,
             "larger than the limit of 300000 bytes", "max_request_bytes")
    _refused(_post(server, key, "/api/v1/retrieval", ask % ("q" * 201)), 400,
             "`question` has 201 characters", "at most 200", "max_question_chars")
    ids = ", ".join(f'"{uuid.uuid1().hex}"' for _ in range(51))
    _refused(_post(server, key, "/api/v1/retrieval", f'{{"question": "q", "dataset_ids": [{ids}]}}'), 400,
             "`dataset_ids` has 51 items", "max_list_items")
    _refused(_post(server, key, "/api/v1/retrieval", f'{{"question": "q", "dataset_ids": ["{dataset}"], '
                                                     f'"page_size": 101}}'), 400, "`page_size` is 101", "max_page_size")
    r = requests.get(f"{server.url}/api/v1/datasets/{dataset}/documents?page_size=5000", timeout=30,
                     headers={"Authorization": f"Bearer {key}"})
    _refused(r, 400, "`page_size` is 5000", "max_page_size")
    for number in ("NaN", "Infinity", "-Infinity", "1e999"):
        r = _post(server, key, "/api/v1/retrieval", f'{{"question": "q", "dataset_ids": ["{dataset}"], '
                                                    f'"similarity_threshold": {number}}}')
        _refused(r, 400, "finite number")
    _refused(_post(server, key, "/api/v1/retrieval", "[" * 5000 + "]" * 5000), 400, "nested more than")
    # within the limits the same request is answered
    ok = _post(server, key, "/api/v1/retrieval", ask % ("q" * 200)).json()
    assert ok["code"] == 0, ok


def test_only_bearer_keys_are_accepted(server: WebServer, key: str) -> None:
    for header in (f"Basic {key}", f"Token {key}", f"Bearer {key} extra"):
        r = requests.get(server.url + "/api/v1/datasets", headers={"Authorization": header}, timeout=30).json()
        assert r == {"code": 109, "data": False,
                     "message": "Authentication error: send the API key as `Authorization: Bearer <key>`"}
    assert requests.get(server.url + "/api/v1/datasets", headers={"Authorization": f"bearer {key}"},
                        timeout=30).json()["code"] == 0


def test_internal_errors_answer_with_an_id_not_internals(limit_settings: Settings, key: str, dataset: str,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    from web import create_app

    app = create_app(limit_settings)
    app.extensions["kbgraph"].pool.base.store.close()  # a store that fails under every request
    client = app.test_client()
    with caplog.at_level(logging.ERROR, logger="web"):
        r = client.post("/api/v1/retrieval", headers={"Authorization": f"Bearer {key}"},
                        json={"question": "who", "dataset_ids": [dataset]})
    body: dict[str, Any] = r.get_json()
    # a store failure is named as one (code 105, RAGFlow's connection error), its details only logged
    assert body["code"] == 105 and body["message"].startswith("The document store could not answer")
    assert "closed" not in body["message"] and "Store" not in body["message"]
    error_id = body["message"].split("(error id ")[1].split(")")[0]
    logged = [rec for rec in caplog.records if error_id in rec.getMessage()]
    assert logged and logged[0].exc_info is not None  # the details are in the log, under the same id
    app.extensions["kbgraph"].close()


def test_health_and_ready_show_no_internals(limit_settings: Settings, tmp_path: Path) -> None:
    from web import create_app

    broken = limit_settings.replace(redis_url="redis://127.0.0.1:1/0")
    app = create_app(broken)
    client = app.test_client()
    assert client.get("/health").status_code == 200  # the process is alive: nothing else is asked
    r = client.get("/ready")
    body = r.get_json()
    assert r.status_code == 503 and body["status"] == "not ready" and body["checks"]["meta"] == "ok"
    assert body["checks"]["redis"].startswith("unavailable (id ") and "redis" in body["missing"]
    text = r.get_data(as_text=True)
    assert "127.0.0.1" not in text and str(limit_settings.data_dir) not in text and "Error" not in text
    app.extensions["kbgraph"].close()
