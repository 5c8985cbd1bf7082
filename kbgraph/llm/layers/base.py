"""What every chat layer is made of: the request, the completion, the stream, and the two base classes.

Every layer is itself a ChatModel. Besides the protocol's ``chat``/``stream`` they speak an
internal richer call, ``complete(request) -> Completion`` and ``open_stream(request) ->
TextStream``, so token counts from the server travel back up through the layers without any
shared mutable "last call" state. The layers themselves live beside this file, one per concern.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kbgraph.llm.base import CancelCheck, Cancelled, LLMError, Message

Check = Callable[[], None]  # raises Cancelled when the caller gave up (ChatRequest.check_cancel)


class TransientLLMError(LLMError):
    """A failure worth retrying (429, 5xx, timeout, connection); ``retry_after`` from the server."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[Message, ...]
    phase: str = "chat"
    prompt_version: str = ""
    temperature: float = 0.0
    max_tokens: int | None = None
    cancel: CancelCheck | None = field(default=None, compare=False)
    # whether an answer is usable (it parses): only those are cached, and a cached one that is not
    # (stored before the check existed) is asked again
    accept: Callable[[str], bool] | None = field(default=None, compare=False)

    def usable(self, text: str) -> bool:
        return bool(text.strip()) and (self.accept is None or self.accept(text))

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel():
            raise Cancelled(f"{self.phase}: cancelled")


@dataclass
class Completion:
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached: bool = False


class TextStream:
    """Content pieces of a streamed reply; usage fields are filled in when the stream ends.

    Layers hook ``add_closer`` to release slots or record usage exactly once, whether the
    consumer reads to the end, stops early, or the stream fails.
    """

    def __init__(self, pieces: Iterator[str]) -> None:
        self._pieces = pieces
        self._closers: list[Callable[[TextStream], None]] = []
        self._closed = False
        self.parts: list[str] = []
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.failed = False

    def add_closer(self, fn: Callable[[TextStream], None]) -> None:
        self._closers.append(fn)

    def __iter__(self) -> Iterator[str]:
        try:
            for piece in self._pieces:
                self.parts.append(piece)
                yield piece
        except GeneratorExit:
            raise
        except BaseException:
            self.failed = True
            raise
        finally:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()
        for fn in reversed(self._closers):
            fn(self)


class ChatBase(ABC):
    """The ChatModel protocol on top of ``complete`` / ``open_stream``, which each layer provides."""

    model_name: str = ""
    temperature: float = 0.0
    max_tokens: int | None = None
    remembers_answers: bool = False

    @abstractmethod
    def complete(self, request: ChatRequest) -> Completion: ...

    @abstractmethod
    def open_stream(self, request: ChatRequest) -> TextStream: ...

    def _request(self, messages: Sequence[Message], phase: str, prompt_version: str,
                 temperature: float | None, max_tokens: int | None,
                 cancel: CancelCheck | None, accept: Callable[[str], bool] | None = None) -> ChatRequest:
        # Defaults are resolved here, once, so the cache key sees the values actually sent.
        return ChatRequest(
            messages=tuple(messages), phase=phase, prompt_version=prompt_version,
            temperature=self.temperature if temperature is None else temperature,
            max_tokens=self.max_tokens if max_tokens is None else max_tokens, cancel=cancel, accept=accept)

    def chat(self, messages: Sequence[Message], *, phase: str = "chat", prompt_version: str = "",
             temperature: float | None = None, max_tokens: int | None = None,
             cancel: CancelCheck | None = None, accept: Callable[[str], bool] | None = None) -> str:
        request = self._request(messages, phase, prompt_version, temperature, max_tokens, cancel, accept)
        return self.complete(request).text

    def stream(self, messages: Sequence[Message], *, phase: str = "chat",
               temperature: float | None = None, max_tokens: int | None = None,
               cancel: CancelCheck | None = None) -> Iterator[str]:
        request = self._request(messages, phase, "", temperature, max_tokens, cancel)
        text_stream = self.open_stream(request)
        try:
            yield from text_stream
        finally:
            text_stream.close()


class ChatLayer(ChatBase):
    def __init__(self, inner: ChatBase) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.temperature = inner.temperature
        self.max_tokens = inner.max_tokens
        self.remembers_answers = inner.remembers_answers

    def complete(self, request: ChatRequest) -> Completion:
        return self.inner.complete(request)

    def open_stream(self, request: ChatRequest) -> TextStream:
        return self.inner.open_stream(request)


__all__ = ["ChatBase", "ChatLayer", "ChatRequest", "Check", "Completion", "TextStream", "TransientLLMError"]
