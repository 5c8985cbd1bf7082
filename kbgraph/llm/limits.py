"""Where a chat model's concurrency limits and per-minute budgets are kept.

``build_chat`` wraps the model in a concurrency limit for the process (``llm_concurrency``), one for
the knowledge base (``llm_kb_concurrency``) and a request/token budget (``llm_requests_per_minute``,
``llm_tokens_per_minute``, and every 429's Retry-After). Kept in this process (``ProcessLimits``,
the default) they bound one ``kbgraph index`` run and every thread of one process; a deployment of
several processes (the task executor's prefork workers, the web server's) passes limits kept in a
shared place instead (task_executor.limits keeps them in Redis), so that the limits hold for all
of them together rather than once per process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kbgraph.llm.layers import PrioritySlots, RequestBudget, shared_budget, shared_semaphore

Check = Callable[[], None]  # raises Cancelled when the caller gave up


class Slots(Protocol):
    """A counting semaphore: ``acquire`` waits for a slot (calling ``check`` while it waits) and
    returns the handle ``release`` takes back. Of the callers waiting in one process, a lower
    ``priority`` goes first (layers.call_priority: by the call's phase)."""

    def acquire(self, check: Check, priority: int = 0) -> object: ...

    def release(self, handle: object) -> None: ...


class Budget(Protocol):
    """Requests and tokens per minute, and a pause every caller honours (a server's Retry-After)."""

    rpm: int
    tpm: int

    def active(self) -> bool:
        """Whether ``take`` may have to wait (a budget or a pause is set)."""
        ...

    def take(self, tokens: int, check: Check) -> None: ...

    def spend(self, tokens: int) -> None: ...

    def pause(self, seconds: float) -> None: ...


class CallLimits(Protocol):
    def slots(self, key: str, limit: int) -> Slots: ...

    def budget(self, key: str, requests_per_minute: int, tokens_per_minute: int) -> Budget: ...


class ProcessSlots:
    """A semaphore shared by every wrapper of the same model (and limit) in this process."""

    def __init__(self, semaphore: PrioritySlots) -> None:
        self.semaphore = semaphore

    def acquire(self, check: Check, priority: int = 0) -> object:
        self.semaphore.acquire(check, priority)
        return None

    def release(self, handle: object) -> None:
        self.semaphore.release()


class ProcessLimits:
    """Limits and budgets of this process only."""

    def slots(self, key: str, limit: int) -> Slots:
        return ProcessSlots(shared_semaphore(key, limit))

    def budget(self, key: str, requests_per_minute: int, tokens_per_minute: int) -> RequestBudget:
        return shared_budget(key, requests_per_minute, tokens_per_minute)


PROCESS_LIMITS = ProcessLimits()
