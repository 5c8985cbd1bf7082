"""The soak drill: 5,000 requests over HTTP to a real ``kbgraph-web serve`` (gunicorn) whose open-files
limit is low, with the worker process's descriptors and memory measured before and after.

A server that kept one SQLite connection per request thread ran out of descriptors after a few
hundred requests and grew by gigabytes; here both must stay flat and every request must succeed.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from conftest import REDIS_URL, scratch_redis_prefix
from kbgraph.app import Engine
from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.meta import GraphConfig
from support.processes import WebServer, open_fds, rss_bytes

pytestmark = [pytest.mark.services, pytest.mark.slow]

REQUESTS, WARM_UP, CLIENTS = 5000, 1000, 8
OPEN_FILES = 256


@pytest.fixture(scope="module")
def soak_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with scratch_redis_prefix() as prefix:
        yield load_settings(data_dir=tmp_path_factory.mktemp("soak") / "data", store="sqlite", embedding_provider="hash",
                            embedding_dim=64, redis_url=REDIS_URL, redis_prefix=prefix, web_workers=2, web_threads=4,
                            store_connections=4)


def _indexed_kb(settings: Settings) -> tuple[str, str]:
    """An API key and a knowledge base with the sample corpus indexed (graph on, nlp method)."""
    with Engine.open(settings, tenant="soak") as engine:
        kb = engine.create_kb("corpus", graph=GraphConfig(enabled=True, method="nlp", community=False))
        engine.index_paths("corpus", sorted(SAMPLE_CORPUS_DIR.glob("*.md"))[:4])
        _, key = engine.meta.create_api_key("soak")
        return key, kb.id


def _request(conn: http.client.HTTPConnection, key: str, kb_id: str, n: int) -> dict[str, Any]:
    """One request on a kept-alive connection (http.client: the client's own CPU stays small)."""
    headers = {"Authorization": f"Bearer {key}"}
    kind = n % 10  # a retrieval in ten (the store's search), three graph reads (its scans), six listings
    if kind == 0:
        body = json.dumps({"question": f"Who founded the guild? {n % 7}", "dataset_ids": [kb_id]})
        conn.request("POST", "/api/v1/retrieval", body, {**headers, "Content-Type": "application/json"})
    elif kind <= 3:
        conn.request("GET", f"/api/v1/datasets/{kb_id}/knowledge_graph", headers=headers)
    elif kind <= 6:
        conn.request("GET", "/api/v1/datasets", headers=headers)
    else:
        conn.request("GET", f"/api/v1/datasets/{kb_id}/documents", headers=headers)
    response = conn.getresponse()
    text = response.read()
    assert response.status == 200, text
    answer = json.loads(text)
    assert answer["code"] == 0, answer
    return answer


def _run(server: WebServer, key: str, kb_id: str, numbers: range) -> None:
    def client(offset: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            for n in numbers[offset::CLIENTS]:
                _request(conn, key, kb_id, n)
        finally:
            conn.close()

    with ThreadPoolExecutor(CLIENTS) as pool:
        for done in [pool.submit(client, i) for i in range(CLIENTS)]:
            done.result()


def test_5000_requests_leave_descriptors_and_memory_flat(soak_settings: Settings, tmp_path: Path) -> None:
    key, kb_id = _indexed_kb(soak_settings)
    with WebServer(soak_settings, tmp_path / "web.log", open_files=OPEN_FILES) as server:
        workers = server.workers()
        assert len(workers) == soak_settings.web_workers
        for pid in workers:
            assert int(Path(f"/proc/{pid}/limits").read_text().split("Max open files")[1].split()[0]) == OPEN_FILES
        retrieved = _request(http.client.HTTPConnection("127.0.0.1", server.port, timeout=30), key, kb_id, 0)["data"]
        assert retrieved["chunks"], "the soak must exercise real retrieval"

        _run(server, key, kb_id, range(WARM_UP))
        fds, rss = sum(map(open_fds, workers)), sum(map(rss_bytes, workers))
        _run(server, key, kb_id, range(WARM_UP, REQUESTS))
        assert server.workers() == workers, f"a worker was restarted:\n{server.output()}"
        grown_fds, grown_rss = sum(map(open_fds, workers)) - fds, sum(map(rss_bytes, workers)) - rss
        # a pooled connection (database + WAL file) a thread first needed late may still open; a leak
        # of one descriptor per hundred requests would show as 40
        assert grown_fds <= 8, f"{grown_fds} descriptors more after {REQUESTS - WARM_UP} requests"
        assert grown_rss < 32 << 20, f"{grown_rss >> 20} MB more memory after {REQUESTS - WARM_UP} requests"
