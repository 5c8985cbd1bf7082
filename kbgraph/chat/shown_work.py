"""What an answer shows of its work besides its text: the graph context it was given (entities,
relations, community reports, as the retrieval ranked them) and, for a model that cites nothing,
citations placed by similarity.

Citations by similarity follow RAGFlow's idea (its answers from models that ignore the citation
instruction still point at their sources): each sentence of the answer is compared with every chunk
the model was given, by the words they share and by their vectors, and the best chunk is cited after
the sentence when it is close enough. It runs only when the answer has no citation of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kbgraph.search.retrieve import RetrievalResult

Embed = Callable[[Sequence[str]], np.ndarray]

# a sentence ends at . ! ? (and their CJK forms) followed by space or the end
_SENTENCE = re.compile(r"[^.!?。！？\n]+(?:[.!?。！？]+|$)")
_WORD = re.compile(r"\w+", re.UNICODE)
# a sentence this short ("Yes.", "In 790.") says too little to tell its source
MIN_WORDS = 4
# weights of word overlap and vector cosine, and the score a sentence must reach to be cited.
# Measured on 600-character pieces of the sample corpus with the hash embedder (tests/unit/
# test_shown_work.py): a sentence taken from a piece scores 0.80-0.91 combined, sentences of general
# knowledge or of the model's own 0.28-0.42, so 0.5 sits between. By shared words alone (no
# embedder) the same general sentences reach 0.57 (short common words: "sea", "level"), hence 0.65.
TERM_WEIGHT, VECTOR_WEIGHT, THRESHOLD, TERM_ONLY_THRESHOLD = 0.5, 0.5, 0.5, 0.65
DESCRIPTION_CHARS = 400


def graph_context(retrieval: RetrievalResult | None) -> dict[str, list[dict[str, Any]]]:
    """The graph part of what the model was given, for people to unfold under the answer."""
    if retrieval is None:
        return {"entities": [], "relations": [], "reports": []}
    return {
        "entities": [{"name": e.name, "type": e.type, "description": e.description[:DESCRIPTION_CHARS],
                      "score": round(float(e.score), 4)} for e in retrieval.entities],
        "relations": [{"source": r.src_name, "target": r.tgt_name, "description": r.description[:DESCRIPTION_CHARS],
                       "score": round(float(r.score), 4)} for r in retrieval.relations],
        "reports": [{"title": r.title, "content": r.content[:2 * DESCRIPTION_CHARS], "score": round(float(r.score), 4)}
                    for r in retrieval.reports],
    }


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text) if len(w) > 2 or not w.isascii()}


def _term_similarity(sentence: set[str], chunk: set[str]) -> float:
    """The share of the sentence's words the chunk holds."""
    return len(sentence & chunk) / len(sentence) if sentence else 0.0


def insert_citations(answer: str, retrieval: RetrievalResult, embed: Embed | None = None) -> str:
    """The answer with ``[ID:n]`` after each sentence that one of the retrieved chunks supports
    (best chunk, score at least THRESHOLD); the answer unchanged when nothing is close."""
    if not answer.strip() or not retrieval.citations:
        return answer
    markers = sorted(retrieval.citations)
    by_id = {c.chunk_id: c for c in retrieval.chunks}
    chunks = [by_id[retrieval.citations[n]] for n in markers]
    sentences = [m for m in _SENTENCE.finditer(answer) if len(_WORD.findall(m.group(0))) >= MIN_WORDS]
    if not sentences:
        return answer
    chunk_words = [_words(c.content) for c in chunks]
    scores = np.array([[_term_similarity(_words(s.group(0)), words) for words in chunk_words] for s in sentences])
    threshold = TERM_ONLY_THRESHOLD
    if embed is not None:
        vectors = embed([s.group(0) for s in sentences] + [c.content for c in chunks])
        cosine = vectors[:len(sentences)] @ vectors[len(sentences):].T
        scores = TERM_WEIGHT * scores + VECTOR_WEIGHT * np.clip(cosine, 0.0, 1.0)
        threshold = THRESHOLD
    out, last = [], 0
    for row, sentence in zip(scores, sentences):
        best = int(np.argmax(row))
        if row[best] < threshold:
            continue
        text = sentence.group(0)
        body = text.rstrip()
        stripped = body.rstrip(".!?。！？")
        cut = sentence.start() + len(stripped)
        out.append(answer[last:cut] + f" [ID:{markers[best]}]")
        last = cut
    return "".join(out) + answer[last:]
