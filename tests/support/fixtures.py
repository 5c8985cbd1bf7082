"""Pytest fixtures from tests/support; register with ``pytest_plugins = ["support.fixtures"]`` in tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .scripted_llm import ScriptedLLM


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    """A started ScriptedLLM with nothing scripted; push replies or set ``.responder``."""
    with ScriptedLLM() as llm:
        yield llm
