"""One description from many fragments: joined while short, summarized by the LLM when long.

The summary is asked for with the fragments in a fixed order, so the LLM cache key is a function
of the set of fragments: the same set is never paid for twice, and deleting a document that
contributed a fragment yields a new set and a new summary (its text is gone from the graph).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from kbgraph.llm.base import ChatModel, LLMError, Message
from kbgraph.parse.chunker import count_tokens
from kbgraph.prompts import prompt_version, render


@lru_cache(maxsize=65536)
def _fragment_tokens(fragment: str) -> int:
    # an entity's fragments are counted again every time a new mention re-derives it
    return count_tokens(fragment)


class Describer:
    def __init__(self, chat: ChatModel | None, max_tokens: int = 500, language: str = "English") -> None:
        self.chat = chat
        self.max_tokens = max_tokens
        self.language = language
        self.summaries = 0

    def __call__(self, kind: str, name: str, fragments: Sequence[str]) -> str:
        joined = "\n".join(fragments)
        # a token is at least one byte, so a text of no more bytes than the budget fits
        # without being tokenized
        if len(joined) <= self.max_tokens // 4 or len(joined.encode("utf-8")) <= self.max_tokens \
                or count_tokens(joined) <= self.max_tokens:
            return joined
        if self.chat is not None:
            try:
                return self._summarize(kind, name, fragments)
            except LLMError:
                pass  # a summary is an improvement, not a requirement: fall back to the fragments
        return self._truncate(fragments)

    def _summarize(self, kind: str, name: str, fragments: Sequence[str]) -> str:
        prompt = render("summarize_descriptions", kind=kind, subject=name, descriptions=sorted(fragments),
                        max_tokens=self.max_tokens, language=self.language)
        answer = self.chat.chat([Message("user", prompt)], phase="summarize",
                                prompt_version=prompt_version("summarize_descriptions"))
        self.summaries += 1
        return answer.strip() or self._truncate(fragments)

    def _truncate(self, fragments: Sequence[str]) -> str:
        kept: list[str] = []
        used = 0
        for fragment in fragments:
            cost = _fragment_tokens(fragment)
            if kept and used + cost > self.max_tokens:
                break
            kept.append(fragment)
            used += cost
        return "\n".join(kept)
