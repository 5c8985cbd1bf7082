"""The two model interfaces the rest of kbgraph talks to: chat and embeddings.

Implementations live beside this file; ``kbgraph.llm.factory`` builds them from Settings.
Everything above this package sees only these protocols, so a test, the `nlp` mode and a
production deployment differ only in what the factory returns.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np


class LLMError(RuntimeError):
    """A model call failed for good (after retries), or no model is configured."""


class LLMNotConfigured(LLMError):
    """An operation needs a chat model and none is configured."""


class Cancelled(RuntimeError):
    """The work was cancelled by its caller (a cancel check returned True)."""


class Reasoning(str):
    """A piece of a streamed reply that is the model's reasoning (its ``<think>`` text or the
    server's ``reasoning_content``), not its answer: ``ChatModel.stream`` yields these between the
    answer's pieces, and a reader that shows only answers skips them."""


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass
class Usage:
    """Token accounting for one phase of one task."""

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0


_decisions_lock = threading.Lock()


@dataclass
class UsageLedger:
    """Usage by phase ("extract", "glean", "summarize", "report", "query", "chat", "embed"...)."""

    by_phase: dict[str, Usage] = field(default_factory=dict)
    # choices that saved or spent calls, counted per run (e.g. "glean: names covered" -> 31)
    decisions: dict[str, int] = field(default_factory=dict)

    def phase(self, name: str) -> Usage:
        return self.by_phase.setdefault(name, Usage())

    def count(self, decision: str, times: int = 1) -> None:
        """Count a choice; safe from the pipeline's worker threads."""
        with _decisions_lock:
            self.decisions[decision] = self.decisions.get(decision, 0) + times

    @property
    def total(self) -> Usage:
        out = Usage()
        for usage in self.by_phase.values():
            out.calls += usage.calls
            out.cached_calls += usage.cached_calls
            out.prompt_tokens += usage.prompt_tokens
            out.completion_tokens += usage.completion_tokens
            out.failures += usage.failures
        return out


CancelCheck = Callable[[], bool]


@runtime_checkable
class ChatModel(Protocol):
    model_name: str
    # whether an answer is kept and a repeated request answered from it (and not asked twice at
    # once): only then is asking ahead of need (kbgraph.index.summaries_ahead) free of extra calls
    remembers_answers: bool

    def chat(self, messages: Sequence[Message], *, phase: str = "chat", prompt_version: str = "",
             temperature: float | None = None, max_tokens: int | None = None,
             cancel: CancelCheck | None = None, accept: Callable[[str], bool] | None = None) -> str:
        """The assistant's reply, with <think>...</think> blocks removed. ``accept`` says whether a
        reply is usable (parses): a cache keeps only those."""
        ...

    def stream(self, messages: Sequence[Message], *, phase: str = "chat",
               temperature: float | None = None, max_tokens: int | None = None,
               cancel: CancelCheck | None = None) -> Iterator[str]:
        """The reply token by token (never cached)."""
        ...


@runtime_checkable
class Embedder(Protocol):
    model_name: str
    dim: int
    # the cosine this model gives unrelated texts (see VectorQuery.floor); 0 for models centred on 0
    similarity_floor: float

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array (len(texts), dim), rows L2-normalized. Empty input gives shape (0, dim).
        These are the texts searched over (chunks, entity and relation descriptions, reports)."""
        ...

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Like ``embed``, for what is searched with (questions, names from a question): models
        trained with an instruction embed the two sides differently; the others embed both alike."""
        ...
