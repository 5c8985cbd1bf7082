"""Progress events and cancellation of long runs (indexing, graph refreshes, re-embedding).

Kept apart from kbgraph.index so that what only reports progress (the CLI, the engine's query
path) does not import the indexing pipeline."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Progress:
    phase: str
    done: int
    total: int
    message: str = ""
    llm_calls: int = 0  # chat calls so far in this context (cached answers not counted)
    tokens: int = 0  # prompt + completion tokens of those calls


ProgressFn = Callable[[Progress], None]


def no_progress(_: Progress) -> None:
    return None


def never() -> bool:
    return False
