"""Shared test fixtures: settings in a temporary data dir, and the service gate.

Tests that need Redis or PostgreSQL call ``require_service``: where the server is unreachable
they skip with the reason, unless KBGRAPH_REQUIRE_SERVICES=1 (CI), where they fail instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kbgraph.config import Settings, load_settings

# the plugins below are imported by pytest_plugins; imported here first, their asserts would not be rewritten
pytest.register_assert_rewrite("support.es_tidy", "support.es_cluster")
from support.es_cluster import EsCluster  # noqa: E402
from support.es_tidy import es_prefix  # noqa: E402

# the scripted OpenAI-compatible server fixture (tests/ is on sys.path: it has no __init__.py); test
# indices dropped by whoever made them, checked at the end (es_tidy); the 3-node cluster (es_cluster)
pytest_plugins = ["support.fixtures", "support.es_tidy", "support.es_cluster"]

REDIS_URL = os.environ.get("KBGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/11")
POSTGRES_URL = os.environ.get("KBGRAPH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


# writes with refresh wait for the next scheduled refresh (refresh="wait_for"): tests keep it short
ES_TEST_REFRESH_INTERVAL = "100ms"


def require_service(name: str, reason: str) -> None:
    """Skip (or, with KBGRAPH_REQUIRE_SERVICES=1, fail) because ``name`` is unreachable."""
    message = f"{name} unreachable: {reason}"
    if os.environ.get("KBGRAPH_REQUIRE_SERVICES") == "1":
        pytest.fail(message + " (KBGRAPH_REQUIRE_SERVICES=1)")
    pytest.skip(message)


@contextmanager
def scratch_redis_prefix() -> Iterator[str]:
    """A fresh key prefix on the test Redis (unreachable: skip, or fail in CI); its keys are deleted
    afterwards, so several test modules and developers share one Redis database safely."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        require_service("Redis", f"{REDIS_URL}: {exc}")
    prefix = f"kbgraph_test:{uuid.uuid4().hex[:8]}:"
    try:
        yield prefix
    finally:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
        client.close()


def store_overrides() -> dict[str, str]:
    """The document store tests run on: embedded SQLite, or Elasticsearch when KBGRAPH_ES_URL is set
    (each caller then gets its own index prefix, so it never touches other indexes, and its indices
    are dropped when the fixture or test that asked is done: support/es_tidy.py; writes that must be
    visible wait for the next scheduled refresh, so a short interval keeps the tests quick)."""
    url = os.environ.get("KBGRAPH_ES_URL")
    if not url:
        return {"store": "sqlite"}
    return {"store": "elasticsearch", "es_url": url, "es_index_prefix": es_prefix(url),
            "es_refresh_interval": ES_TEST_REFRESH_INTERVAL}


def cluster_overrides(cluster: EsCluster, **extra: object) -> dict[str, object]:
    """The store on the 3-node cluster (support/es_cluster.py): every node's URL, one replica of
    two shards, a fresh prefix dropped after whoever asked."""
    return {"store": "elasticsearch", "es_url": cluster.url, "es_index_prefix": es_prefix(cluster.url),
            "es_refresh_interval": ES_TEST_REFRESH_INTERVAL, "es_replicas": 1, "es_shards": 2, **extra}


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings in a fresh data dir, with the hash embedder and no LLM (store: see store_overrides)."""
    for key in list(os.environ):
        if key.startswith("KBGRAPH_") and key not in {"KBGRAPH_REQUIRE_SERVICES", "KBGRAPH_ES_URL"}:
            monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    return load_settings(data_dir=tmp_path / "data", embedding_provider="hash", embedding_dim=64, **store_overrides())
