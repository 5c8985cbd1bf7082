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
from packaging.version import Version

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
# the S3 server tests/s3_server/s3-server.sh starts (.ci/run exports these; its defaults otherwise)
S3_URL = os.environ.get("KBGRAPH_TEST_S3_URL", "http://127.0.0.1:8333")
S3_KEY = os.environ.get("KBGRAPH_TEST_S3_KEY", "kbgraph-test")
S3_SECRET = os.environ.get("KBGRAPH_TEST_S3_SECRET", "kbgraph-test-secret")
# an identity that may read, write and list but not create buckets
S3_LIMITED_KEY = os.environ.get("KBGRAPH_TEST_S3_LIMITED_KEY", "kbgraph-limited")
S3_LIMITED_SECRET = os.environ.get("KBGRAPH_TEST_S3_LIMITED_SECRET", "kbgraph-limited-secret")
S3_TEST_BUCKET = "kbgraph-test"


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


@contextmanager
def scratch_postgres_database() -> Iterator[str]:
    """The URL of a brand-new database on the test PostgreSQL (unreachable: skip, or fail in CI),
    dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import OperationalError

    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    name = f"kbgraph_test_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        admin.dispose()
        require_service("PostgreSQL", str(exc).splitlines()[0])
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def s3_overrides(**changes: object) -> dict[str, object]:
    """Settings of an S3 blob store on the test server, under a fresh key prefix of the test bucket
    (unreachable: skip, or fail in CI). Tests delete what they put under their prefix."""
    from kbgraph.blob import BlobUnavailable, open_blob_store

    overrides: dict[str, object] = {
        "blob_store": "s3", "s3_endpoint_url": S3_URL, "s3_bucket": S3_TEST_BUCKET, "s3_access_key_id": S3_KEY,
        "s3_secret_access_key": S3_SECRET, "s3_prefix": f"test-{uuid.uuid4().hex[:12]}/", **changes}
    with open_blob_store(load_settings(**overrides)) as probe:
        try:
            probe.check()
        except BlobUnavailable as exc:
            require_service("S3", str(exc))
    return overrides


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


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The groups ``pytest -n N --dist loadgroup`` (the README's test command) keeps on one worker:
    every test of the 3-node cluster in one group, since its drills kill and restart the nodes the
    others use; every other test with the rest of its file, whose module fixtures (a drill's own
    node on a fixed port, a served app) it shares."""
    for item in items:
        on_cluster = item.get_closest_marker("cluster") is not None or "es_cluster" in item.fixturenames
        group = "cluster" if on_cluster else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_configure(config: pytest.Config) -> None:
    """A pytest whose test ids xdist 3.8 cannot extend with its groups (9.2 and later) is refused at
    once, with the reason, before any process collects a test."""
    if config.getoption("dist", default="no") == "loadgroup" and Version(pytest.__version__) >= Version("9.2"):
        raise pytest.UsageError(f"pytest {pytest.__version__} with pytest-xdist's --dist loadgroup scatters the "
                                "test groups over the processes: install the test extra's versions "
                                "(pip install -e '.[test]')")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse to run when the groups above did not reach xdist (a pytest whose test ids xdist cannot
    extend): the cluster's drills would then kill nodes under the other workers' tests."""
    if session.config.getoption("loadgroup", default=False) and session.items \
            and "@" not in session.items[0].nodeid:
        pytest.exit(f"pytest-xdist's --dist loadgroup cannot group the tests with this pytest ({pytest.__version__}): "
                    "install the versions the test extra names", returncode=pytest.ExitCode.USAGE_ERROR)
