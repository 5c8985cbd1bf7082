"""The interactive graph view: the page, and the JSON its script reads (a PageRank sample of the
graph, entity details, neighbours on demand, suggestions, community reports) and the exports."""

from __future__ import annotations

import threading
from typing import Any

from flask import Response, render_template, request

from kbgraph.graph import view
from kbgraph.graph.inspect import export_graph
from kbgraph.meta import KnowledgeBase
from web.services import services
from web.ui.common import PageError, assets_built, engine, own_kb, page_blueprint, tenant

blueprint = page_blueprint("ui_graph")
MAX_SAMPLE = 5000
_FACETS: dict[tuple[str, str, int], tuple[list[tuple[str, int]], list[view.CommunityInfo]]] = {}
_FACETS_GUARD = threading.Lock()


def _graph_kb(kb_id: str) -> KnowledgeBase:
    kb = own_kb(kb_id)
    if not kb.graph.enabled:
        raise PageError("The knowledge graph is off for this knowledge base; switch it on in its settings.")
    return kb


def _float_arg(name: str, default: float) -> float:
    try:
        return float(request.args.get(name) or default)
    except ValueError:
        raise PageError(f"{name} must be a number") from None


@blueprint.get("/kbs/<kb_id>/graph")
def graph_page(kb_id: str) -> str:
    kb = own_kb(kb_id)
    return render_template("graph.html", kb=kb, assets=assets_built())


@blueprint.get("/ui/api/kbs/<kb_id>/graph")
def graph_sample(kb_id: str) -> dict[str, Any]:
    kb = _graph_kb(kb_id)
    try:
        limit = min(max(int(request.args.get("limit") or 300), 1), MAX_SAMPLE)
    except ValueError:
        raise PageError("limit must be a whole number") from None
    types = [t for t in request.args.getlist("type") if t]
    include = [k for k in request.args.getlist("include") if k][:MAX_SAMPLE]
    store = engine().store
    sample = view.sample_graph(store, tenant(), kb.id, limit=limit, types=types,
                               community=request.args.get("community") or "", min_weight=_float_arg("min_weight", 0.0),
                               include=include, facets=False)
    if request.args.get("facets", "1") != "0":
        sample.types, sample.communities = _facets(kb.id, sample.version)
    return sample.to_dict()


def _facets(kb_id: str, version: int) -> tuple[list[tuple[str, int]], list[view.CommunityInfo]]:
    """Types and communities change only with the graph's version: counted once per version (an
    aggregation over every entity costs ~0.4 s at 100k entities)."""
    key = (tenant(), kb_id, version)
    with _FACETS_GUARD:
        found = _FACETS.get(key)
    if found is None:
        found = view.graph_facets(engine().store, tenant(), kb_id)
        with _FACETS_GUARD:
            _FACETS[key] = found
            while len(_FACETS) > 64:
                _FACETS.pop(next(iter(_FACETS)))
    return found


@blueprint.get("/ui/api/kbs/<kb_id>/graph/suggest")
def graph_suggest(kb_id: str) -> dict[str, Any]:
    kb = _graph_kb(kb_id)
    text = (request.args.get("q") or "").strip()[:200]
    return {"entities": [n.__dict__ for n in view.suggest(engine().store, tenant(), kb.id, text)]}


@blueprint.get("/ui/api/kbs/<kb_id>/graph/entity")
def graph_entity(kb_id: str) -> dict[str, Any]:
    kb = _graph_kb(kb_id)
    names = {d.id: d.name for d in services().meta.list_documents(kb.id, limit=None)}
    names.update(engine().curated_names(kb.name))  # curated sources (kbgraph graph import) as their documents
    detail = view.entity_detail(engine().store, tenant(), kb.id, request.args.get("key") or "", names)
    if detail is None:
        raise PageError("That entity is no longer in the graph.", 404)
    return detail.to_dict()


@blueprint.get("/ui/api/kbs/<kb_id>/graph/neighbours")
def graph_neighbours(kb_id: str) -> dict[str, Any]:
    kb = _graph_kb(kb_id)
    nodes, edges = view.neighbourhood(engine().store, tenant(), kb.id, request.args.get("key") or "",
                                      min_weight=_float_arg("min_weight", 0.0))
    return {"nodes": [n.__dict__ for n in nodes], "edges": [e.__dict__ for e in edges]}


@blueprint.get("/ui/api/kbs/<kb_id>/graph/community")
def graph_community(kb_id: str) -> dict[str, Any]:
    kb = _graph_kb(kb_id)
    label = request.args.get("label") or ""
    return {"reports": [r.__dict__ for r in view.community_reports(engine().store, tenant(), kb.id, [label])]}


@blueprint.get("/kbs/<kb_id>/graph/export.<fmt>")
def graph_export(kb_id: str, fmt: str) -> Response:
    kb = _graph_kb(kb_id)
    if fmt not in ("graphml", "json"):
        raise PageError("export as graphml or json (PNG is saved by the page itself)", 404)
    data = export_graph(engine().store, tenant(), kb.id, fmt)
    mimetype = "application/graphml+xml" if fmt == "graphml" else "application/json"
    return Response(data, mimetype=mimetype,
                    headers={"Content-Disposition": f'attachment; filename="{_file_stem(kb.name)}-graph.{fmt}"'})


def _file_stem(name: str) -> str:
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in name) or "graph"
