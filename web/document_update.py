"""PUT/PATCH /datasets/{id}/documents/{doc} (RAGFLOW_API.md §5.3): rename, meta_fields, chunk_method and
parser_config, enable/disable. Every check runs before anything changes, so a refused update leaves
the document as it was."""

from __future__ import annotations

from typing import Any

from flask import Response

from kbgraph.meta import Document, KnowledgeBase, NotFound
from task_executor.tasks import schedule_refresh
from web.api import blueprint, own_kb, tenant
from web.envelope import ARGUMENT_ERROR, DATA_ERROR, EXCEPTION_ERROR, ApiError, json_body, ok
from web.rows import document_parser_config, document_row, suffix
from web.schemas import deep_merge, method_default
from web.services import services

DOCUMENT_CHUNK_METHODS = frozenset({"naive", "manual", "qa", "table", "paper", "book", "laws", "presentation",
                                    "picture", "one", "knowledge_graph", "email", "tag"})
READ_ONLY = ("chunk_count", "token_count", "progress")


def _current(doc: Document, key: str) -> Any:
    if key == "progress":
        return -1.0 if doc.status == "failed" else float(doc.progress)
    return getattr(doc, key)


def _check_read_only(body: dict[str, Any], doc: Document) -> None:
    for key in READ_ONLY:
        if key in body and body[key] != _current(doc, key):
            raise ApiError(DATA_ERROR, f"Can't change `{key}`.")


def _checked_name(body: dict[str, Any], doc: Document, kb: KnowledgeBase) -> str | None:
    if "name" not in body or body["name"] == doc.name:
        return None
    name = body["name"]
    if not isinstance(name, str):  # RAGFlow fails on name.encode(): clients look for "AttributeError"
        raise ApiError(EXCEPTION_ERROR, f"AttributeError(\"'{type(name).__name__}' object has no attribute 'encode'\")")
    if len(name.encode("utf-8")) > 255:
        raise ApiError(ARGUMENT_ERROR, "File name must be 255 bytes or less.")
    if suffix(name) != suffix(doc.name) or not suffix(name):
        raise ApiError(ARGUMENT_ERROR, "The extension of file can't be changed")
    if services().meta.find_document(kb.id, name) is not None:
        raise ApiError(DATA_ERROR, "Duplicated document name in the same dataset.")
    return name


def _checked_method(body: dict[str, Any], doc: Document, kb: KnowledgeBase) -> str | None:
    """The new chunk_method, or None when it is not sent or unchanged."""
    if "chunk_method" not in body:
        return None
    method = body["chunk_method"]
    if not isinstance(method, str) or method not in DOCUMENT_CHUNK_METHODS:
        shown = method if method is not None else "None"
        raise ApiError(DATA_ERROR, f"`chunk_method` {shown} doesn't exist")
    if doc.extra.get("type") == "visual" or suffix(doc.name) in ("ppt", "pptx", "pages"):
        raise ApiError(DATA_ERROR, "Not supported yet!")
    current = doc.extra.get("chunk_method", kb.extra.get("chunk_method", "naive"))
    return method if method != current else None


@blueprint.route("/datasets/<dataset_id>/documents/<document_id>", methods=["PUT", "PATCH"])
def update_document(dataset_id: str, document_id: str) -> Response:
    svc = services()
    body = json_body(required=False)
    kb = own_kb(dataset_id, "You don't own the dataset.")
    try:
        doc = svc.meta.get_document(kb.id, document_id)
    except NotFound:
        raise ApiError(DATA_ERROR, "The dataset doesn't own the document.") from None
    _check_read_only(body, doc)
    if "meta_fields" in body and not isinstance(body["meta_fields"], dict):
        raise ApiError(DATA_ERROR, "meta_fields must be a dictionary")
    name = _checked_name(body, doc, kb)
    sent_config = body.get("parser_config")
    if sent_config is not None and not isinstance(sent_config, dict):
        raise ApiError(DATA_ERROR, "`parser_config` should be an object")
    method = _checked_method(body, doc, kb)
    enabled = body.get("enabled")
    if enabled is not None and (isinstance(enabled, bool) or enabled not in (0, 1)):
        raise ApiError(DATA_ERROR, "`enabled` should be 0 or 1")

    engine = svc.engine(tenant())
    extra = dict(doc.extra)
    if "meta_fields" in body:
        extra["meta_fields"] = body["meta_fields"]
    config = document_parser_config(doc, kb)
    if sent_config:
        config = deep_merge(config, sent_config)
        if "raptor" not in sent_config:
            config.pop("raptor", None)
        extra["parser_config"] = config
    reparse = False
    if method is not None:
        extra["chunk_method"] = method
        if not sent_config:
            extra["parser_config"] = deep_merge(config, method_default(method) or {})
        reparse = True
    if name is not None:
        doc = engine.rename_document(kb, doc, name)
    doc = svc.meta.update_document(kb.id, doc.id, extra=extra)
    if reparse:  # a new chunk method means new chunks: the old ones (and their graph part) go
        svc.meta.request_cancel_document(kb.id, doc.id)
        doc, change = engine.reset_document(
            kb, doc, f"The chunk method changed to {method}: parse the document again.")
        if change.changed:
            schedule_refresh(svc.celery, tenant(), kb.id)
    if enabled is not None:
        doc = engine.set_document_enabled(kb, doc, bool(enabled))
    return ok(document_row(doc, kb))
