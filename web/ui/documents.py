"""Documents of a knowledge base: upload (several files, drag and drop), parse, live progress,
cancel, re-parse, delete, and each document's chunks.

The page polls ``/ui/api/kbs/<kb>/documents`` once a second while something runs; parsing runs on
the Celery workers exactly as the REST API queues it.
"""

from __future__ import annotations

import time
from pathlib import PurePosixPath
from typing import Any

from flask import Response, flash, redirect, render_template, request, url_for

from kbgraph.blob import BlobError
from kbgraph.index import chunk_edit
from kbgraph.meta import Document, KnowledgeBase, Task
from kbgraph.store.base import StoreError
from kbgraph.store.records import GraphMeta, graph_meta_id
from task_executor.heartbeat import no_worker_running
from task_executor.submit import NO_WORKER_MESSAGE, QUEUED_MESSAGE, cancel_documents, enqueue_documents
from task_executor.tasks import refresh_pending_key, schedule_refresh
from web.documents import remove_documents
from web.envelope import store_failure_message
from web.highlight import mark
from web.uploads import UploadTooLarge
from web.rows import file_type
from web.services import services
from web.ui.common import PageError, engine, json_body, own_kb, page_blueprint, tenant

blueprint = page_blueprint("ui_docs")


@blueprint.get("/kbs/<kb_id>")
def documents_page(kb_id: str) -> str:
    kb = own_kb(kb_id)
    return render_template("documents.html", kb=kb)


def _task_row(task: Task | None) -> dict[str, Any] | None:
    if task is None:
        return None
    return {"id": task.id, "status": task.status, "progress": task.progress, "message": task.message,
            "error": task.error, "llm_calls": task.llm_calls, "prompt_tokens": task.prompt_tokens,
            "completion_tokens": task.completion_tokens, "started": task.started, "finished": task.finished}


def _document_row(doc: Document, task: Task | None, no_worker: bool) -> dict[str, Any]:
    waiting = no_worker and doc.status in ("pending", "running")
    message = NO_WORKER_MESSAGE if waiting and doc.message in (QUEUED_MESSAGE, "") else doc.message
    return {"id": doc.id, "name": doc.name, "size": doc.size, "status": doc.status, "progress": doc.progress,
            "message": message, "error": doc.error, "no_worker": waiting, "chunks": doc.chunk_count, "tokens": doc.token_count,
            "started": doc.started, "finished": doc.finished, "in_graph": doc.extracted, "task": _task_row(task)}


def _graph_state(kb: KnowledgeBase, docs: list[Document]) -> dict[str, Any]:
    """Where the KB's graph stands: the whole-KB build task, and whether the debounced refresh
    (PageRank, resolution, communities) after parsing is still to come or running."""
    if not kb.graph.enabled:
        return {"enabled": False}
    svc = services()
    try:
        found = svc.engine(tenant()).store.get(tenant(), [kb.id], [graph_meta_id(kb.id)])
    except StoreError as exc:  # the documents are still listed (metadata); the graph's state is not known
        return {"enabled": True, "store_error": store_failure_message(exc)}
    meta = GraphMeta.from_doc(found[0]) if found else GraphMeta(kb_id=kb.id)
    queued = bool(svc.pool.redis.exists(refresh_pending_key(svc.settings.redis_prefix, kb.id)))
    build = None
    if kb.extra.get("graphrag_task_id"):
        try:
            build = _task_row(svc.meta.get_task(kb.id, kb.extra["graphrag_task_id"]))
        except Exception:  # an old task row that is gone: no build to show
            build = None
    parsing = any(d.status in ("pending", "running") for d in docs)
    stale = meta.version > 0 and meta.is_stale("pagerank")
    refresh = "queued" if queued else ("running" if stale and not parsing else "idle")
    if meta.phase_status.get("communities") == "running":
        refresh = "running"
    # the refresh task's own row: which phase it is in and how far (PageRank, communities, reports)
    latest = svc.meta.list_tasks(kb.id, kind="refresh", newest_first=True, limit=1)
    refresh_task = _task_row(latest[0]) if latest else None
    if refresh_task is not None and refresh_task["status"] in ("pending", "running"):
        refresh = "running"
    return {"enabled": True, "version": meta.version, "entities": meta.entity_count, "relations": meta.relation_count,
            "reports": meta.report_count, "refresh": refresh, "refresh_task": refresh_task, "build": build,
            "phases": {p: meta.phase_status.get(p, "never") for p in ("pagerank", "resolution", "communities")}}


PAGE_SIZES = (10, 20, 50, 100)


def _page_args() -> tuple[int, int, str]:
    """(page from 1, page size, name filter) of the documents list, forgiving: a page past the end
    shows the last one."""
    try:
        size = int(request.args.get("page_size", 20))
    except ValueError:
        size = 20
    try:
        page = max(1, int(request.args.get("page", 1)))
    except ValueError:
        page = 1
    return page, size if size in PAGE_SIZES else 20, (request.args.get("q") or "").strip()[:200]


@blueprint.get("/ui/api/kbs/<kb_id>/documents")
def document_status(kb_id: str) -> dict[str, Any]:
    """One page of the knowledge base's documents by name (``q``: the names holding it, any case),
    with their live progress, and the state of the whole knowledge base (busy, the graph)."""
    kb = own_kb(kb_id)
    meta = services().meta
    docs = meta.list_documents(kb.id, limit=None)
    page, size, query = _page_args()
    matching = sorted((d for d in docs if query.casefold() in d.name.casefold()), key=lambda d: (d.name.casefold(), d.id))
    pages = max(1, -(-len(matching) // size))
    page = min(page, pages)
    shown = matching[(page - 1) * size:page * size]
    latest: dict[str, Task] = {}
    wanted = {d.id for d in shown}
    for task in meta.list_tasks(kb.id, kind="index", newest_first=True, limit=None):
        if task.doc_id in wanted:
            latest.setdefault(task.doc_id, task)
    svc = services()
    no_worker = no_worker_running(svc.pool.redis, svc.settings)
    rows = [_document_row(d, latest.get(d.id), no_worker) for d in shown]
    return {"now": time.time_ns() // 1_000_000, "documents": rows, "no_worker": no_worker,
            "total": len(matching), "all": len(docs), "page": page, "pages": pages, "page_size": size, "q": query,
            "parsing": sum(d.status in ("pending", "running") for d in docs), "graph": _graph_state(kb, docs)}


@blueprint.post("/ui/api/kbs/<kb_id>/documents")
def upload(kb_id: str) -> dict[str, Any]:
    kb = own_kb(kb_id)
    svc = services()
    files = [f for f in request.files.getlist("file") if f.filename]
    if not files:
        raise PageError("Choose at least one file to upload.")
    uploaded, refused = [], []
    for f in files:
        name = PurePosixPath((f.filename or "").replace("\\", "/")).name
        kind = file_type(name)
        if not name or kind is None or len(name.encode("utf-8")) > 255:
            refused.append(f"{name or f.filename}: this type of file is not supported")
            continue
        try:  # a taken name becomes name(n); the same bytes again are the document they made
            uploaded.append(svc.store_upload(kb, name, f.stream, kind))
        except UploadTooLarge as exc:
            refused.append(str(exc))
        except BlobError as exc:  # the blob store is down or refuses: say which and what to set
            refused.append(f"{name}: the file could not be stored: {exc}")
    if request.form.get("parse", "on") == "on" and uploaded:
        enqueue_documents(svc.settings, tenant(), kb.id, [d.id for d in uploaded], meta=svc.meta, app=svc.celery)
    return {"uploaded": [d.name for d in uploaded], "refused": refused}


def _ids(kb: KnowledgeBase) -> list[str]:
    ids = json_body().get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise PageError("Select one or more documents.")
    known = {d.id for d in services().meta.list_documents(kb.id, limit=None)}
    missing = [i for i in ids if i not in known]
    if missing:
        raise PageError(f"{len(missing)} of the selected documents no longer exist; reload the page.", 404)
    return list(dict.fromkeys(ids))


@blueprint.post("/ui/api/kbs/<kb_id>/documents/parse")
def parse(kb_id: str) -> dict[str, Any]:
    kb = own_kb(kb_id)
    svc = services()
    ids = _ids(kb)
    tasks = enqueue_documents(svc.settings, tenant(), kb.id, ids, meta=svc.meta, app=svc.celery)
    return {"queued": len(tasks)}


@blueprint.post("/ui/api/kbs/<kb_id>/documents/cancel")
def cancel(kb_id: str) -> dict[str, Any]:
    kb = own_kb(kb_id)
    svc = services()
    ids = [i for i in _ids(kb) if svc.meta.get_document(kb.id, i).status in ("pending", "running")]
    if not ids:
        raise PageError("None of the selected documents is being parsed.")
    asked = cancel_documents(svc.settings, tenant(), kb.id, ids, meta=svc.meta, app=svc.celery)
    return {"cancelled": asked}


@blueprint.post("/ui/api/kbs/<kb_id>/documents/delete")
def delete(kb_id: str) -> dict[str, Any]:
    kb = own_kb(kb_id)
    svc = services()
    return {"deleted": remove_documents(svc, kb, _ids(kb))}


CHUNKS_PER_PAGE = 20


def _whole_number(raw: str | None, default: int) -> int:
    try:
        return max(1, int(raw or default))
    except ValueError:
        return default


@blueprint.get("/kbs/<kb_id>/documents/<doc_id>")
def chunks_page(kb_id: str, doc_id: str) -> str:
    """One page of the document's chunks (``q``: the ones holding these words, best first, the
    words marked), the search and the page kept by the edit forms."""
    kb = own_kb(kb_id)
    doc = services().meta.get_document(kb.id, doc_id)
    keywords = (request.args.get("q") or "").strip()[:200]
    number = _whole_number(request.args.get("page"), 1)
    ctx = engine().context(kb)
    focus = request.args.get("chunk", "")
    if focus and not keywords and "page" not in request.args:  # a citation's link: the page that holds it
        ids = [c.id for c in chunk_edit.list_chunks(ctx, doc.id, limit=None).chunks]
        number = ids.index(focus) // CHUNKS_PER_PAGE + 1 if focus in ids else 1
    page = chunk_edit.list_chunks(ctx, doc.id, keywords=keywords, offset=(number - 1) * CHUNKS_PER_PAGE,
                                  limit=CHUNKS_PER_PAGE)
    pages = max(1, -(-page.total // CHUNKS_PER_PAGE))
    if number > pages:  # past the end (chunks deleted meanwhile): the last page
        number = pages
        page = chunk_edit.list_chunks(ctx, doc.id, keywords=keywords, offset=(number - 1) * CHUNKS_PER_PAGE,
                                      limit=CHUNKS_PER_PAGE)
    return render_template("chunks.html", kb=kb, doc=doc, chunks=page.chunks, total=page.total, q=keywords,
                           page=number, pages=pages, per_page=CHUNKS_PER_PAGE, mark=mark, focus=focus)


def _doc_chunk(kb: KnowledgeBase, doc_id: str, chunk_id: str) -> tuple[Document, chunk_edit.ChunkRecord]:
    doc = services().meta.get_document(kb.id, doc_id)
    chunk = engine().find_chunk(chunk_id)
    if chunk is None or chunk.kb_id != kb.id or chunk.doc_id != doc.id:
        raise PageError("That chunk no longer exists.", 404)
    return doc, chunk


def _after_edit(kb: KnowledgeBase, change: chunk_edit.ChunkChange) -> None:
    if change.graph.changed:  # PageRank and communities follow the changed graph rows
        schedule_refresh(services().celery, tenant(), kb.id)


def _keywords() -> list[str]:
    return [k.strip() for k in (request.form.get("important_keywords") or "").split(",") if k.strip()]


def _back(kb: KnowledgeBase, doc_id: str, chunk_id: str = "") -> Response:
    """To the chunks page the form came from: its search and its page kept (the forms carry them)."""
    q = (request.form.get("q") or "").strip()[:200] or None
    page = _whole_number(request.form.get("page"), 1)
    target = url_for("ui_docs.chunks_page", kb_id=kb.id, doc_id=doc_id, q=q, page=page if page > 1 else None,
                     chunk=chunk_id or None)
    return redirect(target + (f"#chunk-{chunk_id}" if chunk_id else ""))


@blueprint.post("/kbs/<kb_id>/documents/<doc_id>/chunks")
def add_chunk(kb_id: str, doc_id: str) -> Response:
    kb = own_kb(kb_id)
    doc = services().meta.get_document(kb.id, doc_id)
    content = request.form.get("content") or ""
    if not content.strip():
        raise PageError("Write the chunk's text first.")
    change = engine().add_chunk(kb, doc, content, important_keywords=_keywords())
    _after_edit(kb, change)
    flash("Chunk added" + (" and its entities extracted into the graph." if kb.graph.enabled else "."))
    return _back(kb, doc.id, change.chunk.id if change.chunk else "")


@blueprint.post("/kbs/<kb_id>/documents/<doc_id>/chunks/<chunk_id>")
def update_chunk(kb_id: str, doc_id: str, chunk_id: str) -> Response:
    kb = own_kb(kb_id)
    doc, chunk = _doc_chunk(kb, doc_id, chunk_id)
    content = request.form.get("content")
    if content is not None and not content.strip():
        raise PageError("A chunk cannot be empty; delete it instead.")
    change = engine().update_chunk(kb, chunk, content=content if content != chunk.content else None,
                                   important_keywords=_keywords(), available=request.form.get("available") == "on")
    _after_edit(kb, change)
    flash("Chunk saved" + ("; the graph follows the new text." if change.graph.changed else "."))
    return _back(kb, doc.id, chunk.id)


@blueprint.post("/kbs/<kb_id>/documents/<doc_id>/chunks/<chunk_id>/delete")
def delete_chunk(kb_id: str, doc_id: str, chunk_id: str) -> Response:
    kb = own_kb(kb_id)
    doc, chunk = _doc_chunk(kb, doc_id, chunk_id)
    change = engine().delete_chunks(kb, doc, [chunk.id])
    _after_edit(kb, change)
    flash("Chunk deleted" + (" with its part of the graph." if change.graph.changed else "."))
    return _back(kb, doc.id)
