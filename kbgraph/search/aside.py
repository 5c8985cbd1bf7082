"""Searches a retrieval can run beside its main line of work.

A question's independent searches (the plain chunk search of `ppr` and `mix`, the whole-question
relation and report searches of `kg`) spend most of their time in SQLite and numpy, which release
the GIL, so on a second core they overlap the entity work instead of queueing behind it. One small
pool per process bounds the threads whatever the number of concurrent questions.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kbgraph-aside")


def aside(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
    """Start ``fn(*args, **kwargs)`` on the shared pool; ``.result()`` waits for it (and re-raises)."""
    return _POOL.submit(fn, *args, **kwargs)
