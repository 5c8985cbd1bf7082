"""Prometheus metrics of kbgraph's service processes (prometheus_client).

Each process group exposes what it does: the web server (``/metrics``, web/ops.py) its requests and
the model calls its questions make, plus the deployment's task rows by state, the broker's queue
depth and the workers alive (read at scrape time from the metadata database and Redis); a worker
(``worker_metrics_port``) the tasks it ran and the model calls, tokens and embeddings they cost.

Both run several processes (gunicorn workers, Celery's prefork children), so they use
prometheus_client's multiprocess mode: ``use_multiprocess_dir`` points PROMETHEUS_MULTIPROC_DIR at a
fresh folder before prometheus_client is first imported (it chooses its value store at import), each
process writes its counters there, and a scrape adds them up (``scrape_registry``). This module
therefore imports prometheus_client only inside its functions.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from celery.signals import worker_ready, worker_shutdown

from kbgraph.llm.base import Usage
from kbgraph.llm.layers.accounting import add_usage_listener

log = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# seconds: a request answered from memory takes ~1 ms, a question with the graph 50-500 ms, an
# upload or a chat answer seconds
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
TASK_BUCKETS = (0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)


def use_multiprocess_dir(directory: Path) -> Path:
    """Multiprocess mode for this process and the ones it forks, in ``directory`` (emptied), unless
    PROMETHEUS_MULTIPROC_DIR is set already (then that folder, as the operator chose). Call before
    anything imports prometheus_client."""
    chosen = os.environ.get(MULTIPROC_ENV)
    if chosen:
        return Path(chosen)
    shutil.rmtree(directory, ignore_errors=True)  # counters of an earlier run of the same process id
    directory.mkdir(parents=True, exist_ok=True)
    os.environ[MULTIPROC_ENV] = str(directory)
    return directory


def multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_ENV))


def process_dead(pid: int) -> None:
    """A forked process ended (gunicorn's child_exit): its live gauges no longer count."""
    if multiprocess():
        from prometheus_client import multiprocess as mp

        mp.mark_process_dead(pid)


_MADE: list[SimpleNamespace] = []
_MAKING = threading.Lock()


def metrics() -> SimpleNamespace:
    """This process's metric objects, made once (after the multiprocess choice) by whichever
    thread asks first (a metric registered twice is an error)."""
    if not _MADE:
        with _MAKING:
            if not _MADE:
                _MADE.append(_make_metrics())
    return _MADE[0]


def _make_metrics() -> SimpleNamespace:
    from prometheus_client import Counter, Histogram

    return SimpleNamespace(
        requests=Counter("kbgraph_http_requests_total", "HTTP requests answered, by route and status",
                         ["method", "route", "status"]),
        latency=Histogram("kbgraph_http_request_duration_seconds", "Seconds to answer an HTTP request, by route",
                          ["method", "route"], buckets=LATENCY_BUCKETS),
        model_calls=Counter("kbgraph_model_calls_total", "Model calls by phase (extract, glean, summarize, report, "
                            "query, chat, embed...) and outcome (answered, cached, failed)", ["phase", "outcome"]),
        model_tokens=Counter("kbgraph_model_tokens_total", "Model tokens by phase and kind (prompt, completion)",
                             ["phase", "kind"]),
        embedded_texts=Counter("kbgraph_embedder_texts_total", "Texts embedded (with embedder seconds: throughput)",
                               ["side"]),
        embed_seconds=Counter("kbgraph_embedder_seconds_total", "Seconds spent embedding", ["side"]),
        tasks=Counter("kbgraph_tasks_total", "Tasks a worker ran, by kind and how they ended", ["kind", "status"]),
        task_seconds=Histogram("kbgraph_task_duration_seconds", "Seconds a task ran, by kind", ["kind"],
                               buckets=TASK_BUCKETS),
    )


def _count_usage(phase: str, usage: Usage) -> None:
    m = metrics()
    for outcome, n in (("answered", usage.calls), ("cached", usage.cached_calls), ("failed", usage.failures)):
        if n:
            m.model_calls.labels(phase, outcome).inc(n)
    for kind, n in (("prompt", usage.prompt_tokens), ("completion", usage.completion_tokens)):
        if n:
            m.model_tokens.labels(phase, kind).inc(n)


def count_model_usage() -> None:
    """From now on every model call of this process is counted (the ledgers' listener)."""
    add_usage_listener(_count_usage)


class MeteredEmbedder:
    """An embedder whose texts and seconds are counted (``kbgraph_embedder_*``); anything else is the
    inner embedder's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _timed(self, side: str, embed: Any, texts: Sequence[str]) -> np.ndarray:
        started = time.perf_counter()
        vectors = embed(texts)
        m = metrics()
        m.embed_seconds.labels(side).inc(time.perf_counter() - started)
        m.embedded_texts.labels(side).inc(len(texts))
        return vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._timed("passage", self._inner.embed, texts)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._timed("query", self._inner.embed_query, texts)


def task_ended(kind: str, status: str, seconds: float) -> None:
    m = metrics()
    m.tasks.labels(kind, status).inc()
    m.task_seconds.labels(kind).observe(seconds)


def scrape_registry(*collectors: Any) -> Any:
    """The registry a scrape reads: every process's counters added up (multiprocess mode) or this
    process's, plus ``collectors`` (read at scrape time)."""
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client import multiprocess as mp

    if not multiprocess() and not collectors:
        return REGISTRY
    registry = CollectorRegistry()
    if multiprocess():
        mp.MultiProcessCollector(registry)
    else:
        registry.register(_Forward(REGISTRY))
    for collector in collectors:
        registry.register(collector)
    return registry


class _Forward:
    """The default registry's metrics inside another registry."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Any]:
        yield from self.registry.collect()


# -- the worker's endpoint ---------------------------------------------------------------------

_SERVED: dict[str, Any] = {}


@worker_ready.connect
def _serve_worker_metrics(sender: Any = None, **_: Any) -> None:
    settings = getattr(getattr(sender, "app", None), "settings", None)
    port = getattr(settings, "worker_metrics_port", 0)
    if not port or "server" in _SERVED:
        return
    from prometheus_client import start_http_server

    _SERVED["server"] = start_http_server(port, registry=scrape_registry())
    log.info("worker metrics on port %d (/metrics)", port)


@worker_shutdown.connect
def _stop_worker_metrics(**_: Any) -> None:
    served = _SERVED.pop("server", None)
    if served is not None:
        served[0].shutdown()
    folder = os.environ.get(MULTIPROC_ENV)
    if folder and Path(folder).name.startswith("worker-"):
        shutil.rmtree(folder, ignore_errors=True)
