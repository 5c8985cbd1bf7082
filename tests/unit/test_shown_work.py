"""Citations by similarity (kbgraph/chat/shown_work.py) on the sample corpus: a sentence taken from
a chunk is cited with that chunk's marker, sentences of general knowledge are left bare, with the
hash embedder and by shared words alone; the figures behind the thresholds."""

from __future__ import annotations

import re

import pytest

from kbgraph.chat.shown_work import insert_citations
from kbgraph.config import load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.llm.factory import build_embedder
from kbgraph.search.context import RetrievedChunk
from kbgraph.search.retrieve import RetrievalResult

GENERAL = ["The capital of France is Paris and it lies on the Seine.", "Water boils at one hundred degrees at sea level.",
           "Most maps of that era were drawn by hand with ink.", "I could not find more details about this in the documents."]


def _pieces() -> list[str]:
    texts = [p.read_text(encoding="utf-8") for p in sorted(SAMPLE_CORPUS_DIR.iterdir()) if p.suffix in (".md", ".txt")]
    return [t[i:i + 600] for t in texts for i in range(0, len(t), 600)]


def _retrieval(pieces: list[str]) -> RetrievalResult:
    chunks = [RetrievedChunk(chunk_id=f"c{n}", doc_id=f"d{n}", doc_name=f"d{n}.md", kb_id="kb", content=text, score=1.0)
              for n, text in enumerate(pieces)]
    return RetrievalResult(mode="naive", question="q", chunks=chunks, citations={n: c.chunk_id for n, c in enumerate(chunks)})


def _copied(piece: str) -> str:
    flat = " ".join(line for line in piece.split("\n") if line.strip() and not line.startswith("#"))
    return re.split(r"(?<=[.!?])\s", flat.strip())[0]


@pytest.mark.parametrize("embedded", [True, False])
def test_sentences_from_chunks_are_cited_and_general_ones_are_not(embedded: bool) -> None:
    pieces = _pieces()
    retrieval = _retrieval(pieces)
    embed = build_embedder(load_settings(embedding_provider="hash", embedding_dim=64), cache=False).embed \
        if embedded else None
    for number in (0, 5, len(pieces) - 1):
        sentence = _copied(pieces[number])
        if len(sentence.split()) < 6:
            continue
        cited = insert_citations(sentence, retrieval, embed)
        found = [int(n) for n in re.findall(r"\[ID:(\d+)\]", cited)]
        assert len(found) == 1 and sentence.rstrip(".") in pieces[found[0]].replace("\n", " ") or \
            _copied(pieces[found[0]]) == sentence, (sentence, cited)
    answer = " ".join(GENERAL)
    assert insert_citations(answer, retrieval, embed) == answer
