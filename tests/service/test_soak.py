"""The soak drill: 5,000 requests over HTTP to a real ``kbgraph-web serve`` (gunicorn) whose open-files
limit is low, with the worker process's descriptors and memory measured before and after.

A server that kept one SQLite connection per request thread ran out of descriptors after a few
hundred requests and grew by gigabytes; here both must stay flat and every request must succeed.
"""

from __future__ import annotations

import http.client
import json
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from conftest import REDIS_URL, scratch_redis_prefix
from kbgraph.engine import Engine
from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.meta import GraphConfig
from support.processes import TCP_LISTEN, WebServer, fd_targets, rss_bytes, tcp_sockets

pytestmark = [pytest.mark.services, pytest.mark.slow]

REQUESTS, WARM_UP, CLIENTS = 5000, 1000, 8
OPEN_FILES = 256


@pytest.fixture(scope="module")
def soak_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with scratch_redis_prefix() as prefix:
        yield load_settings(data_dir=tmp_path_factory.mktemp("soak") / "data", store="sqlite", embedding_provider="hash",
                            embedding_dim=64, redis_url=REDIS_URL, redis_prefix=prefix, web_workers=2, web_threads=4,
                            store_connections=4)


def _indexed_kb(settings: Settings) -> tuple[str, str, int]:
    """An API key and a knowledge base with the sample corpus indexed (graph on, nlp method), and
    how many connections the metadata DB's pool keeps (the server's pools are made the same way)."""
    with Engine.open(settings, tenant="soak") as engine:
        kb = engine.create_kb("corpus", graph=GraphConfig(enabled=True, method="nlp", community=False))
        engine.index_paths("corpus", sorted(SAMPLE_CORPUS_DIR.glob("*.md"))[:4])
        _, key = engine.meta.create_api_key("soak")
        return key, kb.id, engine.meta.engine.pool.size()


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


def _kinds(pid: int, server_port: int, redis_port: int) -> Counter[str]:
    """The process's descriptors counted by what they are: a file's path; a connection the server
    accepted, one to Redis, another socket (the listening one); a pipe; an anonymous inode's kind."""
    tcp = tcp_sockets()
    kinds: Counter[str] = Counter()
    for target in fd_targets(pid).values():
        if target.startswith("socket:["):
            local, remote, state = tcp.get(target[len("socket:["):-1], (0, 0, ""))
            if local == server_port and state != TCP_LISTEN:
                kinds["client connection"] += 1
            elif remote == redis_port:
                kinds["Redis connection"] += 1
            else:
                kinds["socket"] += 1
        elif target.startswith("pipe:["):
            kinds["pipe"] += 1
        else:
            kinds[target] += 1
    return kinds


def _settled(workers: list[int], server: WebServer, redis_port: int) -> dict[int, Counter[str]]:
    """The workers' descriptors once they closed the connections our clients closed (the server
    sees each end at its next poll: the count of them depends on when we look, not on a leak)."""
    deadline = time.monotonic() + 10
    while True:
        kinds = {pid: _kinds(pid, server.port, redis_port) for pid in workers}
        if not any(k["client connection"] for k in kinds.values()):
            return kinds
        assert time.monotonic() < deadline, f"connections the clients closed stay open in the server: {kinds}"
        time.sleep(0.05)


def test_5000_requests_leave_descriptors_and_memory_flat(soak_settings: Settings, tmp_path: Path) -> None:
    key, kb_id, meta_pool = _indexed_kb(soak_settings)
    redis_port = urlsplit(soak_settings.redis_url).port or 6379
    store = str(soak_settings.sqlite_store_path.resolve())
    meta = str((soak_settings.data_dir / "meta.db").resolve())
    metrics = str((soak_settings.data_dir / "metrics").resolve()) + "/"
    # each pooled connection to a SQLite database holds its file and its WAL (the -shm is one per
    # process); a pool opens connections as concurrent requests first need them, up to its size, so
    # how many are open depends on how the requests happened to overlap, not on how many there were
    pooled = {store: soak_settings.store_connections, f"{store}-wal": soak_settings.store_connections,
              meta: meta_pool, f"{meta}-wal": meta_pool,
              # redis-py keeps the connections its threads needed at once: one per request thread
              "Redis connection": soak_settings.web_threads}
    with WebServer(soak_settings, tmp_path / "web.log", open_files=OPEN_FILES) as server:
        workers = server.workers()
        assert len(workers) == soak_settings.web_workers
        for pid in workers:
            assert int(Path(f"/proc/{pid}/limits").read_text().split("Max open files")[1].split()[0]) == OPEN_FILES
        retrieved = _request(http.client.HTTPConnection("127.0.0.1", server.port, timeout=30), key, kb_id, 0)["data"]
        assert retrieved["chunks"], "the soak must exercise real retrieval"

        _run(server, key, kb_id, range(WARM_UP))
        before, rss = _settled(workers, server, redis_port), sum(map(rss_bytes, workers))
        _run(server, key, kb_id, range(WARM_UP, REQUESTS))
        assert server.workers() == workers, f"a worker was restarted:\n{server.output()}"
        after, grown_rss = _settled(workers, server, redis_port), sum(map(rss_bytes, workers)) - rss
        for pid in workers:
            grown = after[pid] - before[pid]
            # nothing else may grow at all; a pool stays within its size: a leak of one descriptor
            # per hundred requests (40 here) shows either way
            # the Prometheus files of a process (data_dir/metrics, one per kind of metric and pid) open at
            # its first metric of that kind: a worker the warm-up's requests missed opens them later
            first_metrics = {kind for kind in grown if kind.startswith(metrics) and not before[pid][kind]
                             and after[pid][kind] <= 2}
            unpooled = {kind: n for kind, n in grown.items() if kind not in pooled and kind not in first_metrics}
            assert not unpooled, (f"worker {pid} holds more descriptors after {REQUESTS - WARM_UP} requests: "
                                  f"{unpooled}\nbefore: {dict(before[pid])}\nafter: {dict(after[pid])}")
            over = {kind: after[pid][kind] for kind, size in pooled.items() if after[pid][kind] > size}
            assert not over, (f"worker {pid} holds more than its pools' connections after {REQUESTS - WARM_UP} "
                              f"requests: {over} (pool sizes {pooled})\nbefore: {dict(before[pid])}")
        assert grown_rss < 32 << 20, f"{grown_rss >> 20} MB more memory after {REQUESTS - WARM_UP} requests"
