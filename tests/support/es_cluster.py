"""The 3-node Elasticsearch cluster the cluster tests (marked ``cluster``) run on.

CI (.ci/run) starts the cluster with tests/es_node/es-node.sh before the tests and exports its
node URLs, comma-separated, in KBGRAPH_TEST_ES_CLUSTER_URL. Without it, the ``es_cluster`` session
fixture starts one itself on free ports (from KBGRAPH_TEST_ES_CLUSTER_PORT, 9250, up; HTTP on
three consecutive ports, transport 100 above), with the test profile and 400 MB of heap per node,
and stops it and removes its data when the session ends. Either way the drills can kill a node
(kill -9) and start it again on its data, because the cluster is es-node.sh's (its state lives in
tests/es_node/build/cluster-PORT/).

Registered with ``pytest_plugins`` in tests/conftest.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

SCRIPT = Path(__file__).resolve().parents[1] / "es_node" / "es-node.sh"
NODES = 3
HEAP = "400m"


@dataclass
class EsCluster:
    urls: list[str]
    port: int  # KBGRAPH_ES_PORT of the cluster: node I answers HTTP on port + I

    @property
    def url(self) -> str:
        """The form KBGRAPH_ES_URL takes: every node, comma-separated."""
        return ",".join(self.urls)

    @property
    def controllable(self) -> bool:
        """Whether es-node.sh of this checkout started it (so nodes can be killed and started)."""
        return (SCRIPT.parent / "build" / f"cluster-{self.port}" / "size").is_file()

    def script(self, *args: str, timeout: float = 180) -> str:
        env = {**os.environ, "KBGRAPH_ES_PORT": str(self.port), "KBGRAPH_ES_PROFILE": "test", "KBGRAPH_ES_HEAP": HEAP}
        done = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout)
        if done.returncode:
            raise RuntimeError(f"es-node.sh {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
        return done.stdout.strip()

    def kill(self, node: int) -> None:
        """kill -9 of one node: a crash, no shutdown at all."""
        self.script("node-kill", str(node))

    def start(self, node: int) -> None:
        """Start the node again on its data; it rejoins the cluster."""
        self.script("node-start", str(node))

    def health(self, **params: Any) -> dict[str, Any]:
        """The health as any node still answering sees it."""
        for url in self.urls:
            try:
                answer = requests.get(f"{url}/_cluster/health", params=params, timeout=120)
                return dict(answer.json())
            except requests.RequestException:
                continue
        raise RuntimeError(f"no node of {self.url} answers")

    def wait_for(self, status: str, nodes: int = NODES, timeout: float = 90) -> dict[str, Any]:
        health = self.health(wait_for_status=status, wait_for_nodes=str(nodes), timeout=f"{int(timeout)}s")
        assert not health.get("timed_out"), f"the cluster did not reach {status} with {nodes} nodes: {health}"
        return health


def _free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _free_base(start: int) -> int:
    """The first port from ``start`` (in steps of 10) with the cluster's HTTP and transport ports free."""
    for base in range(start, start + 200, 10):
        if all(_free(base + i) and _free(base + 100 + i) for i in range(NODES)):
            return base
    raise RuntimeError(f"no free ports for a {NODES}-node cluster from {start}")


@pytest.fixture(scope="session")
def es_cluster() -> Iterator[EsCluster]:
    from conftest import require_service

    given = os.environ.get("KBGRAPH_TEST_ES_CLUSTER_URL", "")
    if given:
        urls = [u.strip() for u in given.split(",") if u.strip()]
        yield EsCluster(urls, urlsplit(urls[0]).port or 9200)
        return
    missing = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
    if missing:
        require_service("Elasticsearch cluster", f"{', '.join(missing)} not found to start one with es-node.sh "
                                                 f"(or set KBGRAPH_TEST_ES_CLUSTER_URL)")
    cluster = EsCluster([], _free_base(int(os.environ.get("KBGRAPH_TEST_ES_CLUSTER_PORT", "9250"))))
    started = time.monotonic()
    try:
        cluster.urls = cluster.script("cluster-start", str(NODES), timeout=600).split(",")
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        cluster.script("cluster-stop", "--wipe")
        require_service("Elasticsearch cluster", f"es-node.sh cluster-start: {exc}")
    print(f"\n3-node Elasticsearch cluster {cluster.url} green after {time.monotonic() - started:.0f} s")
    try:
        yield cluster
    finally:
        cluster.script("cluster-stop", "--wipe")
