"""The concurrency limit: slots given out by call priority, one semaphore per model in a process,
and the layer that holds a slot for each call in flight.

``Slots`` is what the layer needs; ``PrioritySlots`` (through ``ProcessSlots``) keeps them in this
process, task_executor.limits in Redis for every process of a deployment (kbgraph.llm.limits).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kbgraph.llm.layers.base import ChatBase, ChatLayer, ChatRequest, Check, Completion, TextStream


class Slots(Protocol):
    """A counting semaphore: ``acquire`` waits for a slot (calling ``check`` while it waits) and
    returns the handle ``release`` takes back. Of the callers waiting in one process, a lower
    ``priority`` goes first (call_priority: by the call's phase)."""

    def acquire(self, check: Check, priority: int = 0) -> object: ...

    def release(self, handle: object) -> None: ...


# Which waiting call a free slot goes to, lowest first (then in the order they came). A person
# waiting on an answer goes first. Indexing's calls go in the order their work depends on each
# other: a chunk's first pass starts the longest chain (its gleaning, the summaries of what it
# names, the reports of their communities), so it goes before a gleaning, a gleaning before a
# summary and a summary before a report. At the end of a run the last chain is then as short as
# the slots allow, instead of a late chunk's first pass waiting behind others' gleanings.
_PHASE_PRIORITY = {"chat": 0, "query": 0, "global_map": 0, "global_reduce": 0,
                   "extract": 1, "glean": 2, "resolution": 3, "summarize": 3, "report": 4}


def call_priority(phase: str) -> int:
    return _PHASE_PRIORITY.get(phase, 1)


@dataclass(frozen=True)
class _Ticket:
    priority: int
    arrival: int
    since: float


class PrioritySlots:
    """A bounded counting semaphore that lets its waiters in by priority (lower first), then by
    arrival. A waiter that has waited ``patience`` seconds goes before any priority, so a steady
    stream of urgent calls (another knowledge base's extraction) delays a report, never starves it.
    ``acquire`` calls ``check`` about every 0.1 s while it waits, outside the lock, so a cancelled
    task waiting behind a busy model leaves promptly."""

    def __init__(self, limit: int, patience: float = 30.0) -> None:
        self.limit = max(1, limit)
        self.patience = patience
        self._free = self.limit
        self._cond = threading.Condition()
        self._waiting: list[_Ticket] = []  # a few dozen at most: the callers' threads
        self._arrivals = itertools.count()

    def acquire(self, check: Callable[[], None], priority: int = 0) -> None:
        with self._cond:
            if self._free and not self._waiting:
                self._free -= 1
                return
            ticket = _Ticket(priority, next(self._arrivals), time.monotonic())
            self._waiting.append(ticket)
        try:
            while not self._took(ticket):
                check()
        except BaseException:
            self._leave(ticket)
            raise

    def _first_in_line(self) -> _Ticket:
        now = time.monotonic()
        return min(self._waiting, key=lambda t: (t.priority if now - t.since < self.patience else -1, t.arrival))

    def _took(self, ticket: _Ticket) -> bool:
        """Take a slot if ``ticket`` is first in line and one is free, else wait up to 0.1 s."""
        with self._cond:
            deadline = time.monotonic() + 0.1
            while not (self._free and self._first_in_line() is ticket):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            self._waiting.remove(ticket)
            self._free -= 1
            if self._free and self._waiting:
                self._cond.notify_all()  # the next in line may take the next free slot
            return True

    def _leave(self, ticket: _Ticket) -> None:
        with self._cond:
            if ticket in self._waiting:
                self._waiting.remove(ticket)
                self._cond.notify_all()

    def release(self) -> None:
        with self._cond:
            if self._free >= self.limit:
                raise ValueError("a slot was released that was not taken")
            self._free += 1
            self._cond.notify_all()

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._waiting)


_SEMAPHORES: dict[tuple[str, int], PrioritySlots] = {}
_SEMAPHORES_LOCK = threading.Lock()


def shared_semaphore(key: str, limit: int) -> PrioritySlots:
    """One semaphore per (model key, limit) per process, so separately built wrappers for the
    same model (one per task, say) still share the limit."""
    with _SEMAPHORES_LOCK:
        sem = _SEMAPHORES.get((key, limit))
        if sem is None:
            sem = _SEMAPHORES[(key, limit)] = PrioritySlots(limit)
        return sem


class ProcessSlots:
    """A semaphore shared by every wrapper of the same model (and limit) in this process."""

    def __init__(self, semaphore: PrioritySlots) -> None:
        self.semaphore = semaphore

    def acquire(self, check: Check, priority: int = 0) -> object:
        self.semaphore.acquire(check, priority)
        return None

    def release(self, handle: object) -> None:
        self.semaphore.release()


class LimitedChat(ChatLayer):
    """At most the slots' limit of requests in flight (kbgraph.llm.limits: in this process, or
    shared by every process of a deployment)."""

    def __init__(self, inner: ChatBase, slots: Slots) -> None:
        super().__init__(inner)
        self.slots = slots

    def complete(self, request: ChatRequest) -> Completion:
        handle = self.slots.acquire(request.check_cancel, call_priority(request.phase))
        try:
            return self.inner.complete(request)
        finally:
            self.slots.release(handle)

    def open_stream(self, request: ChatRequest) -> TextStream:
        handle = self.slots.acquire(request.check_cancel, call_priority(request.phase))
        try:
            text_stream = self.inner.open_stream(request)
        except BaseException:
            self.slots.release(handle)
            raise
        # The slot is held until the stream is drained or closed.
        text_stream.add_closer(lambda _s: self.slots.release(handle))
        return text_stream


__all__ = ["LimitedChat", "PrioritySlots", "ProcessSlots", "Slots", "call_priority", "shared_semaphore"]
