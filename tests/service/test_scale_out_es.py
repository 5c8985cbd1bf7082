"""Scale-out on Elasticsearch, for real: one web process and two worker processes share an
Elasticsearch node, Redis and PostgreSQL and index one knowledge base concurrently; the graph they
build equals the one a single in-process engine builds from the same files one after another, and
each tenant's rows live in that tenant's own index on the node.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
import sqlalchemy
from support.es_tidy import es_prefix

from conftest import ES_TEST_REFRESH_INTERVAL, POSTGRES_URL, REDIS_URL, require_service
from kbgraph.engine import Engine
from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.graph.invariants import stored_graph
from kbgraph.meta.schemas import GraphConfig
from kbgraph.store.base import DocStore, eq
from kbgraph.store.records import CommunityReport
from task_executor.locks import kb_lock_key
from task_executor.tasks import refresh_pending_key

pytestmark = pytest.mark.services

DOCS = ["glass_tower.md", "great_flood_of_varrow.md", "guild_registry.md", "lumen_cartographers_guild.md",
        "mira_castell.md", "order_of_the_tidewardens.md", "salt_war.md", "tobias_wren.txt"]
CHUNK_TOKENS = 128
CHUNK_OVERLAP = 16  # what the REST API derives from chunk_token_num=128 (at most an eighth)
GRAPH = GraphConfig(enabled=True, method="nlp", community=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Settings every process shares: the node, Redis, PostgreSQL, one data dir (uploaded files)."""
    es_url = os.environ.get("KBGRAPH_ES_URL")
    if not es_url:
        require_service("Elasticsearch", "KBGRAPH_ES_URL not set (bash tests/es_node/es-node.sh start)")
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        require_service("Redis", f"{REDIS_URL}: {exc}")
    try:
        with sqlalchemy.create_engine(POSTGRES_URL).connect():
            pass
    except sqlalchemy.exc.OperationalError as exc:
        require_service("PostgreSQL", f"{POSTGRES_URL}: {exc.orig}")
    prefix = uuid.uuid4().hex[:8]
    yield load_settings(data_dir=tmp_path_factory.mktemp("scale") / "data", store="elasticsearch", es_url=es_url,
                        es_index_prefix=es_prefix(es_url), es_refresh_interval=ES_TEST_REFRESH_INTERVAL,
                        database_url=POSTGRES_URL, redis_url=REDIS_URL, redis_prefix=f"kbgraph_test:{prefix}:",
                        embedding_provider="hash", embedding_dim=64, graph_refresh_delay=0.5)
    for key in client.scan_iter(match=f"kbgraph_test:{prefix}:*"):
        client.delete(key)
    client.close()


def _env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBGRAPH_")}
    env.update(KBGRAPH_DATA_DIR=str(settings.data_dir), KBGRAPH_STORE="elasticsearch", KBGRAPH_ES_URL=settings.es_url,
               KBGRAPH_ES_INDEX_PREFIX=settings.es_index_prefix,
               KBGRAPH_ES_REFRESH_INTERVAL=settings.es_refresh_interval, KBGRAPH_DATABASE_URL=settings.database_url,
               KBGRAPH_REDIS_URL=settings.redis_url, KBGRAPH_REDIS_PREFIX=settings.redis_prefix,
               KBGRAPH_EMBEDDING_PROVIDER="hash", KBGRAPH_EMBEDDING_DIM="64",
               KBGRAPH_GRAPH_REFRESH_DELAY=str(settings.graph_refresh_delay), KBGRAPH_WEB_WORKERS="1",
               KBGRAPH_WEB_THREADS="4")
    return env


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


@pytest.fixture(scope="module")
def cluster(shared: Settings) -> Iterator[str]:
    """One web process and two worker processes; yields the API's base URL."""
    bin_dir = Path(sys.executable).parent
    env = _env(shared)
    port = _free_port()
    web = subprocess.Popen([str(bin_dir / "kbgraph-web"), "serve", "--host", "127.0.0.1", "--port", str(port)],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    workers = [subprocess.Popen([str(bin_dir / "kbgraph-worker"), "--pool", "threads", "--concurrency", "2",
                                 "--loglevel", "WARNING", "--hostname", f"scale{n}@%h"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
               for n in range(2)]
    base = f"http://127.0.0.1:{port}"
    try:
        def answers() -> bool:
            assert web.poll() is None, "the web process exited"
            try:
                return requests.get(f"{base}/api/v1/datasets", timeout=10).status_code in (200, 401)
            except (requests.ConnectionError, requests.Timeout):
                return False

        _wait_for(answers, 60, "the web process")
        yield base
    finally:
        for process in [web, *workers]:
            _stop(process)


def _api_key(settings: Settings, tenant: str) -> str:
    made = subprocess.run([str(Path(sys.executable).parent / "kbgraph-web"), "apikey", "create", "--tenant", tenant],
                          env=_env(settings), capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def _call(base: str, key: str, method: str, path: str, **kw: Any) -> Any:
    answer = requests.request(method, base + path, headers={"Authorization": f"Bearer {key}"}, timeout=60, **kw)
    body = answer.json()
    assert body.get("code") == 0, body
    return body.get("data")


def _fragments(description: str) -> tuple[str, ...]:
    """An nlp description's sentences: they are ordered by document id, and the two knowledge
    bases compared here gave the same files different ids."""
    return tuple(sorted(description.split("\n")))


def _graph(store: DocStore, tenant: str, kb_id: str) -> dict[str, Any]:
    snap = stored_graph(store, tenant, kb_id)
    reports = [CommunityReport.from_doc(d) for d in
               store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", CommunityReport.KIND)])]
    return {
        "entities": {k: (e.name, e.type, _fragments(e.description), sorted(e.aliases), e.mention_count,
                         round(e.pagerank, 9)) for k, e in snap.entities.items()},
        "relations": {k: (_fragments(r.description), r.weight, r.mention_count) for k, r in snap.relations.items()},
        "communities": sorted((r.level, tuple(sorted(r.member_keys)), r.title) for r in reports),
    }


def _settled(client: redis.Redis, settings: Settings, kb_id: str) -> bool:
    """No graph refresh waiting or running and nobody holding the knowledge base's lock."""
    return not client.exists(refresh_pending_key(settings.redis_prefix, kb_id)) and \
        not client.exists(kb_lock_key(settings.redis_prefix, kb_id))


def test_two_workers_and_a_web_process_build_the_sequential_graph(shared: Settings, cluster: str,
                                                                   tmp_path: Path) -> None:
    tenant = f"scale-{uuid.uuid4().hex[:8]}"
    key = _api_key(shared, tenant)
    ds = _call(cluster, key, "POST", "/api/v1/datasets", json={
        "name": "varrow", "parser_config": {"chunk_token_num": CHUNK_TOKENS,
                                            "graphrag": {"use_graphrag": True, "method": "nlp", "community": True}}})
    files = [("file", (n, (SAMPLE_CORPUS_DIR / n).read_bytes())) for n in DOCS]
    ids = [d["id"] for d in _call(cluster, key, "POST", f"/api/v1/datasets/{ds['id']}/documents", files=files)]
    _call(cluster, key, "POST", f"/api/v1/datasets/{ds['id']}/chunks", json={"document_ids": ids})

    def parsed() -> list[dict[str, Any]] | None:
        docs = _call(cluster, key, "GET", f"/api/v1/datasets/{ds['id']}/documents?page_size=100")["docs"]
        return docs if all(d["run"] in ("DONE", "FAIL", "CANCEL") for d in docs) else None

    docs = _wait_for(parsed, 240, "the workers to parse every document")
    assert all(d["run"] == "DONE" for d in docs), docs
    client = redis.Redis.from_url(shared.redis_url)
    try:
        # the debounced refresh runs after the last merge; settled twice in a row = done
        _wait_for(lambda: _settled(client, shared, ds["id"]) and not time.sleep(1.0)
                  and _settled(client, shared, ds["id"]), 120, "the graph refresh")
    finally:
        client.close()

    sequential_settings = shared.replace(data_dir=tmp_path / "sequential", database_url="")
    sequential_tenant = f"seq-{uuid.uuid4().hex[:8]}"
    with Engine.open(sequential_settings, tenant=sequential_tenant) as engine:
        kb = engine.create_kb("varrow", graph=GRAPH, chunk_tokens=CHUNK_TOKENS, chunk_overlap=CHUNK_OVERLAP)
        for name in DOCS:  # one document after another
            engine.index_paths("varrow", [SAMPLE_CORPUS_DIR / name])
        engine.refresh_graph("varrow")
        store = engine.store
        try:
            concurrent = _graph(store, tenant, ds["id"])
            sequential = _graph(store, sequential_tenant, kb.id)
            assert len(sequential["entities"]) > 20 and sequential["communities"]
            assert concurrent == sequential

            # one index per tenant on the node, each holding only its own tenant's knowledge base
            es = store._client  # the node itself, not the DocStore's view of it
            indexes = {store.index_for(tenant): ds["id"], store.index_for(sequential_tenant): kb.id}
            assert len(indexes) == 2
            for index, kb_id in indexes.items():
                assert es.indices.exists(index=index)
                es.indices.refresh(index=index)
                found = es.search(index=index, size=0, aggs={"kbs": {"terms": {"field": "kb_id", "size": 10}}})
                assert [b["key"] for b in found["aggregations"]["kbs"]["buckets"]] == [kb_id]
            # and a tenant naming another tenant's knowledge base sees nothing of it
            assert store.count(sequential_tenant, [ds["id"]]) == 0
            assert store.count(tenant, [kb.id]) == 0
        finally:
            store.drop_index(tenant)
            store.drop_index(sequential_tenant)
