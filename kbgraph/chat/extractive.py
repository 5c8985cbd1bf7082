"""A short answer without a language model: the retrieved sentences that cover the question's terms.

Used where kbgraph must answer but no chat model is configured (the demo). Sentences come from the
best retrieved chunks; each pick is the sentence that adds the most question terms not yet covered
(rarer terms count more), discounted by its chunk's rank, so retrieval's ranking breaks ties. Each
sentence carries the ``[ID:n]`` marker of its chunk, as a model's answer would.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kbgraph.parse.tokenize import tokenize, tokenize_query
from kbgraph.search.retrieve import RetrievalResult

# a sentence ends at . ! ? (before a space) or a CJK ender, and a blank line always ends one (a single
# line break is often just the wrapping of a paragraph)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n\s*\n")
_ENDED = re.compile(r"[.!?。！？][\"'”’)\]」』）]*$")
_MAX_CHARS = 240


@dataclass(frozen=True)
class ExtractiveAnswer:
    text: str  # the sentences, each followed by its chunk's [ID:n]
    markers: list[int]  # the citation markers used, in order


@dataclass(frozen=True)
class _Sentence:
    text: str
    terms: frozenset[str]
    marker: int
    rank: int


def extractive_answer(result: RetrievalResult, *, max_sentences: int = 2, chunks: int = 5) -> ExtractiveAnswer | None:
    """Up to ``max_sentences`` sentences of the top ``chunks`` chunks that answer the question, or
    None when no sentence shares a term with it."""
    wanted = set(tokenize_query(result.question))
    marker_of = {chunk_id: marker for marker, chunk_id in result.citations.items()}
    sentences = [s for rank, chunk in enumerate(result.chunks[:chunks], start=1) if chunk.chunk_id in marker_of
                 for s in _sentences(chunk.content, wanted, marker_of[chunk.chunk_id], rank)]
    if not wanted or not sentences:
        return None
    weight = _term_weights(wanted, sentences)
    covered: set[str] = set()
    picked: list[_Sentence] = []
    while len(picked) < max_sentences:
        gains = [(sum(weight[t] for t in s.terms - covered) / math.sqrt(s.rank), -i, s)
                 for i, s in enumerate(sentences) if s not in picked]
        gain, _, best = max(gains, default=(0.0, 0, None))
        if best is None or gain <= 0:
            break
        picked.append(best)
        covered |= best.terms
    if not picked:
        return None
    text = " ".join(f"{_shorten(s.text)} [ID:{s.marker}]" for s in picked)
    return ExtractiveAnswer(text, list(dict.fromkeys(s.marker for s in picked)))


def _sentences(content: str, wanted: set[str], marker: int, rank: int) -> list[_Sentence]:
    found = []
    for piece in _SENTENCE_END.split(content):
        text = " ".join(piece.split())
        if _is_title(text):
            continue  # names what follows; the sentences after it say something about it
        terms = frozenset(tokenize(text)) & wanted
        if terms:
            found.append(_Sentence(text.lstrip(">*- "), terms, marker, rank))
    return found


def _is_title(text: str) -> bool:
    return text.startswith("#") or (not _ENDED.search(text) and len(text.split()) <= 8)


def _term_weights(wanted: set[str], sentences: list[_Sentence]) -> dict[str, float]:
    """Rarer terms weigh more: a name found in one sentence says more than "guild" found in ten."""
    n = len(sentences)
    return {t: math.log(1 + n / max(1, sum(t in s.terms for s in sentences))) for t in wanted}


def _shorten(text: str) -> str:
    if len(text) <= _MAX_CHARS:
        return text
    cut = text.rfind(" ", 0, _MAX_CHARS)
    return text[:cut if cut > 0 else _MAX_CHARS].rstrip(",;:") + " ..."


__all__ = ["ExtractiveAnswer", "extractive_answer"]
