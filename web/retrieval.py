"""POST /api/v1/retrieval (RAGFLOW_API.md §7): hybrid chunk search, with the knowledge graph in
front when ``use_kg`` is true (kbgraph's ``mix`` mode; else ``naive``)."""

from __future__ import annotations

import math
import uuid
from collections import Counter
from typing import Any

from flask import Response

from kbgraph.engine import KBGraphError
from kbgraph.graph.extract.nlp.extractor import NLPExtractor
from kbgraph.search.chunks import ChunkHit, ChunkQuery, retrieve_chunks
from kbgraph.search.context import RetrievedChunk, render_context
from kbgraph.search.retrieve import retrieve
from web.api import blueprint, own_kb, tenant
from web.envelope import DATA_ERROR, EXCEPTION_ERROR, ApiError, json_body, ok
from web.highlight import em
from web.services import services



def _parsed_number(text: str, integer: bool) -> Any:
    try:
        value = int(text.strip()) if integer else float(text.strip())
    except ValueError:
        return text  # refused below, with the value shown
    return value if math.isfinite(value) else text


def _number(body: dict[str, Any], key: str, default: float, *, integer: bool = False, low: float | None = None) -> Any:
    value = body.get(key, default)
    if value is None:
        value = default
    if isinstance(value, str):  # RAGFlow reads these with int()/float(): "3" is page 3
        value = _parsed_number(value, integer)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not float(value).is_integer()):
        kind = "an integer" if integer else "a number"
        raise ApiError(DATA_ERROR, f"`{key}` should be {kind}, not {value!r}")
    if low is not None and value < low:
        code = EXCEPTION_ERROR if key == "top_k" else DATA_ERROR
        raise ApiError(code, f"`{key}` must be greater than {low - 1 if integer else low}, not {value!r}")
    return int(value) if integer else float(value)


def highlight_terms(content: str, question: str) -> str:
    """The question's whole words in <em> (web.highlight)."""
    return em(content, question)


def _chunk(chunk_id: str, kb_id: str, doc_id: str, doc_name: str, content: str, similarity: float,
           vector: float, term: float) -> dict[str, Any]:
    return {"id": chunk_id, "content": content, "content_ltks": content, "document_id": doc_id,
            "document_keyword": doc_name, "document_name": doc_name, "dataset_id": kb_id, "important_keywords": [],
            "image_id": "", "positions": [], "similarity": round(similarity, 6),
            "vector_similarity": round(vector, 6), "term_similarity": round(term, 6), "doc_type_kwd": "",
            "doc_type": ""}


def _from_hit(hit: ChunkHit) -> dict[str, Any]:
    return _chunk(hit.chunk_id, hit.kb_id, hit.doc_id, hit.doc_name, hit.content, hit.similarity,
                  hit.vector_similarity, hit.term_similarity)


def _from_retrieved(c: RetrievedChunk) -> dict[str, Any]:
    # a chunk only the graph reached has no hybrid score: its fused score stands for it
    return _chunk(c.chunk_id, c.kb_id, c.doc_id, c.doc_name, c.content, c.score,
                  c.vector_similarity or 0.0, c.term_similarity or 0.0)


@blueprint.post("/retrieval")
def retrieval() -> Response:
    svc = services()
    body = json_body()
    if "dataset_ids" not in body:
        raise ApiError(DATA_ERROR, "`dataset_ids` is required.")
    dataset_ids = body["dataset_ids"]
    if not isinstance(dataset_ids, list) or not all(isinstance(d, str) for d in dataset_ids):
        raise ApiError(DATA_ERROR, "`dataset_ids` should be a list")
    if not dataset_ids:
        raise ApiError(DATA_ERROR, "`dataset_ids` is required.")
    kbs = [own_kb(d) for d in dict.fromkeys(dataset_ids)]
    if len({kb.embedding_model for kb in kbs}) > 1:
        raise ApiError(DATA_ERROR, 'Datasets use different embedding models."')
    if "question" not in body:
        raise ApiError(DATA_ERROR, "`question` is required.")
    question = body["question"]
    if not isinstance(question, str):
        raise ApiError(DATA_ERROR, "`question` should be a string")
    doc_ids = body.get("document_ids") or []
    if not isinstance(doc_ids, list) or not all(isinstance(d, str) for d in doc_ids):
        raise ApiError(DATA_ERROR, "`documents` should be a list")
    for doc_id in doc_ids:
        if not any(svc.meta.find_document(kb.id, doc_id) for kb in kbs):
            raise ApiError(DATA_ERROR, f"The datasets don't own the document {doc_id}")
    page = _number(body, "page", 1, integer=True, low=1)
    page_size = _number(body, "page_size", 30, integer=True, low=1)
    threshold = _number(body, "similarity_threshold", 0.2)
    # RAGFlow does not clamp the weight; past [0, 1] the fused score stops meaning anything
    weight = min(max(_number(body, "vector_similarity_weight", 0.3), 0.0), 1.0)
    top_k = _number(body, "top_k", 1024, integer=True, low=1)
    highlight = str(body.get("highlight", True)).lower() != "false"
    use_kg = bool(body.get("use_kg", False))
    if not question.strip():
        return ok({"total": 0, "chunks": [], "doc_aggs": {}})
    engine = svc.engine(tenant())
    try:
        for kb in kbs:
            engine.context(kb)  # the KB must have been embedded with the configured model
    except KBGraphError as exc:
        raise ApiError(DATA_ERROR, str(exc)) from None
    kb_ids = [kb.id for kb in kbs]
    pseudo: dict[str, Any] | None = None
    if use_kg and any(kb.graph.enabled for kb in kbs):
        entity_types = list(dict.fromkeys(t for kb in kbs for t in kb.graph.entity_types))
        settings = svc.settings.replace(similarity_threshold=threshold, vector_similarity_weight=weight, top_k=top_k)
        found = retrieve(engine.store, tenant(), kb_ids, question, "mix", embedder=engine.embedder_for(kbs[0]),
                         chat=engine.chat_for(kbs[0]), settings=settings, top_n=page * page_size,
                         extractor=NLPExtractor(entity_types=entity_types), entity_types=entity_types,
                         doc_ids=doc_ids)
        everything = [_from_retrieved(c) for c in found.chunks]
        chunks = everything[(page - 1) * page_size:page * page_size]
        total = len(everything)
        counts = Counter((c["document_id"], c["document_keyword"]) for c in everything)
        aggs = [{"doc_name": n, "doc_id": d, "count": k} for (d, n), k in
                sorted(counts.items(), key=lambda item: (-item[1], item[0][1]))]
        graph_text = render_context([], found.entities, found.relations, found.reports)
        if graph_text and page == 1:
            pseudo = {**_chunk(uuid.uuid1().hex, "", "", "Related content in Knowledge Graph", graph_text, 1.0, 1.0, 0.0),
                      "content_ltks": "", "dataset_id": kb_ids}
    else:
        query = ChunkQuery(question=question, kb_ids=kb_ids, top_n=page_size, top_k=top_k,
                           vector_similarity_weight=weight, similarity_threshold=threshold, doc_ids=tuple(doc_ids),
                           offset=(page - 1) * page_size)
        result = retrieve_chunks(engine.store, tenant(), query, engine.embedder_for(kbs[0]))
        chunks, total = [_from_hit(h) for h in result.chunks], result.total
        aggs = [{"doc_name": a.doc_name, "doc_id": a.doc_id, "count": a.count} for a in result.doc_aggs]
    if highlight:
        for c in chunks:
            c["highlight"] = highlight_terms(c["content"], question)
    if pseudo is not None:
        chunks.insert(0, pseudo)
    return ok({"chunks": chunks, "doc_aggs": aggs, "total": total})
