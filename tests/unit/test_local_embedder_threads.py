"""The local embedder uses the cores it is given: several batches at once, one core each."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np
import pytest

from kbgraph.config import ConfigError, Settings
from kbgraph.llm import build_embedder
from kbgraph.llm.embedders import LocalEmbedder

# windows of ~30 pieces, a few dozen a batch: 120 texts make several batches
TEXTS = [f"Passage {i}: the river port of town number {i} ships grain, timber and wool to the coast."
         for i in range(120)]


class _Overlap:
    """Wraps the shared encoder's forward and records how many ran at once."""

    def __init__(self, forward: Any) -> None:
        self.forward = forward
        self.now = self.most = 0
        self.lock = threading.Lock()

    def __call__(self, windows: list[list[int]]) -> np.ndarray:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(0.02)  # long enough for the other batch to start if it may
            return self.forward(windows)
        finally:
            with self.lock:
                self.now -= 1


def _embed_watched(threads: int, monkeypatch: pytest.MonkeyPatch) -> tuple[np.ndarray, int]:
    embedder = LocalEmbedder(threads=threads, max_batch_tokens=512)
    encoder = embedder.encoder
    watch = _Overlap(encoder.forward)
    monkeypatch.setattr(encoder, "forward", watch)
    try:
        return embedder.embed(TEXTS), watch.most
    finally:
        monkeypatch.undo()


@pytest.mark.slow
def test_two_threads_run_two_batches_at_once_with_the_same_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    alone, most_alone = _embed_watched(1, monkeypatch)
    together, most_together = _embed_watched(2, monkeypatch)
    assert most_alone == 1
    assert most_together == 2
    np.testing.assert_allclose(together, alone, atol=1e-6)


def test_zero_threads_means_the_cores_this_process_may_use(settings: Settings) -> None:
    assert settings.replace(embedding_threads=0).local_embedding_threads == len(os.sched_getaffinity(0))
    assert settings.replace(embedding_threads=3).local_embedding_threads == 3
    local = build_embedder(settings.replace(embedding_provider="local", embedding_threads=0), cache=False)
    assert isinstance(local, LocalEmbedder) and local.threads == len(os.sched_getaffinity(0))


def test_negative_threads_are_refused(settings: Settings) -> None:
    from kbgraph.config import load_settings

    with pytest.raises(ConfigError, match="embedding_threads"):
        load_settings(data_dir=settings.data_dir, embedding_threads=-1)


def test_a_service_process_takes_one_core_unless_told(settings: Settings) -> None:
    """Worker and web processes share a machine: one core each by default, what is set otherwise."""
    from task_executor.engines import EnginePool

    pool = EnginePool(settings.replace(embedding_threads=0))
    try:
        assert pool.settings.embedding_threads == 1 and pool.settings.local_embedding_threads == 1
    finally:
        pool.close()
    pool = EnginePool(settings.replace(embedding_threads=2))
    try:
        assert pool.settings.local_embedding_threads == 2
    finally:
        pool.close()
