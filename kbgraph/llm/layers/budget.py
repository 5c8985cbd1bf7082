"""The per-minute budget: requests and tokens per minute for one model, a pause every caller
honours after a server's Retry-After, and the layer that spends from it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from kbgraph.llm.layers.accounting import count_message_tokens
from kbgraph.llm.layers.base import ChatBase, ChatLayer, ChatRequest, Check, Completion, TextStream, TransientLLMError
from kbgraph.parse.token_count import count_tokens


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


class RequestBudget:
    """Requests and tokens per minute for one model, shared by every wrapper of it in a process,
    and a pause that every caller honours after the server said to wait (a 429's Retry-After).

    Two token buckets refilled continuously (a minute's budget at most, full at the start). A
    request takes one request and its estimated prompt tokens before it goes out; its completion
    tokens are taken when it comes back, so a budget overdrawn by long answers delays the next
    requests instead of being exceeded. A request larger than the whole budget waits for a full
    bucket rather than forever.
    """

    def __init__(self, requests_per_minute: int = 0, tokens_per_minute: int = 0) -> None:
        self.rpm, self.tpm = requests_per_minute, tokens_per_minute
        self._lock = threading.Lock()
        self._requests, self._tokens = float(requests_per_minute), float(tokens_per_minute)
        self._at = time.monotonic()
        self._paused_until = 0.0
        self.waited = 0.0  # seconds callers spent waiting for the budget (for reports and tests)

    def active(self) -> bool:
        return bool(self.rpm or self.tpm or self._paused_until)

    def _refill(self, now: float) -> None:
        elapsed, self._at = now - self._at, now
        self._requests = min(float(self.rpm), self._requests + elapsed * self.rpm / 60.0)
        self._tokens = min(float(self.tpm), self._tokens + elapsed * self.tpm / 60.0)

    def _wait_needed(self, tokens: int, now: float) -> float:
        wait = max(0.0, self._paused_until - now)
        if self.rpm and self._requests < 1.0:
            wait = max(wait, (1.0 - self._requests) * 60.0 / self.rpm)
        if self.tpm:
            want = min(float(tokens), float(self.tpm))
            if self._tokens < want:
                wait = max(wait, (want - self._tokens) * 60.0 / self.tpm)
        return wait

    def take(self, tokens: int, check_cancel: Callable[[], None]) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                self._refill(now)
                wait = self._wait_needed(tokens, now)
                if wait <= 0:
                    if self.rpm:
                        self._requests -= 1.0
                    if self.tpm:
                        self._tokens -= min(float(tokens), float(self.tpm))
                    return
            check_cancel()
            step = min(wait, 0.1)
            time.sleep(step)
            self.waited += step

    def spend(self, tokens: int) -> None:
        if self.tpm and tokens:
            with self._lock:
                self._refill(time.monotonic())
                self._tokens -= tokens

    def pause(self, seconds: float) -> None:
        with self._lock:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)


_BUDGETS: dict[tuple[str, int, int], RequestBudget] = {}
_BUDGETS_LOCK = threading.Lock()


def shared_budget(key: str, requests_per_minute: int, tokens_per_minute: int) -> RequestBudget:
    with _BUDGETS_LOCK:
        found = _BUDGETS.get((key, requests_per_minute, tokens_per_minute))
        if found is None:
            found = _BUDGETS[(key, requests_per_minute, tokens_per_minute)] = RequestBudget(
                requests_per_minute, tokens_per_minute)
        return found


class BudgetedChat(ChatLayer):
    """Sends a request only within the model's per-minute budget (RequestBudget), and makes every
    caller of the model wait out a server's Retry-After, so that one 429 slows the whole run down
    for as long as the server asked instead of each of its calls finding out for itself."""

    def __init__(self, inner: ChatBase, budget: Budget) -> None:
        super().__init__(inner)
        self.budget = budget

    def _before(self, request: ChatRequest) -> None:
        if self.budget.active():
            self.budget.take(count_message_tokens(request.messages) if self.budget.tpm else 0,
                             request.check_cancel)

    def _server_said_wait(self, exc: TransientLLMError) -> None:
        if exc.retry_after:
            self.budget.pause(exc.retry_after)

    def complete(self, request: ChatRequest) -> Completion:
        self._before(request)
        try:
            result = self.inner.complete(request)
        except TransientLLMError as exc:
            self._server_said_wait(exc)
            raise
        if self.budget.tpm:
            self.budget.spend(result.completion_tokens if result.completion_tokens is not None
                              else count_tokens(result.text))
        return result

    def open_stream(self, request: ChatRequest) -> TextStream:
        self._before(request)
        try:
            return self.inner.open_stream(request)
        except TransientLLMError as exc:
            self._server_said_wait(exc)
            raise


__all__ = ["Budget", "BudgetedChat", "RequestBudget", "shared_budget"]
