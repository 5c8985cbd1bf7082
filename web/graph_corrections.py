"""Corrections of a dataset's knowledge graph, beside RAGFlow's knowledge-graph routes (docs/api.md):
list, make and undo corrections, merge candidates, curated imports in and out. Another tenant's
dataset gets RAGFlow's knowledge-graph answer ("No authorization."); a correction that would fold two
entities together is refused with ``data.confirm`` true until it is sent again with ``"force": true``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Response, request

from kbgraph.engine import Engine, KBGraphError
from kbgraph.engine.corrections import CorrectionConflict, CorrectionOutcome, correction_dict
from kbgraph.graph.curated import FORMATS, CuratedFormatError, parse_curated
from kbgraph.meta import KnowledgeBase
from web.api import blueprint, own_kb, tenant
from web.envelope import ARGUMENT_ERROR, AUTHENTICATION_ERROR, DATA_ERROR, ApiError, json_body, ok
from web.services import services

# a curated file sent to the import route: larger ones are refused before they are read whole
MAX_IMPORT_BYTES = 64 * 1024 * 1024


def _kb(dataset_id: str) -> KnowledgeBase:
    return own_kb(dataset_id, "No authorization.", AUTHENTICATION_ERROR)


def _who(body: dict[str, Any]) -> str:
    who = body.get("who")
    return f"{who} (api:{tenant()})" if isinstance(who, str) and who.strip() else f"api:{tenant()}"


def _text(body: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise ApiError(ARGUMENT_ERROR, f"`{key}` is required and must be a non-empty string")
    return value


def _names(body: dict[str, Any], key: str, *, required: bool = True) -> list[str]:
    value = body.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise ApiError(ARGUMENT_ERROR, f"`{key}` must be a non-empty list of strings")
    return value


def _run(call: Callable[[], CorrectionOutcome]) -> Response:
    try:
        return ok(call().to_dict())
    except CorrectionConflict as exc:
        raise ApiError(DATA_ERROR, str(exc).replace(" (--force)", ' ("force": true)'), data={"confirm": True},
                       with_data=True) from None
    except KBGraphError as exc:
        raise ApiError(DATA_ERROR, str(exc)) from None


def _operation(engine: Engine, kb: str, op: str, body: dict[str, Any]) -> Callable[[], CorrectionOutcome]:
    force, who = bool(body.get("force")), _who(body)
    calls: dict[str, Callable[[], CorrectionOutcome]] = {
        "rename": lambda: engine.rename_entity(kb, _text(body, "entity"), _text(body, "name"), force=force, who=who),
        "set": lambda: engine.set_entity(kb, _text(body, "entity"), type=_text(body, "type", required=False),
                                         description=_text(body, "description", required=False), who=who),
        "merge": lambda: engine.merge_entities(kb, _names(body, "entities"), _text(body, "into", required=False),
                                               force=force, who=who),
        "split": lambda: engine.split_entity(kb, _text(body, "entity"), names=_names(body, "names", required=False),
                                             docs=_names(body, "documents", required=False),
                                             new_name=_text(body, "name", required=False), force=force, who=who),
        "delete_entity": lambda: engine.delete_entity(kb, _text(body, "entity"), who=who),
        "delete_relation": lambda: engine.delete_relation(kb, _text(body, "source"), _text(body, "target"), who=who),
        "add_entity": lambda: engine.add_entity(kb, _text(body, "name"), _text(body, "type", required=False) or "unknown",
                                                _text(body, "description", required=False) or "", force=force, who=who),
        "add_relation": lambda: engine.add_relation(kb, _text(body, "source"), _text(body, "target"),
                                                    _text(body, "description", required=False) or "",
                                                    _names(body, "keywords", required=False), _weight(body), who=who),
    }
    if op not in calls:
        raise ApiError(ARGUMENT_ERROR, f"`op` must be one of {', '.join(calls)} (not {op!r})")
    return calls[op]


def _weight(body: dict[str, Any]) -> float:
    value = body.get("weight", 1.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ApiError(ARGUMENT_ERROR, "`weight` must be a number")
    return float(value)


@blueprint.get("/datasets/<dataset_id>/knowledge_graph/corrections")
def list_corrections(dataset_id: str) -> Response:
    kb = _kb(dataset_id)
    try:
        found = services().engine(tenant()).corrections(kb.name)
    except KBGraphError as exc:
        raise ApiError(DATA_ERROR, str(exc)) from None
    return ok([correction_dict(c) for c in found])


@blueprint.post("/datasets/<dataset_id>/knowledge_graph/corrections")
def make_correction(dataset_id: str) -> Response:
    kb = _kb(dataset_id)
    body = json_body()
    op = body.get("op")
    if not isinstance(op, str):
        raise ApiError(ARGUMENT_ERROR, "`op` is required: rename, set, merge, split, delete_entity, delete_relation, "
                       "add_entity or add_relation")
    return _run(_operation(services().engine(tenant()), kb.name, op, body))


@blueprint.post("/datasets/<dataset_id>/knowledge_graph/corrections/undo")
def undo_last_correction(dataset_id: str) -> Response:
    kb = _kb(dataset_id)
    who = _who(json_body(required=False) or {})
    return _run(lambda: services().engine(tenant()).undo_correction(kb.name, None, who=who))


@blueprint.post("/datasets/<dataset_id>/knowledge_graph/corrections/<int:number>/undo")
def undo_correction(dataset_id: str, number: int) -> Response:
    kb = _kb(dataset_id)
    who = _who(json_body(required=False) or {})
    return _run(lambda: services().engine(tenant()).undo_correction(kb.name, number, who=who))


@blueprint.get("/datasets/<dataset_id>/knowledge_graph/similar")
def similar_entities(dataset_id: str) -> Response:
    kb = _kb(dataset_id)
    name = request.args.get("entity", "")
    if not name.strip():
        raise ApiError(ARGUMENT_ERROR, "`entity` is required")
    try:
        found = services().engine(tenant()).similar_entities(kb.name, name)
    except KBGraphError as exc:
        raise ApiError(DATA_ERROR, str(exc)) from None
    return ok([{"entity_name": e.name, "entity_type": e.type, "mentions": e.mention_count} for e in found])


@blueprint.post("/datasets/<dataset_id>/knowledge_graph/import")
def import_graph(dataset_id: str) -> Response:
    """A curated graph: multipart ``file`` (and ``relations`` beside an entities CSV), with ``format``
    and ``source`` form fields (defaults: the file's suffix and name)."""
    kb = _kb(dataset_id)
    upload = request.files.get("file")
    if upload is None or not upload.filename:
        raise ApiError(ARGUMENT_ERROR, "send the curated graph as the multipart field `file`")
    name = upload.filename
    fmt = request.form.get("format") or {"graphml": "graphml", "xml": "graphml", "json": "json", "csv": "csv"}.get(
        name.rsplit(".", 1)[-1].lower())
    if fmt not in FORMATS:
        raise ApiError(ARGUMENT_ERROR, f"`format` must be one of {', '.join(FORMATS)} (the file's suffix does not say)")
    data = _read(upload)
    relations = request.files.get("relations")
    try:
        graph = parse_curated(data, fmt, _read(relations) if relations is not None else None, where=name)
    except CuratedFormatError as exc:
        raise ApiError(ARGUMENT_ERROR, str(exc)) from None
    source = request.form.get("source") or name
    who = _who(dict(request.form))
    return _run(lambda: services().engine(tenant()).import_graph(kb.name, graph, source, who=who))


@blueprint.delete("/datasets/<dataset_id>/knowledge_graph/import/<path:source>")
def remove_import(dataset_id: str, source: str) -> Response:
    kb = _kb(dataset_id)
    return _run(lambda: services().engine(tenant()).remove_import(kb.name, source, who=f"api:{tenant()}"))


def _read(upload: Any) -> bytes:
    data = upload.stream.read(MAX_IMPORT_BYTES + 1)
    if len(data) > MAX_IMPORT_BYTES:
        raise ApiError(ARGUMENT_ERROR, f"{upload.filename}: over {MAX_IMPORT_BYTES // (1024 * 1024)} MB")
    return data
