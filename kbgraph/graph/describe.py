"""One description from many fragments: joined while short, summarized by the LLM when long.

A description's size is the sum of its fragments' token counts plus one per line break between
them. Counting fragment by fragment (each count cached) rather than tokenizing the joined text
keeps the check cheap for a frequent entity, whose fragments are the same every merge but one;
the sum is never below the joined text's count by more than the line breaks.

The summary is asked for with the fragments in a fixed order, so the LLM cache key is a function
of the set of fragments: the same set is never paid for twice, and deleting a document that
contributed a fragment yields a new set and a new summary (its text is gone from the graph).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

from kbgraph.llm.base import ChatModel, LLMError, Message
from kbgraph.parse.chunker import count_tokens
from kbgraph.prompts import prompt_version, render


class SummaryError(RuntimeError):
    """The model's summary failed validation twice: an error, never a description."""


_MARKUP = ("<!doctype", "<html", "<?xml", "<body")


def usable_summary(answer: str, max_tokens: int) -> bool:
    """Whether a model's answer reads as a summary: prose (mostly letters, no replacement
    characters, not an error page) of about the asked length."""
    text = answer.strip()
    if not text or "\ufffd" in text or text[:20].lower().startswith(_MARKUP):
        return False
    letters = sum(1 for ch in text if ch.isalpha())
    if letters < 0.25 * sum(1 for ch in text if not ch.isspace()):
        return False
    return count_tokens(text) <= 2 * max_tokens + 64


@lru_cache(maxsize=65536)
def _fragment_tokens(fragment: str) -> int:
    # an entity's fragments are counted again every time a new mention re-derives it
    return count_tokens(fragment)


class Describer:
    def __init__(self, chat: ChatModel | None, max_tokens: int = 500, language: str = "English",
                 concurrency: int = 1) -> None:
        self.chat = chat
        self.max_tokens = max_tokens
        self.language = language
        self.concurrency = max(1, concurrency)
        self.summaries = 0
        self._count_lock = threading.Lock()
        self._ready: dict[tuple[str, str, tuple[str, ...]], str] = {}

    def __call__(self, kind: str, name: str, fragments: Sequence[str]) -> str:
        if self._ready:  # only descriptions too long to fit were fetched ahead
            ready = self._ready.pop((kind, name, tuple(fragments)), None)
            if ready is not None:
                return ready
        if self._fits(fragments):
            return "\n".join(fragments)
        return self._summary_or_fragments(kind, name, fragments)

    def prefetch(self, wanted: Sequence[tuple[str, str, Sequence[str]]]) -> None:
        """Ask for the summaries these (kind, name, fragments) descriptions will need, several at a
        time; calls for them then answer at once. A merge derives its rows one after another, and
        with a model that takes seconds per answer, its summaries are what the merge waits for."""
        todo = list(dict.fromkeys((kind, name, tuple(fragments)) for kind, name, fragments in wanted
                                  if not self._fits(fragments)))
        if self.chat is None or len(todo) < 2 or self.concurrency == 1:
            return
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(todo))) as pool:
            for item, text in zip(todo, pool.map(lambda item: self._summary_or_fragments(*item), todo)):
                self._ready[item] = text

    def _fits(self, fragments: Sequence[str]) -> bool:
        # a token is at least one byte: fragments of no more bytes than the budget fit uncounted
        size = sum(len(f) if f.isascii() else len(f.encode("utf-8")) for f in fragments) + len(fragments) - 1
        if size <= self.max_tokens:
            return True
        return sum(_fragment_tokens(f) for f in fragments) + len(fragments) - 1 <= self.max_tokens

    def _summary_or_fragments(self, kind: str, name: str, fragments: Sequence[str]) -> str:
        if self.chat is not None:
            try:
                return self._summarize(kind, name, fragments)
            except LLMError:
                pass  # a summary is an improvement, not a requirement: fall back to the fragments
        return self._truncate(fragments)

    def _usable(self, answer: str) -> bool:
        return usable_summary(answer, self.max_tokens)

    def _summarize(self, kind: str, name: str, fragments: Sequence[str]) -> str:
        prompt = render("summarize_descriptions", kind=kind, subject=name, descriptions=sorted(fragments),
                        max_tokens=self.max_tokens, language=self.language)
        version = prompt_version("summarize_descriptions")
        for suffix in ("", "#retry1"):  # the suffix changes the cache key: the retry is a fresh answer
            answer = self.chat.chat([Message("user", prompt)], phase="summarize", prompt_version=version + suffix,
                                    accept=self._usable)
            with self._count_lock:
                self.summaries += 1
            if self._usable(answer):
                return answer.strip()
        raise SummaryError(f"the model's summary of {kind} {name!r} is unusable twice (last: {answer[:120]!r}); "
                           "nothing was written: index the document again to retry")

    def _truncate(self, fragments: Sequence[str]) -> str:
        kept: list[str] = []
        used = 0
        for fragment in fragments:
            cost = _fragment_tokens(fragment) + (1 if kept else 0)  # the line break before it
            if kept and used + cost > self.max_tokens:
                break
            kept.append(fragment)
            used += cost
        return "\n".join(kept)
