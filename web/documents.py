"""Documents: upload, list, download, delete; parse (queue Celery tasks) and stop parsing.
RAGFLOW_API.md §5."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from flask import Response, request, send_file

from kbgraph.blob import BlobError, BlobNotFound, document_file
from kbgraph.meta import Document, KnowledgeBase, NotFound
from task_executor.submit import cancel_documents, enqueue_documents, run_in_progress
from task_executor.heartbeat import no_worker_running
from task_executor.tasks import schedule_refresh
from web.api import blueprint, dedupe, id_list, own_kb, tenant
from web.envelope import ARGUMENT_ERROR, DATA_ERROR, EXCEPTION_ERROR, SERVER_ERROR, ApiError, json_body, ok
from web.rows import RUN, document_row, file_type, suffix
from web.services import Services, services
from web.uploads import UploadTooLarge


def _store_upload(svc: Services, kb: KnowledgeBase, name: str, stream: Any, kind: str) -> Document:
    try:
        return svc.store_upload(kb, name, stream, kind)
    except UploadTooLarge as exc:
        raise ApiError(ARGUMENT_ERROR, str(exc)) from None
    except BlobError as exc:  # the blob store is down or refuses: say which and what to set
        raise ApiError(SERVER_ERROR, f"{name}: the file could not be stored: {exc}") from None


@blueprint.post("/datasets/<dataset_id>/documents")
def upload_documents(dataset_id: str) -> Response:
    svc = services()
    if "file" not in request.files:
        raise ApiError(ARGUMENT_ERROR, "No file part!")
    files = request.files.getlist("file")
    for f in files:
        if not f.filename:
            raise ApiError(ARGUMENT_ERROR, "No file selected!")
        if len(f.filename.encode("utf-8")) > 255:
            raise ApiError(ARGUMENT_ERROR, "File name must be 255 bytes or less.")
    try:
        kb = svc.meta.get_kb(tenant(), dataset_id)
    except NotFound:
        raise ApiError(EXCEPTION_ERROR, f"LookupError(\"Can't find the dataset with ID {dataset_id}!\")") from None
    rows, errors = [], []
    for f in files:
        name = PurePosixPath(f.filename.replace("\\", "/")).name or f.filename
        kind = file_type(name)
        if kind is None:
            errors.append(f"{name}: This type of file has not been supported yet!")
            continue
        # a name already taken becomes name(n) (the database's unique constraint decides races);
        # the same bytes under the same name are a retry and get the document they made
        rows.append(document_row(_store_upload(svc, kb, name, f.stream, kind), kb))
    if errors:
        raise ApiError(SERVER_ERROR, "\n".join(errors))
    return ok(rows)


def _int(name: str, default: int) -> int:
    try:
        return int(request.args.get(name, default))
    except ValueError:
        raise ApiError(ARGUMENT_ERROR, f"`{name}` should be an integer") from None


@blueprint.get("/datasets/<dataset_id>/documents")
def list_documents(dataset_id: str) -> Response:
    svc = services()
    kb = own_kb(dataset_id, f"You don't own the dataset {dataset_id}. ")
    docs = svc.meta.list_documents(kb.id, limit=None)
    doc_id, name = request.args.get("id"), request.args.get("name")
    # each must name a document of the dataset; together they filter (an id and another's name: none)
    for wanted, attr in ((doc_id, "id"), (name, "name")):
        if wanted and not any(getattr(d, attr) == wanted for d in docs):
            raise ApiError(DATA_ERROR, f"You don't own the document {wanted}.")
    if doc_id:
        docs = [d for d in docs if d.id == doc_id]
    if name:
        docs = [d for d in docs if d.name == name]
    keywords = (request.args.get("keywords") or "").casefold()
    if keywords:
        docs = [d for d in docs if keywords in d.name.casefold()]
    suffixes = {s.lower().lstrip(".") for s in request.args.getlist("suffix")}
    if suffixes:
        docs = [d for d in docs if suffix(d.name) in suffixes]
    runs = set(request.args.getlist("run"))
    if runs:
        numeric = {"0": "UNSTART", "1": "RUNNING", "2": "CANCEL", "3": "DONE", "4": "FAIL"}
        wanted = {numeric.get(r, r.upper()) for r in runs}
        docs = [d for d in docs if RUN[d.status] in wanted]
    attr = "updated" if request.args.get("orderby") == "update_time" else "created"
    descending = (request.args.get("desc") or "true").strip().lower() != "false"
    docs.sort(key=lambda d: (getattr(d, attr), d.id), reverse=descending)
    total = len(docs)
    page, page_size = max(_int("page", 1), 1), max(_int("page_size", 30), 0)
    docs = docs[(page - 1) * page_size:page * page_size]
    since, until = _int("create_time_from", 0), _int("create_time_to", 0)
    docs = [d for d in docs if (not since or d.created >= since) and (not until or d.created <= until)]
    waiting = any(d.status in ("pending", "running") for d in docs)
    no_worker = waiting and no_worker_running(svc.pool.redis, svc.settings)
    return ok({"total": total, "docs": [document_row(d, kb, no_worker=no_worker) for d in docs]})


@blueprint.get("/datasets/<dataset_id>/documents/<document_id>")
def download_document(dataset_id: str, document_id: str) -> Response:
    svc = services()
    kb = own_kb(dataset_id, f"You do not own the dataset {dataset_id}.")
    try:
        doc = svc.meta.get_document(kb.id, document_id)
    except NotFound:
        raise ApiError(DATA_ERROR, f"The dataset not own the document {document_id}.") from None
    try:
        file = document_file(svc.blobs, kb.id, doc.id, doc.location)
        if file.size == 0:
            raise ApiError(DATA_ERROR, "This file is empty.")
        stream = file.open()
    except BlobNotFound:
        raise ApiError(DATA_ERROR, "This file is empty.") from None
    except BlobError as exc:
        raise ApiError(SERVER_ERROR, f"{doc.name}: the file could not be read: {exc}") from None
    return send_file(stream, mimetype="application/octet-stream", as_attachment=True, download_name=doc.name)


def remove_documents(svc: Services, kb: KnowledgeBase, doc_ids: list[str]) -> int:
    """Delete documents (rows, graph share, stored file); returns how many.

    The graph refresh is queued before the first deletion too: a server killed halfway must not
    leave PageRank and communities describing documents that are gone until something else runs.
    """
    if not doc_ids:
        return 0
    if kb.graph.enabled:
        schedule_refresh(svc.celery, kb.tenant_id, kb.id)
    engine = svc.engine(kb.tenant_id)
    for doc_id in doc_ids:
        svc.meta.request_cancel_document(kb.id, doc_id)  # a running index stops instead of writing on
        engine.delete_document(kb.name, doc_id, refresh=False)
        svc.delete_document_file(kb.id, doc_id)
    if kb.graph.enabled:  # after a long batch the first refresh may have run already
        schedule_refresh(svc.celery, kb.tenant_id, kb.id)
    return len(doc_ids)


@blueprint.delete("/datasets/<dataset_id>/documents")
def delete_documents(dataset_id: str) -> Response:
    svc = services()
    kb = own_kb(dataset_id, f"You don't own the dataset {dataset_id}. ")
    body = json_body(required=False)
    ids = id_list(body, "ids")
    known = {d.id for d in svc.meta.list_documents(kb.id, limit=None)}
    unique, dupes = dedupe(ids) if ids else (sorted(known), [])
    missing = [i for i in unique if i not in known]
    removed = remove_documents(svc, kb, [i for i in unique if i in known])
    if missing:
        raise ApiError(DATA_ERROR, f"Documents not found: {missing}")
    if dupes:
        return ok({"success_count": removed, "errors": [f"Duplicate document ids: {d}" for d in dupes]})
    return ok()


def _document_ids(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    ids = id_list(body, "document_ids")
    if not ids:
        raise ApiError(DATA_ERROR, "`document_ids` is required")
    return dedupe(ids)


@blueprint.post("/datasets/<dataset_id>/chunks")
def parse_documents(dataset_id: str) -> Response:
    svc = services()
    kb = own_kb(dataset_id)
    ids, dupes = _document_ids(json_body(required=False))
    docs = {d.id: d for d in svc.meta.list_documents(kb.id, limit=None)}
    missing = [i for i in ids if i not in docs]
    wanted = [i for i in ids if i in docs]
    if any(docs[i].status == "running" and run_in_progress(svc.celery, svc.meta, kb.id, i) for i in wanted):
        raise ApiError(DATA_ERROR, "Can't parse document that is currently being processed")
    enqueue_documents(svc.settings, tenant(), kb.id, wanted, meta=svc.meta, app=svc.celery)
    if missing:
        raise ApiError(DATA_ERROR, f"Documents not found: {missing}")
    if dupes:
        return ok({"success_count": len(wanted), "errors": [f"Duplicate document ids: {d}" for d in dupes]})
    return ok()


@blueprint.delete("/datasets/<dataset_id>/chunks")
def stop_parsing(dataset_id: str) -> Response:
    svc = services()
    kb = own_kb(dataset_id)
    ids, _ = _document_ids(json_body(required=False))
    for doc_id in ids:
        try:
            doc = svc.meta.get_document(kb.id, doc_id)
        except NotFound:
            raise ApiError(DATA_ERROR, f"You don't own the document {doc_id}.") from None
        if doc.status != "running":
            raise ApiError(DATA_ERROR, "Can't stop parsing document with progress at 0 or 1")
    cancel_documents(svc.settings, tenant(), kb.id, ids, meta=svc.meta, app=svc.celery)
    return ok()
