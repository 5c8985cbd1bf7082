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

# the scripted OpenAI-compatible server fixture (tests/ is on sys.path: it has no __init__.py)
pytest_plugins = ["support.fixtures"]

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
    (each test session then uses its own index prefix, so it never touches other indexes; writes that
    must be visible wait for the next scheduled refresh, so a short interval keeps the tests quick)."""
    url = os.environ.get("KBGRAPH_ES_URL")
    if not url:
        return {"store": "sqlite"}
    return {"store": "elasticsearch", "es_url": url, "es_index_prefix": f"kbgraph_test_{uuid.uuid4().hex[:8]}_",
            "es_refresh_interval": ES_TEST_REFRESH_INTERVAL}


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings in a fresh data dir, with the hash embedder and no LLM (store: see store_overrides)."""
    for key in list(os.environ):
        if key.startswith("KBGRAPH_") and key not in {"KBGRAPH_REQUIRE_SERVICES", "KBGRAPH_ES_URL"}:
            monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    return load_settings(data_dir=tmp_path / "data", embedding_provider="hash", embedding_dim=64, **store_overrides())
