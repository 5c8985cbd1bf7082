"""Fixtures of the cluster tests: the 3-node cluster (tests/support/es_cluster.py) healthy before each
test, and settings for an engine on it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.es_cluster import NODES, EsCluster

from conftest import cluster_overrides
from kbgraph.config import Settings, load_settings


@pytest.fixture
def cluster(es_cluster: EsCluster) -> Iterator[EsCluster]:
    """The cluster, green with every node, before and after the test (a drill that failed half
    way starts its node again, so the next test finds the cluster whole)."""
    es_cluster.wait_for("green")
    yield es_cluster
    if es_cluster.controllable:
        for node in range(NODES):
            es_cluster.start(node)  # a no-op for a node that runs
        es_cluster.wait_for("green", timeout=120)


@pytest.fixture
def drillable(cluster: EsCluster) -> EsCluster:
    if not cluster.controllable:
        pytest.skip(f"the cluster at {cluster.url} was not started by tests/es_node/es-node.sh of this checkout: "
                    f"its nodes cannot be killed and started")
    return cluster


def engine_settings(cluster: EsCluster, data_dir: Path, **extra: object) -> Settings:
    """An engine on the cluster: hash embedder, no LLM, one replica of two shards."""
    return load_settings(data_dir=data_dir, embedding_provider="hash", embedding_dim=64,
                         **cluster_overrides(cluster, **extra))


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings come from the test alone, never from a developer's KBGRAPH_* variables."""
    for key in list(os.environ):
        if key.startswith("KBGRAPH_") and key not in {"KBGRAPH_REQUIRE_SERVICES"}:
            monkeypatch.delenv(key, raising=False)
