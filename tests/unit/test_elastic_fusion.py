"""The Elasticsearch store fuses its candidates on arrays (hits.score_parts, hits.fused_scores): the
scores must be the scalar contract's (base.rescale_cosine, base.fuse) to the bit, in the same
order, or the two stores' pages would part at ties."""

from __future__ import annotations

import random

import pytest

from kbgraph.store.base import SearchRequest, TextQuery, VectorQuery, fuse, rescale_cosine
from kbgraph.store.elastic.hits import (
    Candidate, absent_vector_score, fused_page, fused_scores, score_parts,
)


def cosine_from_knn_score(score: float | None) -> float:
    """The cosine behind a kNN ``_score`` of a ``cosine`` dense_vector ((1 + cosine) / 2), clipped to [0, 1]."""
    return 0.0 if score is None else min(1.0, max(0.0, 2.0 * float(score) - 1.0))


def scalar_parts(text_hits: list[Candidate], vector_hits: list[Candidate],
                 request: SearchRequest) -> tuple[dict[str, float], dict[str, float]]:
    best = max((float(score or 0.0) for _, score in text_hits), default=0.0)
    term = {doc_id: float(score or 0.0) / best if best > 0 else 0.0 for doc_id, score in text_hits}
    floor = request.vector.floor if request.vector else 0.0
    return term, {doc_id: rescale_cosine(cosine_from_knn_score(score), floor) for doc_id, score in vector_hits}


def scalar_fused(term: dict[str, float], vector: dict[str, float], request: SearchRequest) -> dict[str, float]:
    absent = absent_vector_score(request)
    return {doc_id: fuse(term.get(doc_id, 0.0), vector.get(doc_id, absent), request.vector_weight,
                         request.text is not None, request.vector is not None)
            for doc_id in dict.fromkeys([*term, *vector])}


@pytest.mark.parametrize("seed", range(4))
def test_fusion_on_arrays_gives_the_scalar_scores_to_the_bit(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(400):
        floor = rng.choice([0.0, 0.1, 0.37, 0.5])
        request = SearchRequest(kb_ids=["kb"], text=TextQuery(["a"], {"x": 1.0}) if rng.random() < 0.8 else None,
                                vector=VectorQuery("q_4_vec", [1.0, 0.0, 0.0, 0.0], floor=floor)
                                if rng.random() < 0.8 else None,
                                vector_weight=rng.choice([0.0, 0.3, 0.5, 1.0, rng.random()]), limit=rng.randrange(1, 30),
                                threshold=rng.choice([0.0, 0.2]))
        text = [(f"d{rng.randrange(200)}", rng.choice([None, 0.0, rng.random() * 20])) for _ in range(rng.randrange(60))]
        knn = [(f"d{rng.randrange(200)}", rng.choice([None, 0.0, 0.5, 1.0, rng.random()]))
               for _ in range(rng.randrange(60))]
        term, vector = score_parts(text, knn, request)
        assert (list(term.items()), list(vector.items())) == tuple(list(p.items()) for p in scalar_parts(text, knn, request))
        fused = fused_scores(term, vector, request)
        assert list(fused.items()) == list(scalar_fused(term, vector, request).items())
        page, total = fused_page(text, knn, request)
        passed = sorted(((-s, i) for i, s in fused.items() if s >= request.threshold))
        assert [(h.id, h.score) for h in page] == [(i, -s) for s, i in passed[:request.limit]] and total == len(passed)
