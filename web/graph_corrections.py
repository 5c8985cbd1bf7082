"""Corrections of a dataset's knowledge graph, beside RAGFlow's knowledge-graph routes (docs/api.md):
list, make and undo corrections, merge candidates, curated imports in and out. Another tenant's
dataset gets RAGFlow's knowledge-graph answer ("No authorization."); a correction that would fold two
entities together is refused with ``data.confirm`` true until it is sent again with ``"force": true``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Response, request

from kbgraph.engine import KBGraphError
from kbgraph.engine.corrections import CorrectionConflict, CorrectionOutcome, correction_dict
from kbgraph.meta import KnowledgeBase
from web.api import blueprint, own_kb, tenant
from web.correction_ops import CorrectionRequestError, correction_call, curated_upload
from web.envelope import ARGUMENT_ERROR, AUTHENTICATION_ERROR, DATA_ERROR, ApiError, json_body, ok
from web.services import services


def _kb(dataset_id: str) -> KnowledgeBase:
    return own_kb(dataset_id, "No authorization.", AUTHENTICATION_ERROR)


def _who(body: dict[str, Any]) -> str:
    who = body.get("who")
    return f"{who} (api:{tenant()})" if isinstance(who, str) and who.strip() else f"api:{tenant()}"


def _run(call: Callable[[], CorrectionOutcome]) -> Response:
    try:
        return ok(call().to_dict())
    except CorrectionConflict as exc:
        raise ApiError(DATA_ERROR, str(exc).replace(" (--force)", ' ("force": true)'), data={"confirm": True},
                       with_data=True) from None
    except KBGraphError as exc:
        raise ApiError(DATA_ERROR, str(exc)) from None


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
    try:
        call = correction_call(services().engine(tenant()), kb.name, body, _who(body))
    except CorrectionRequestError as exc:
        raise ApiError(ARGUMENT_ERROR, str(exc)) from None
    return _run(call)


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
    try:
        graph, source = curated_upload(request.files, request.form, services().settings.max_file_bytes)
    except CorrectionRequestError as exc:
        raise ApiError(ARGUMENT_ERROR, str(exc)) from None
    who = _who(dict(request.form))
    return _run(lambda: services().engine(tenant()).import_graph(kb.name, graph, source, who=who))


@blueprint.delete("/datasets/<dataset_id>/knowledge_graph/import/<path:source>")
def remove_import(dataset_id: str, source: str) -> Response:
    kb = _kb(dataset_id)
    return _run(lambda: services().engine(tenant()).remove_import(kb.name, source, who=f"api:{tenant()}"))
