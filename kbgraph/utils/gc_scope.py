"""Python's cyclic garbage collector kept to a light touch during bulk indexing work.

Indexing builds many short-lived containers (row dicts, mention records, embedding lists). CPython
runs a young collection every 700 net container allocations, and every so often a full one that
walks every object in the process: the modules of the openai SDK, pydantic, numpy and SQLAlchemy
alone are ~140k objects. Indexing the 5x benchmark corpus spent ~290 ms of its ~3.9 s of CPU in
the collector (two full collections of ~90 ms each), while reference counting freed nearly
everything anyway.

Inside ``bulk_gc()`` the objects that existed before are moved out of the collector's sight
(``gc.freeze``) and young collections wait for 50,000 allocations; leaving restores both, so
cycles made meanwhile are found by the collections after. Scopes nest and may overlap across
threads: the first to enter tunes, the last to leave restores. A process that froze objects
itself (e.g. before forking workers, to keep pages shared) keeps them frozen: the scope then only
raises the threshold.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 50_000

_lock = threading.Lock()
_depth = 0
_saved_threshold: tuple[int, int, int] = (700, 10, 10)
_froze = False


def _enter(young: int) -> None:
    global _depth, _saved_threshold, _froze
    with _lock:
        _depth += 1
        if _depth > 1:
            return
        _saved_threshold = gc.get_threshold()
        _froze = gc.get_freeze_count() == 0
        if _froze:
            gc.freeze()
        gc.set_threshold(max(young, _saved_threshold[0]), *_saved_threshold[1:])


def _leave() -> None:
    global _depth, _froze
    with _lock:
        _depth -= 1
        if _depth > 0:
            return
        gc.set_threshold(*_saved_threshold)
        if _froze:
            gc.unfreeze()
            _froze = False


@contextmanager
def bulk_gc(young: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """Collect cyclic garbage rarely, and never among the objects that existed before, inside.
    Usable as a decorator."""
    _enter(young)
    try:
        yield
    finally:
        _leave()
