"""The ``store`` fixture: every DocStore engine the contract suite runs on.

SQLite always runs. Elasticsearch runs when KBGRAPH_ES_URL points at a node, and again on the
3-node cluster (``es_cluster``: two shards, one replica, every node's URL given to the client); the
test indexes carry a fresh prefix and are dropped afterwards. Tests take fresh tenants from
``new_tenant``, so they never see each other's rows even though the store is shared by the session.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import cluster_overrides
from kbgraph.store.base import DocStore
from support.es_tidy import es_prefix


# how to open another store object on the data of a session's store (the ``twin`` fixture), with
# the Elasticsearch refresh interval of the indexes it creates
_OPENERS: dict[int, Callable[[str], DocStore]] = {}


@pytest.fixture(scope="session", params=["sqlite", "elasticsearch", pytest.param("cluster", marks=pytest.mark.cluster)])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocStore]:
    from kbgraph.config import load_settings
    from kbgraph.store import open_store

    if request.param == "sqlite":
        from kbgraph.store.sqlite import SQLiteStore

        path = Path(tmp_path_factory.mktemp("contract")) / "store.db"

        def opener(refresh_interval: str = "") -> DocStore:
            return SQLiteStore(path)
    elif request.param == "cluster":
        overrides = cluster_overrides(request.getfixturevalue("es_cluster"))

        def opener(refresh_interval: str = "100ms") -> DocStore:
            return open_store(load_settings(**{**overrides, "es_refresh_interval": refresh_interval}))
    else:
        url = os.environ.get("KBGRAPH_ES_URL")
        if not url:
            pytest.skip("KBGRAPH_ES_URL not set")
        prefix = es_prefix(url)

        def opener(refresh_interval: str = "100ms") -> DocStore:
            return open_store(load_settings(store="elasticsearch", es_url=url, es_index_prefix=prefix,
                                            es_refresh_interval=refresh_interval))
    engine = opener()
    _OPENERS[id(engine)] = opener
    yield engine
    del _OPENERS[id(engine)]
    engine.close()


@pytest.fixture
def slow_pair(store: DocStore) -> Iterator[tuple[DocStore, DocStore]]:
    """Two more store objects on the store's data (as two processes would open it) whose new indexes
    refresh on their own only every 30 s: what one sees of the other's writes is what the contract
    promises, not what a scheduled refresh happened to make visible meanwhile."""
    pair = (_OPENERS[id(store)]("30s"), _OPENERS[id(store)]("30s"))
    yield pair
    for other in pair:
        other.close()


@pytest.fixture
def new_tenant(store: DocStore) -> Iterator[Callable[[], str]]:
    """A factory of fresh tenant ids whose indexes are created now and dropped after the test."""
    made: list[str] = []

    def make() -> str:
        tenant = f"tenant-{uuid.uuid4().hex}"
        store.ensure_index(tenant)
        made.append(tenant)
        return tenant

    yield make
    for tenant in made:
        store.drop_index(tenant)


@pytest.fixture
def tenant(new_tenant: Callable[[], str]) -> str:
    return new_tenant()


@pytest.fixture
def kb() -> str:
    return f"kb-{uuid.uuid4().hex[:12]}"
