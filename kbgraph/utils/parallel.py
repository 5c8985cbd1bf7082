"""Splitting one memory-bound array operation over the machine's cores.

A query spends much of its time in a few scans that numpy runs without the GIL: the
vector slices' dot products and the PPR walk's sparse products. One core cannot use all of the
memory bandwidth, so running halves of such a scan on two threads makes it ~1.7x faster on an
otherwise idle two-core machine.

On a busy machine a helper thread may wait for a core. The caller therefore runs the first part
itself and then takes back every part no helper has started, so a scan is never slower than
running all parts in turn by more than the cost of queueing them (~30 us).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

# parts worth running at once; more than 4 buys little for memory-bound scans
THREADS = max(1, min(4, os.cpu_count() or 1))

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _helpers() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, THREADS - 1), thread_name_prefix="kbgraph-scan")
        return _pool


def _forget_helpers_in_child() -> None:
    # a forked child (a Celery or web worker) inherits the pool but none of its threads
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_helpers_in_child)


def run_parts(parts: Sequence[Callable[[], T]]) -> list[T]:
    """The results of ``parts``, in order: the first on this thread, the others on helper threads
    when one is free, else on this thread as well."""
    if len(parts) <= 1 or THREADS < 2:
        return [part() for part in parts]
    pool = _helpers()
    pending: list[Future[T]] = [pool.submit(part) for part in parts[1:]]
    results = [parts[0]()]
    for part, future in zip(parts[1:], pending):
        results.append(part() if future.cancel() else future.result())
    return results


def split_rows(total: int, min_rows: int) -> list[tuple[int, int]]:
    """[start, stop) ranges cutting ``total`` rows into up to ``THREADS`` parts of at least
    ``min_rows`` rows each (one range when the rows are too few to be worth splitting)."""
    count = max(1, min(THREADS, total // max(1, min_rows)))
    bounds = [total * i // count for i in range(count + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
