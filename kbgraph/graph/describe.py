"""One description from many fragments: joined while short, summarized by the LLM when long.

A description's size is the sum of its fragments' token counts plus one per line break between
them. Counting fragment by fragment (each count cached) rather than tokenizing the joined text
keeps the check cheap for a frequent entity, whose fragments are the same every merge but one;
the sum is never below the joined text's count by more than the line breaks.

The summary is a function of the *set* of fragments, so the graph stays a function of its mentions
(adds and deletes equal a rebuild): fragments are sorted, and when they are more than one prompt
holds (``prompt_tokens``) they are cut into groups by their own content, each group is summarized,
and the group summaries are summarized in turn. The LLM cache key of each call is then a function of
its group, so a summary asked again after a few new fragments pays only for the groups they fell
into and for the final call, and no prompt grows past ``prompt_tokens`` however often an entity is
mentioned. Deleting a document that contributed a fragment gives a new set and a new summary (its
text is gone from the graph), the same one a rebuild would ask for.

Merges do not wait for summaries: with ``deferred`` a description over the budget is written as its
first fragments (what a describer without a model writes) and marked pending; the knowledge base's
summary pass (kbgraph.index.summaries.summarize_pending) later replaces it with the summary of every
fragment, once per entity per batch of documents however many of them touched it.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

from kbgraph.llm.base import ChatModel, LLMError, Message
from kbgraph.parse.token_count import count_tokens
from kbgraph.prompts import prompt_version, render

# rounds of group summaries before the rest is cut: a model that ignores the length it is asked for
# must not keep the loop going
_MAX_ROUNDS = 4


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


def _clip(text: str, tokens: int) -> str:
    """``text`` cut to about ``tokens`` tokens (one fragment larger than a whole prompt)."""
    have = _fragment_tokens(text)
    if have <= tokens:
        return text
    return text[: max(1, len(text) * tokens // have)]


def _ends_group(fragment: str) -> bool:
    # a group boundary chosen by the content, not by position: a fragment added to one group
    # leaves the others (and their cached summaries) as they were
    return hashlib.blake2b(fragment.encode("utf-8", "surrogatepass"), digest_size=2).digest()[0] % 4 == 0


def summary_groups(fragments: Sequence[str], budget: int) -> list[list[str]]:
    """Sorted fragments in consecutive groups of at most ``budget`` tokens (line breaks included).
    A group closes at a content boundary once it holds half the budget, or when the next fragment
    would not fit."""
    groups: list[list[str]] = [[]]
    used = 0
    for fragment in fragments:
        cost = _fragment_tokens(fragment) + 1
        if groups[-1] and used + cost > budget:
            groups.append([])
            used = 0
        groups[-1].append(fragment)
        used += cost
        if used >= budget // 2 and _ends_group(fragment):
            groups.append([])
            used = 0
    return [g for g in groups if g]


class Describer:
    def __init__(self, chat: ChatModel | None, max_tokens: int = 500, language: str = "English",
                 concurrency: int = 1, *, prompt_tokens: int = 4000, deferred: bool = False) -> None:
        self.chat = chat
        self.max_tokens = max_tokens
        self.language = language
        self.concurrency = max(1, concurrency)
        self.prompt_tokens = max(prompt_tokens, 2 * max_tokens)
        # with a model, descriptions over the budget are left for the summary pass (see above)
        self.deferred = deferred and chat is not None
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
        if self.deferred:
            return self._truncate(fragments)
        return self._summary_or_fragments(kind, name, fragments)

    def needs_summary(self, fragments: Sequence[str]) -> bool:
        """Whether these fragments' description is a summary the model is asked for."""
        return self.chat is not None and not self._fits(fragments)

    def pending(self, fragments: Sequence[str]) -> bool:
        """Whether the description of these fragments is a stand-in waiting for the summary pass."""
        return self.deferred and not self._fits(fragments)

    def summary(self, kind: str, name: str, fragments: Sequence[str]) -> str:
        """The final description of these fragments, asking the model when they do not fit.

        A model that fails (after its retries) raises SummaryError like one that answers garbage:
        a stand-in written now would stay for good and make the graph depend on the model's bad
        minute, while a row left pending is summarized when the document is indexed again."""
        if self._fits(fragments):
            return "\n".join(fragments)
        if self.chat is None:
            return self._truncate(fragments)
        try:
            return self._summarize(kind, name, fragments)
        except LLMError as exc:
            raise SummaryError(f"the model could not summarize {kind} {name!r} ({exc}); index the document "
                               "again to retry") from exc

    def prefetch(self, wanted: Sequence[tuple[str, str, Sequence[str]]]) -> None:
        """Ask for the summaries these (kind, name, fragments) descriptions will need, several at a
        time; calls for them then answer at once. A merge derives its rows one after another, and
        with a model that takes seconds per answer, its summaries are what the merge waits for."""
        if self.deferred:
            return
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
        # the prompt's own words take some of the budget; a fragment alone never takes all of it
        budget = self.prompt_tokens - 300
        texts = sorted(_clip(f, budget // 2) for f in fragments)
        for _ in range(_MAX_ROUNDS):
            if sum(_fragment_tokens(t) + 1 for t in texts) <= budget:
                break
            texts = [self._ask(kind, name, group) for group in summary_groups(texts, budget)]
            texts = sorted(_clip(t, budget // 2) for t in texts)
        else:
            texts = summary_groups(texts, budget)[0]
        return self._ask(kind, name, texts)

    def _ask(self, kind: str, name: str, fragments: Sequence[str]) -> str:
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
