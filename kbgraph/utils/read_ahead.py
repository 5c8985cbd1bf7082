"""The next item of an iterator fetched on a thread of its own while the caller works on this one
(``read_ahead``): for iterators whose items wait on another process (pages of a scan), whose work
then overlaps the caller's."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")

_DONE = object()


def read_ahead(items: Iterator[T], depth: int = 1) -> Iterator[T]:
    """The items of ``items``, in order, the next ``depth`` fetched on a thread meanwhile. The first
    item is fetched here (a single-page scan starts no thread). A failure of the iterator is raised
    where its item would have come; a caller that stops early stops the thread at its next item."""
    try:
        first = next(items)
    except StopIteration:
        return
    waiting: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def fetch() -> None:
        try:
            while not stop.is_set():
                try:
                    item: object = next(items)
                except StopIteration:
                    item = _DONE
                while not stop.is_set():
                    try:
                        waiting.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if item is _DONE:
                    return
        except BaseException as exc:  # handed to the caller, raised there
            waiting.put(exc)

    thread = threading.Thread(target=fetch, name="kbgraph-read-ahead", daemon=True)
    thread.start()
    try:
        yield first
        while True:
            item = waiting.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        while thread.is_alive():  # let a fetch blocked on a full queue see the stop
            try:
                waiting.get_nowait()
            except queue.Empty:
                thread.join(timeout=0.05)
