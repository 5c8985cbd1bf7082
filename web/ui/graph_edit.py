"""The graph view's edit panel: the JSON its script sends to correct the graph (rename, type and
description, merge with similar-named candidates, delete, add a relation), undo the last correction
(or any), list the knowledge base's corrections, and import a curated graph file. A correction that would fold two entities together
answers 409 with ``confirm`` true; the page asks, and sends it again with ``force``."""

from __future__ import annotations

from typing import Any

from flask import g, jsonify, request

from kbgraph.engine import KBGraphError
from kbgraph.engine.corrections import CorrectionConflict, correction_dict
from web.correction_ops import CorrectionRequestError, correction_call, curated_upload
from web.services import services
from web.ui.common import PageError, engine, json_body, page_blueprint
from web.ui.graph import _graph_kb

blueprint = page_blueprint("ui_graph_edit")


def _who() -> str:
    return g.user.email if g.get("user") is not None else "web"


@blueprint.get("/ui/api/kbs/<kb_id>/graph/corrections")
def corrections(kb_id: str) -> dict[str, Any]:
    kb = _graph_kb(kb_id)
    return {"corrections": [correction_dict(c) for c in reversed(engine().corrections(kb.name))]}


@blueprint.post("/ui/api/kbs/<kb_id>/graph/corrections")
def correct(kb_id: str) -> Any:
    kb = _graph_kb(kb_id)
    try:
        call = correction_call(engine(), kb.name, json_body(), _who())
        return call().to_dict()
    except CorrectionRequestError as exc:
        raise PageError(str(exc)) from None
    except CorrectionConflict as exc:
        return jsonify({"error": str(exc).replace(" (--force)", ""), "confirm": True}), 409


@blueprint.post("/ui/api/kbs/<kb_id>/graph/corrections/undo")
def undo(kb_id: str) -> dict[str, Any]:
    kb = _graph_kb(kb_id)
    number = (request.get_json(silent=True) or {}).get("id")
    if number is not None and (isinstance(number, bool) or not isinstance(number, int)):
        raise PageError("`id` must be a correction's number")
    return engine().undo_correction(kb.name, number, who=_who()).to_dict()


@blueprint.get("/ui/api/kbs/<kb_id>/graph/similar")
def similar(kb_id: str) -> dict[str, Any]:
    kb = _graph_kb(kb_id)
    try:
        found = engine().similar_entities(kb.name, request.args.get("name") or "")
    except KBGraphError as exc:
        raise PageError(str(exc), 404) from None
    return {"entities": [{"key": e.key, "name": e.name, "type": e.type, "mentions": e.mention_count} for e in found]}


@blueprint.post("/ui/api/kbs/<kb_id>/graph/import")
def import_graph(kb_id: str) -> dict[str, Any]:
    kb = _graph_kb(kb_id)
    try:
        graph, source = curated_upload(request.files, request.form, services().settings.max_file_bytes)
    except CorrectionRequestError as exc:
        raise PageError(str(exc)) from None
    return engine().import_graph(kb.name, graph, source, who=_who()).to_dict()
