"""Where a chat model's concurrency limits and per-minute budgets are kept.

``build_chat`` wraps the model in a concurrency limit for the process (``llm_concurrency``), one for
the knowledge base (``llm_kb_concurrency``) and a request/token budget (``llm_requests_per_minute``,
``llm_tokens_per_minute``, and every 429's Retry-After). Kept in this process (``ProcessLimits``,
the default) they bound one ``kbgraph index`` run and every thread of one process; a deployment of
several processes (the task executor's prefork workers, the web server's) passes limits kept in a
shared place instead (task_executor.limits keeps them in Redis), so that the limits hold for all
of them together rather than once per process.

What a ``CallLimits`` hands out is defined beside the layer that uses it: ``Slots`` in
kbgraph/llm/layers/slots.py, ``Budget`` in kbgraph/llm/layers/budget.py.
"""

from __future__ import annotations

from typing import Protocol

from kbgraph.llm.layers.budget import Budget, RequestBudget, shared_budget
from kbgraph.llm.layers.slots import ProcessSlots, Slots, shared_semaphore


class CallLimits(Protocol):
    def slots(self, key: str, limit: int) -> Slots: ...

    def budget(self, key: str, requests_per_minute: int, tokens_per_minute: int) -> Budget: ...


class ProcessLimits:
    """Limits and budgets of this process only."""

    def slots(self, key: str, limit: int) -> Slots:
        return ProcessSlots(shared_semaphore(key, limit))

    def budget(self, key: str, requests_per_minute: int, tokens_per_minute: int) -> RequestBudget:
        return shared_budget(key, requests_per_minute, tokens_per_minute)


PROCESS_LIMITS = ProcessLimits()
