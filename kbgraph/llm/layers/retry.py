"""Retries: exponential backoff with full jitter on transient failures, a server's Retry-After
honoured, cancellation checked while waiting; and the layer that retries a chat call."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from kbgraph.llm.base import CancelCheck, Cancelled, LLMError
from kbgraph.llm.layers.base import ChatBase, ChatLayer, ChatRequest, Completion, TextStream, TransientLLMError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    backoff_base: float = 1.0  # first wait ~ base seconds, doubling, with full jitter
    backoff_max: float = 30.0


def call_with_retry(fn: Callable[[], T], policy: RetryPolicy, what: str,
                    cancel: CancelCheck | None = None) -> T:
    """Run ``fn``, retrying TransientLLMError with exponential backoff and jitter.

    Cancellation is checked before each attempt and while sleeping between attempts. A
    non-transient error propagates at once; running out of attempts raises LLMError.
    """

    def check() -> None:
        if cancel is not None and cancel():
            raise Cancelled(f"{what}: cancelled")

    def delay_after(failures: int, exc: BaseException | None) -> float:
        # Full jitter on an exponential ceiling; a server's Retry-After wins if it is longer.
        ceiling = min(policy.backoff_max, policy.backoff_base * 2 ** (failures - 1))
        delay = random.uniform(0, ceiling)
        if isinstance(exc, TransientLLMError) and exc.retry_after:
            delay = max(delay, min(exc.retry_after, policy.backoff_max))
        return delay

    def sleep(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            check()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.1))

    # The first attempt runs without building the retry machinery: nearly every call succeeds at
    # once, and an indexing run makes hundreds of calls per document.
    check()
    try:
        return fn()
    except TransientLLMError as exc:
        if policy.max_retries < 1:
            raise LLMError(f"{what}: gave up after 1 attempts: {exc}") from exc
        sleep(delay_after(1, exc))

    def wait(state: RetryCallState) -> float:  # tenacity counts from the second attempt
        return delay_after(state.attempt_number + 1, state.outcome.exception() if state.outcome else None)

    retrying = Retrying(stop=stop_after_attempt(policy.max_retries), wait=wait, sleep=sleep,
                        retry=retry_if_exception_type(TransientLLMError), reraise=True)
    attempts = 1
    try:
        for attempt in retrying:
            with attempt:
                check()
                attempts += 1
                return fn()
    except TransientLLMError as exc:
        raise LLMError(f"{what}: gave up after {attempts} attempts: {exc}") from exc
    raise AssertionError("unreachable")  # pragma: no cover


class RetryingChat(ChatLayer):
    def __init__(self, inner: ChatBase, policy: RetryPolicy) -> None:
        super().__init__(inner)
        self.policy = policy

    def complete(self, request: ChatRequest) -> Completion:
        return call_with_retry(lambda: self.inner.complete(request), self.policy,
                               f"chat model {self.model_name!r}", request.cancel)

    def open_stream(self, request: ChatRequest) -> TextStream:
        # Only opening is retried: once pieces have reached the caller a retry would repeat them.
        return call_with_retry(lambda: self.inner.open_stream(request), self.policy,
                               f"chat model {self.model_name!r}", request.cancel)


__all__ = ["RetryPolicy", "RetryingChat", "call_with_retry"]
