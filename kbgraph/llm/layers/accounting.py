"""Token accounting: the usage ledger's one lock, token estimates for messages, and the layer next
to the wire that counts every attempt, failed or not, once."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from kbgraph.llm.base import Cancelled, Message, Usage, UsageLedger
from kbgraph.llm.layers.base import ChatBase, ChatLayer, ChatRequest, Completion, TextStream
from kbgraph.parse.token_count import count_tokens


def count_message_tokens(messages: Sequence[Message]) -> int:
    # ~4 tokens of framing per message, as the chat formats add role markers.
    return sum(count_tokens(m.content) + 4 for m in messages)


_LEDGER_LOCK = threading.Lock()

# called with every usage a ledger records, in every ledger of the process: (phase, Usage of this
# one record). A service registers one to count model calls and tokens in its metrics
UsageListener = Callable[[str, Usage], None]
_LISTENERS: list[UsageListener] = []


def add_usage_listener(listener: UsageListener) -> None:
    """Have ``listener`` see every usage any ledger of this process records from now on."""
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def record_usage(ledger: UsageLedger | None, phase: str, *, calls: int = 0, cached: int = 0,
                 prompt: int = 0, completion: int = 0, failures: int = 0) -> None:
    """Add to ``ledger`` under one process-wide lock (Usage fields are plain ints)."""
    for listener in _LISTENERS:
        listener(phase, Usage(calls, cached, prompt, completion, failures))
    if ledger is None:
        return
    with _LEDGER_LOCK:
        usage = ledger.phase(phase)
        usage.calls += calls
        usage.cached_calls += cached
        usage.prompt_tokens += prompt
        usage.completion_tokens += completion
        usage.failures += failures


class AccountedChat(ChatLayer):
    """Counts every attempt: successes with their tokens (estimated when the server sends no
    usage), failures by count. Cancellation is not a failure."""

    def __init__(self, inner: ChatBase, ledger: UsageLedger | None) -> None:
        super().__init__(inner)
        self.ledger = ledger

    def complete(self, request: ChatRequest) -> Completion:
        try:
            result = self.inner.complete(request)
        except Cancelled:
            raise
        except Exception:
            record_usage(self.ledger, request.phase, failures=1)
            raise
        prompt = result.prompt_tokens
        completion = result.completion_tokens
        record_usage(
            self.ledger, request.phase, calls=1,
            prompt=prompt if prompt is not None else count_message_tokens(request.messages),
            completion=completion if completion is not None else count_tokens(result.text))
        return result

    def open_stream(self, request: ChatRequest) -> TextStream:
        try:
            text_stream = self.inner.open_stream(request)
        except Cancelled:
            raise
        except Exception:
            record_usage(self.ledger, request.phase, failures=1)
            raise

        def record(s: TextStream) -> None:
            if s.failed:
                record_usage(self.ledger, request.phase, failures=1)
                return
            prompt = s.prompt_tokens
            completion = s.completion_tokens
            record_usage(
                self.ledger, request.phase, calls=1,
                prompt=prompt if prompt is not None else count_message_tokens(request.messages),
                completion=completion if completion is not None else count_tokens("".join(s.parts)))

        text_stream.add_closer(record)
        return text_stream


__all__ = ["AccountedChat", "count_message_tokens", "record_usage"]
