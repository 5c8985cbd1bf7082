"""Hybrid chunk retrieval (the `naive` mode): BM25 over chunk tokens + kNN over chunk vectors.

The fused similarity is ``(1 - w) * term + w * vector`` (see kbgraph.store.base for how each part
is normalized); chunks under the threshold are dropped, the rest ranked and aggregated by document.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kbgraph.llm.base import Embedder
from kbgraph.parse.tokenize import tokenize_query
from kbgraph.store.base import (
    Condition, DocStore, Hit, SearchRequest, TextQuery, VectorQuery, any_of, eq, missing, vector_field,
)

# important keywords and questions exist on chunks added or edited by hand (kbgraph/index/chunk_edit.py)
CHUNK_TEXT_FIELDS = {"content_ltks": 1.0, "title_tks": 0.5, "important_tks": 1.0, "question_tks": 1.0}
CHUNK_FIELDS = ["id", "kb_id", "doc_id", "docnm_kwd", "content_with_weight", "position_int", "page_num_int",
                "start_int", "end_int"]
MAX_CANDIDATES = 1024


@dataclass
class ChunkHit:
    chunk_id: str
    kb_id: str
    doc_id: str
    doc_name: str
    content: str
    position: int
    similarity: float
    vector_similarity: float
    term_similarity: float


@dataclass
class DocAgg:
    doc_id: str
    doc_name: str
    count: int


@dataclass
class ChunkResults:
    chunks: list[ChunkHit] = field(default_factory=list)
    total: int = 0
    doc_aggs: list[DocAgg] = field(default_factory=list)


@dataclass(frozen=True)
class ChunkQuery:
    question: str
    kb_ids: Sequence[str]
    top_n: int = 8
    top_k: int = 1024
    vector_similarity_weight: float = 0.3
    similarity_threshold: float = 0.2
    doc_ids: Sequence[str] = ()
    offset: int = 0
    # False: only the page is read (total and doc_aggs then cover the page alone); graph modes
    # fuse the best chunks and have no use for the rest of the candidates' rows
    aggregate: bool = True


def chunk_filter(doc_ids: Sequence[str] = ()) -> list[Condition]:
    where: list[Condition] = [missing("knowledge_graph_kwd"), eq("available_int", 1)]
    if doc_ids:
        where.append(any_of("doc_id", doc_ids))
    return where


def embed_question(embedder: Embedder, question: str) -> np.ndarray:
    return embedder.embed_query([question])[0]


def chunk_request(query: ChunkQuery, vector: np.ndarray, similarity_floor: float) -> SearchRequest:
    """The hybrid search of ``retrieve_chunks`` (``vector``: the question's)."""
    tokens = tokenize_query(query.question)
    candidates = max(query.top_n + query.offset, min(query.top_k, MAX_CANDIDATES))
    return SearchRequest(
        kb_ids=list(query.kb_ids), where=chunk_filter(query.doc_ids),
        text=TextQuery(tokens=tokens, fields=CHUNK_TEXT_FIELDS) if tokens else None,
        vector=VectorQuery(field=vector_field(len(vector)), vector=np.asarray(vector).tolist(),
                           floor=similarity_floor),
        vector_weight=query.vector_similarity_weight, threshold=query.similarity_threshold,
        candidates=candidates, offset=0, limit=candidates if query.aggregate else query.offset + query.top_n,
        fields=CHUNK_FIELDS, count_total=query.aggregate,
    )


def chunk_results(query: ChunkQuery, hits: Sequence[Hit]) -> ChunkResults:
    """``chunk_request``'s hits as ``retrieve_chunks`` returns them."""
    found = [
        ChunkHit(chunk_id=h.id, kb_id=h.doc.get("kb_id", ""), doc_id=h.doc.get("doc_id", ""),
                 doc_name=h.doc.get("docnm_kwd", ""), content=h.doc.get("content_with_weight", ""),
                 position=int(h.doc.get("position_int", 0)), similarity=round(h.score, 6),
                 vector_similarity=round(h.vector_score, 6), term_similarity=round(h.term_score, 6))
        for h in hits
    ]
    counts = Counter((h.doc_id, h.doc_name) for h in found)
    aggs = [DocAgg(doc_id=d, doc_name=n, count=c) for (d, n), c in
            sorted(counts.items(), key=lambda item: (-item[1], item[0][1]))]
    return ChunkResults(chunks=found[query.offset:query.offset + query.top_n], total=len(found), doc_aggs=aggs)


def retrieve_chunks(store: DocStore, tenant: str, query: ChunkQuery, embedder: Embedder,
                    question_vector: np.ndarray | None = None) -> ChunkResults:
    vector = question_vector if question_vector is not None else embed_question(embedder, query.question)
    return chunk_results(query, store.search(tenant, chunk_request(query, vector, embedder.similarity_floor)).hits)
