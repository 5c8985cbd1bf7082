"""A document's chunks: list, add, update, delete (RAGFLOW_API.md §6). The work is kbgraph's
(``Engine.add_chunk`` and friends, kbgraph/index/chunk_edit.py); this layer checks the request, speaks
RAGFlow's messages, and schedules the graph refresh an edit that changed graph rows needs."""

from __future__ import annotations

import time
from typing import Any

from flask import Response, request

from kbgraph.index.chunk_edit import ChunkChange, ChunkRecord
from kbgraph.meta import Document, KnowledgeBase, NotFound
from task_executor.tasks import schedule_refresh
from web.api import blueprint, dedupe, own_kb, tenant
from web.envelope import DATA_ERROR, EXCEPTION_ERROR, ApiError, json_body, ok
from web.retrieval import highlight_terms
from web.rows import document_row
from web.services import services

NOT_FOUND = 404


def chunk_row(chunk: ChunkRecord) -> dict[str, Any]:
    return {
        "id": chunk.id, "content": chunk.content, "document_id": chunk.doc_id, "docnm_kwd": chunk.doc_name,
        "document_name": chunk.doc_name, "important_keywords": list(chunk.important_keywords),
        "questions": list(chunk.questions), "dataset_id": chunk.kb_id, "image_id": "", "available": chunk.available,
        "positions": [], "create_time": _chunk_time(chunk.created), "create_timestamp": chunk.created,
    }


def _chunk_time(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) if seconds else ""


def _own_document(kb: KnowledgeBase, document_id: str) -> Document:
    try:
        return services().meta.get_document(kb.id, document_id)
    except NotFound:
        raise ApiError(DATA_ERROR, f"You don't own the document {document_id}.") from None


def _after_edit(kb: KnowledgeBase, change: ChunkChange) -> None:
    if change.graph.changed:  # PageRank and communities follow the changed rows
        schedule_refresh(services().celery, tenant(), kb.id)


def _query_int(name: str, default: int) -> int:
    raw = request.args.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError:
        raise ApiError(EXCEPTION_ERROR, f"ValueError(\"invalid literal for int() with base 10: '{raw}'\")") from None


@blueprint.get("/datasets/<dataset_id>/documents/<document_id>/chunks")
def list_chunks(dataset_id: str, document_id: str) -> Response:
    svc = services()
    kb = own_kb(dataset_id)
    doc = _own_document(kb, document_id)
    engine = svc.engine(tenant())
    chunk_id = request.args.get("id") or ""
    if chunk_id:
        found = engine.get_chunk(kb, chunk_id)
        if found is None or found.doc_id != doc.id:
            raise ApiError(NOT_FOUND, f"Chunk not found: {dataset_id}/{chunk_id}")
        return ok({"total": 1, "chunks": [chunk_row(found)], "doc": document_row(doc, kb)})
    page, page_size = max(_query_int("page", 1), 1), _query_int("page_size", 30)
    if page_size <= 0:
        page_size = 30  # RAGFlow: 0 means its default page
    keywords = request.args.get("keywords") or ""
    result = engine.chunk_page(kb, doc.id, keywords=keywords, offset=(page - 1) * page_size, limit=page_size)
    rows = [chunk_row(c) for c in result.chunks]
    if keywords.strip():
        for row in rows:
            row["content"] = highlight_terms(row["content"], keywords)
    return ok({"total": result.total, "chunks": rows, "doc": document_row(doc, kb)})


def _string_list(body: dict[str, Any], key: str, message: str) -> list[str]:
    value = body.get(key, [])
    if value is None:
        value = []
    if not isinstance(value, list):
        raise ApiError(DATA_ERROR, message)
    bad = next((i for i, v in enumerate(value) if not isinstance(v, str)), None)
    if bad is not None:
        raise ApiError(EXCEPTION_ERROR,
                       f"TypeError('sequence item {bad}: expected str instance, {type(value[bad]).__name__} found')")
    return value


@blueprint.post("/datasets/<dataset_id>/documents/<document_id>/chunks")
def add_chunk(dataset_id: str, document_id: str) -> Response:
    svc = services()
    kb = own_kb(dataset_id)
    doc = _own_document(kb, document_id)
    body = json_body()
    content = body.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ApiError(DATA_ERROR, "`content` is required")
    keywords = _string_list(body, "important_keywords", "`important_keywords` is required to be a list")
    questions = _string_list(body, "questions", "`questions` is required to be a list")
    change = svc.engine(tenant()).add_chunk(kb, doc, content, important_keywords=keywords, questions=questions)
    _after_edit(kb, change)
    chunk = change.chunk
    assert chunk is not None
    return ok({"chunk": {
        "id": chunk.id, "content": chunk.content, "important_keywords": chunk.important_keywords,
        "questions": chunk.questions, "create_time": _chunk_time(chunk.created),
        "create_timestamp": chunk.created, "dataset_id": kb.id, "document_id": doc.id}})


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "0", "")
    return bool(value)


def _qa_checked(doc: Document, kb: KnowledgeBase, content: str) -> None:
    method = doc.extra.get("chunk_method", kb.extra.get("chunk_method", "naive"))
    if method == "qa":
        parts = [p for p in content.replace("\t", "\n").split("\n") if p.strip()]
        if len(parts) != 2:
            raise ApiError(DATA_ERROR, "Q&A must be separated by TAB/ENTER key.")


@blueprint.route("/datasets/<dataset_id>/documents/<document_id>/chunks/<chunk_id>", methods=["PUT", "PATCH"])
def update_chunk(dataset_id: str, document_id: str, chunk_id: str) -> Response:
    svc = services()
    body = json_body(required=False)
    missing = ApiError(DATA_ERROR, f"Can't find this chunk {chunk_id}")
    engine = svc.engine(tenant())
    chunk = engine.find_chunk(chunk_id)  # RAGFlow looks in the caller's whole store first
    if chunk is None:
        raise missing
    kb = own_kb(dataset_id)
    doc = _own_document(kb, document_id)
    if chunk.kb_id != kb.id or chunk.doc_id != doc.id:
        raise missing
    content = body.get("content")
    if "content" in body and not isinstance(content, str):
        raise ApiError(EXCEPTION_ERROR, "TypeError('expected string or bytes-like object')")
    keywords = questions = None
    if "important_keywords" in body:
        keywords = _string_list(body, "important_keywords", "`important_keywords` should be a list")
    if "questions" in body:
        questions = _string_list(body, "questions", "`questions` should be a list")
    available = _flag(body["available"]) if "available" in body else None
    if content is not None:
        _qa_checked(doc, kb, content)
    change = engine.update_chunk(kb, chunk, content=content, important_keywords=keywords, questions=questions,
                                 available=available)
    _after_edit(kb, change)
    return ok()


@blueprint.delete("/datasets/<dataset_id>/documents/<document_id>/chunks")
def delete_chunks(dataset_id: str, document_id: str) -> Response:
    svc = services()
    kb = own_kb(dataset_id)
    try:
        doc = svc.meta.get_document(kb.id, document_id)
    except NotFound:
        raise ApiError(EXCEPTION_ERROR, f"LookupError(\"Can't find the document with ID {document_id}!\")") from None
    body = json_body(required=False)
    ids = body.get("chunk_ids")
    if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
        raise ApiError(DATA_ERROR, "`chunk_ids` should be a list of strings")
    unique, dupes = dedupe(ids or [])
    change = svc.engine(tenant()).delete_chunks(kb, doc, unique or None)
    _after_edit(kb, change)
    if unique and change.deleted != len(unique):
        raise ApiError(DATA_ERROR, f"rm_chunk deleted chunks {change.deleted}, expect {len(unique)}")
    if dupes:
        return ok({"success_count": change.deleted, "errors": [f"Duplicate chunk ids: {d}" for d in dupes]})
    return ok()
