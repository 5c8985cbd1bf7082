"""Cancel, then parse again, with real Celery workers: the cancelled run is still inside a slow model
call when the new run starts, and everything it reports afterwards (progress, its own "cancelled")
is ignored, because the document's row belongs to the newest run (``document.run_id``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from conftest import REDIS_URL, scratch_redis_prefix
from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.meta import FINISHED
from support.graph_model import GraphModel
from support.scripted_llm import ScriptedLLM
from support.web_host import celery_worker
from task_executor.celery_app import KBCelery

pytestmark = pytest.mark.services

CALL_SECONDS = 1.5  # each extraction call: long enough to cancel and parse again while one is out


class SlowGraphModel(GraphModel):
    """The scripted graph model, slow on extraction calls; ``release`` lets the waiting ones answer."""

    def __init__(self) -> None:
        super().__init__()
        self.in_extraction = threading.Event()

    def __call__(self, request: dict[str, Any]) -> str:
        kind, answer = self.answer(request)
        if kind == "extract":
            self.in_extraction.set()
            time.sleep(CALL_SECONDS)
        return answer


@pytest.fixture(scope="module")
def model() -> SlowGraphModel:
    return SlowGraphModel()


@pytest.fixture(scope="module")
def run_settings(tmp_path_factory: pytest.TempPathFactory, model: SlowGraphModel) -> Iterator[Settings]:
    with ScriptedLLM(responder=model) as llm, scratch_redis_prefix() as prefix:
        base = load_settings(data_dir=tmp_path_factory.mktemp("runs") / "data", store="sqlite",
                             embedding_provider="hash", embedding_dim=64, redis_url=REDIS_URL, redis_prefix=prefix,
                             llm_concurrency=1, llm_max_retries=0)
        yield llm.settings(base, embedding_provider="hash", embedding_model="")


@pytest.fixture(scope="module")
def worker(run_settings: Settings) -> Iterator[KBCelery]:
    with celery_worker(run_settings, refresh_delay=0.3, shutdown_timeout=60) as app:
        yield app


@pytest.fixture(scope="module")
def web(run_settings: Settings, worker: KBCelery) -> Iterator[Flask]:
    from web import create_app

    app = create_app(run_settings, celery=worker)
    yield app
    app.extensions["kbgraph"].close()


def _api(client: FlaskClient, key: str, method: str, path: str, **kwargs: Any) -> Any:
    body = client.open(f"/api/v1{path}", method=method, headers={"Authorization": f"Bearer {key}"}, **kwargs).get_json()
    assert body["code"] == 0, body
    return body.get("data")


def _row(client: FlaskClient, key: str, ds: str) -> dict[str, Any]:
    return _api(client, key, "GET", f"/datasets/{ds}/documents")["docs"][0]


def test_a_cancelled_run_never_writes_over_the_next_one(web: Flask, model: SlowGraphModel) -> None:
    meta = web.extensions["kbgraph"].meta
    meta.ensure_tenant("runs")
    key = meta.create_api_key("runs")[1]
    client = web.test_client()
    ds = _api(client, key, "POST", "/datasets", json={"name": "runs", "parser_config": {
        "chunk_token_num": 60, "graphrag": {"use_graphrag": True, "method": "general", "community": False}}})["id"]
    doc = _api(client, key, "POST", f"/datasets/{ds}/documents",
               data={"file": [((SAMPLE_CORPUS_DIR / "mira_castell.md").open("rb"), "mira_castell.md")]})[0]["id"]
    _api(client, key, "POST", f"/datasets/{ds}/chunks", json={"document_ids": [doc]})
    assert model.in_extraction.wait(60), "the first run never reached extraction"
    old_task = meta.list_tasks(ds, doc_id=doc, kind="index", newest_first=True, limit=1)[0]
    _api(client, key, "DELETE", f"/datasets/{ds}/chunks", json={"document_ids": [doc]})
    assert _row(client, key, ds)["run"] == "CANCEL"
    _api(client, key, "POST", f"/datasets/{ds}/chunks", json={"document_ids": [doc]})  # while the old call is out
    assert meta.get_task(ds, old_task.id).status not in FINISHED, "the old run ended before the new one began"

    seen: list[tuple[str, float, str]] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        row = _row(client, key, ds)
        seen.append((row["run"], row["progress"], row["progress_msg"]))
        if row["run"] in ("DONE", "FAIL"):
            break
        time.sleep(0.05)
    assert seen[-1][0] == "DONE", seen[-5:]
    old = meta.get_task(ds, old_task.id)
    assert old.status == "cancelled", old
    assert not [s for s in seen if s[0] == "CANCEL"], "the cancelled run wrote over the new one"
    running = [p for run, p, _ in seen if run == "RUNNING"]
    assert running == sorted(running), f"progress went back: another run wrote on the row {running}"
    time.sleep(2 * CALL_SECONDS)  # whatever the old run still had to say has been said
    final = _row(client, key, ds)
    assert final["run"] == "DONE" and final["chunk_count"] > 0, final
