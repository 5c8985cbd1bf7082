"""Opening the engine loads what a document's first model call needs, beside the caller's work."""

from __future__ import annotations

import time

import pytest

from kbgraph.engine import Engine
from kbgraph.parse import token_count as chunker


def test_opening_the_engine_loads_the_tokenizer_before_the_first_document(settings, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(chunker, "_encoding", None)
    with Engine.open(settings):
        deadline = time.monotonic() + 10
        while chunker._encoding is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert chunker._encoding is not None
