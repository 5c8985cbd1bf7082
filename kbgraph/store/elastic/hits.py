"""Hits as callers get them: text and kNN candidates fused with ``base.fuse``, and sources shaped.

Fusion, threshold, order and paging are done here in Python, exactly as the embedded store does;
``vector_score`` is read back from the kNN ``_score`` (for ``cosine`` similarity ES scores
``(1 + cosine) / 2``), so vectors never travel back for scoring.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kbgraph.store.base import Doc, Hit, SearchRequest, fuse_all, rescale_cosine, rescale_cosines
from kbgraph.store.elastic.indices import VECTOR_RE


# a candidate of an ids-only search: its id and its ``_score``
Candidate = tuple[str, float | None]


def vector_scores(knn_scores: Sequence[float | None], floor: float) -> np.ndarray:
    """Each kNN ``_score`` of a ``cosine`` dense_vector ((1 + cosine) / 2) as the contract's
    vector_score: its cosine clipped to [0, 1], then ``base.rescale_cosines`` (no score: a cosine of 0)."""
    raw = np.fromiter((0.5 if score is None else float(score) for score in knn_scores), dtype=np.float64,
                      count=len(knn_scores))
    return rescale_cosines(np.minimum(1.0, np.maximum(0.0, 2.0 * raw - 1.0)), floor)


def score_parts(text_hits: Sequence[Candidate], vector_hits: Sequence[Candidate],
                request: SearchRequest) -> tuple[dict[str, float], dict[str, float]]:
    """Per candidate its text part (BM25 over the best) and its vector part (``vector_score``, from
    the kNN ``_score``), of those that have one (``absent_vector_score`` for the others); every
    candidate is in one of them. On arrays: a graph query fuses ~1,500 candidates, and a Python
    call or two per candidate was a tenth of its client's time; the numbers are the scalar
    functions' (the kNN score's cosine, ``base.rescale_cosine``) to the bit."""
    bm25 = np.fromiter((float(score or 0.0) for _, score in text_hits), dtype=np.float64, count=len(text_hits))
    best = float(bm25.max()) if len(bm25) else 0.0
    term = dict(zip((doc_id for doc_id, _ in text_hits), (bm25 / best if best > 0 else np.zeros_like(bm25)).tolist()))
    floor = request.vector.floor if request.vector else 0.0
    scores = vector_scores([score for _, score in vector_hits], floor)
    return term, dict(zip((doc_id for doc_id, _ in vector_hits), scores.tolist()))


def absent_vector_score(request: SearchRequest) -> float:
    """The vector part of a candidate without a cosine (no vector, or none asked): a cosine of 0."""
    return rescale_cosine(0.0, request.vector.floor if request.vector else 0.0)


def fused_scores(term: Mapping[str, float], vector: Mapping[str, float], request: SearchRequest) -> dict[str, float]:
    """Each candidate's fused score (``base.fuse_all``) from its parts (``score_parts``)."""
    has_text, has_vector = request.text is not None, request.vector is not None
    ids = list(dict.fromkeys([*term, *vector]))
    absent = absent_vector_score(request)
    parts = np.fromiter((term.get(doc_id, 0.0) for doc_id in ids), dtype=np.float64, count=len(ids))
    cosines = np.fromiter((vector.get(doc_id, absent) for doc_id in ids), dtype=np.float64, count=len(ids))
    return dict(zip(ids, fuse_all(parts, cosines, request.vector_weight, has_text, has_vector).tolist()))


def fused_page(text_hits: Sequence[Candidate], vector_hits: Sequence[Candidate],
               request: SearchRequest) -> tuple[list[Hit], int]:
    """Scored candidates -> the request's page of fused hits (their rows still to be read) and how
    many passed the threshold. ``vector_hits`` are kNN hits (their ``_score`` carries the cosine)
    for every candidate that has a vector. See the module docstring of kbgraph.store.base; only
    the page's hits are made."""
    term, vector = score_parts(text_hits, vector_hits, request)
    absent = absent_vector_score(request)
    ranked = [(-score, doc_id) for doc_id, score in fused_scores(term, vector, request).items()
              if score >= request.threshold]
    end = request.offset + request.limit
    top = heapq.nsmallest(end, ranked) if end < len(ranked) else sorted(ranked)
    page = [Hit(id=doc_id, doc={}, score=-negative, term_score=term.get(doc_id, 0.0),
                vector_score=vector.get(doc_id, absent)) for negative, doc_id in top[request.offset:end]]
    return page, len(ranked)


def shape_doc(source: Mapping[str, Any], doc_id: str, fields: Sequence[str] | None) -> Doc:
    """What callers get: ``id`` plus the named fields, or every field but vectors."""
    if fields is None:
        doc = {k: v for k, v in source.items() if not VECTOR_RE.match(k)}
    else:
        doc = {k: source[k] for k in fields if k in source}
    doc["id"] = source.get("id", doc_id)
    return doc


def source_doc(source: Mapping[str, Any], doc_id: str, fields: Sequence[str] | None) -> Doc:
    """A stored document as get and scan hand it out: the named fields, or every field but vectors
    (which the whole source holds, queries.source_spec), plus ``id``."""
    return shape_doc(source, doc_id, fields)
