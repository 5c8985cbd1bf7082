"""Two independent pieces of work side by side, where their waits can overlap."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")


def side_by_side(here: Callable[[], A], beside: Callable[[], B], *, concurrent: bool, name: str) -> tuple[A, B]:
    """``here()`` on this thread and ``beside()`` on one thread more (named ``name``) when
    ``concurrent``: work that waits on a network (a remote store's round trips, a model's call)
    then overlaps. Otherwise one after the other, ``here`` first: in-process work holds the GIL,
    and a thread would only add its start and the hand-overs."""
    if not concurrent:
        first = here()
        return first, beside()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=name) as pool:
        other = pool.submit(beside)
        first = here()
        return first, other.result()
