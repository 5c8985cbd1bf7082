"""One Engine per process, shared by every task (worker) or request (web) it serves.

Opening an Engine opens the metadata DB and the document store and, on first use, loads the
embedding model; doing that per task would cost seconds and a connection pool each time. Engine is
bound to one tenant, so the pool keeps one light Engine per tenant over the same metadata DB,
store and embedder.
"""

from __future__ import annotations

import threading

import redis

from kbgraph.blob import BlobStore, open_blob_store
from kbgraph.engine import Engine
from kbgraph.llm.factory import preload_embedder
from kbgraph.config import Settings
from kbgraph.meta import MetaDB
from task_executor.limits import RedisCallLimits
from task_executor.locks import redis_kb_lock
from task_executor.metrics import MeteredEmbedder, count_model_usage


def call_limits(client: redis.Redis, settings: Settings) -> RedisCallLimits:
    """The chat model's limits of a worker or web process, on the deployment's Redis."""
    return RedisCallLimits(client, settings.redis_prefix, lease=3 * settings.task_heartbeat)


class EnginePool:
    def __init__(self, settings: Settings, client: redis.Redis | None = None) -> None:
        if not settings.embedding_threads:
            # a deployment runs several worker and web processes on a machine: one core each
            settings = settings.replace(embedding_threads=1)
        self.settings = settings
        self.redis = client or redis.Redis.from_url(settings.redis_url)
        # a killed holder's lock frees itself after three missed beats, not after a minute
        self.kb_lock = redis_kb_lock(self.redis, settings.redis_prefix, timeout=3 * settings.task_heartbeat)
        # the chat model's limits hold for every process of the deployment together; a live
        # process keeps its slots while its calls run, a killed one's free themselves after three
        # missed beats, like its claims and locks (a long fixed lease let the slots a kill -9 left
        # behind stall every worker's model calls for minutes)
        self.limits = call_limits(self.redis, settings)
        self.base = Engine.open(settings, kb_lock=self.kb_lock, limits=self.limits)
        # the process's metrics (task_executor/metrics.py): every model call, and the embedder's
        # texts and seconds (the engine builds its embedder on first use; this is that first use)
        count_model_usage()
        self.base._embedder = MeteredEmbedder(self.base.embedder)
        # where uploaded files are kept (a folder, or S3 shared by every host); nothing is contacted yet
        self.blobs: BlobStore = open_blob_store(settings)
        self._engines: dict[str, Engine] = {self.base.tenant: self.base}
        self._guard = threading.Lock()
        # a local model loads now, at process start, so no request or task waits for it
        preload_embedder(self.base.embedder)

    @property
    def meta(self) -> MetaDB:
        return self.base.meta

    def engine(self, tenant: str) -> Engine:
        with self._guard:
            found = self._engines.get(tenant)
            if found is None:
                self.meta.ensure_tenant(tenant)
                # the embedder is the costly part (a loaded model): every tenant shares the first one
                found = Engine(self.settings, self.base.meta, self.base.store_handle, tenant, self.kb_lock,
                               embedder=self.base.embedder, limits=self.limits)
                self._engines[tenant] = found
            return found

    def close(self) -> None:
        self.limits.close()
        self.base.close()  # the other engines share its connections
        self.blobs.close()
        self.redis.close()
