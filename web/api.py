"""The RAGFlow-compatible REST blueprint (/api/v1): Bearer API-key auth and shared lookups.

Routes live in web.datasets, web.graph_corrections, web.documents, web.document_update, web.chunks,
web.retrieval, web.chats, web.sessions, web.openai_compat and web.unavailable, which add them to this ``blueprint``; the app
factory (``web.app``) imports them all and registers it. This module imports none of them.
"""

from __future__ import annotations

from flask import Blueprint, Response, g, jsonify, request

from kbgraph.meta import KnowledgeBase, NotFound
from web.envelope import AUTHENTICATION_ERROR, DATA_ERROR, ApiError
from web.services import services

blueprint = Blueprint("ragflow_api", __name__, url_prefix="/api/v1")


def authenticate() -> Response | None:
    """Every /api/v1 request, routed or not: RAGFlow answers auth problems before anything else."""
    if request.path != "/api/v1" and not request.path.startswith("/api/v1/"):
        return None
    header = request.headers.get("Authorization")
    if not header:
        # RAGFlow answers these two with code 0; its clients and tests expect exactly this
        return jsonify({"code": 0, "message": "`Authorization` can't be empty", "data": False})
    parts = header.split()
    if len(parts) < 2:
        return jsonify({"code": 0, "message": "Please check your authorization format.", "data": False})
    if parts[0].lower() != "bearer" or len(parts) != 2:
        return jsonify({"code": AUTHENTICATION_ERROR, "data": False,
                        "message": "Authentication error: send the API key as `Authorization: Bearer <key>`"})
    tenant = services().meta.tenant_for_api_key(parts[1])
    if tenant is None:
        return jsonify({"code": AUTHENTICATION_ERROR, "message": "Authentication error: API key is invalid!",
                        "data": False})
    g.tenant = tenant
    return None


def tenant() -> str:
    return str(g.tenant)


def own_kb(dataset_id: str, message: str | None = None, code: int = DATA_ERROR) -> KnowledgeBase:
    """The caller's dataset, else ApiError(code, message); another tenant's id is simply unknown."""
    try:
        return services().meta.get_kb(tenant(), dataset_id)
    except NotFound:
        raise ApiError(code, message if message is not None else f"You don't own the dataset {dataset_id}.") from None


def id_list(body: dict, key: str) -> list[str] | None:
    """A list of string ids from the body (None when absent or null)."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ApiError(DATA_ERROR, f"`{key}` should be a list of strings")
    return value


def dedupe(ids: list[str]) -> tuple[list[str], list[str]]:
    """(unique ids in order, ids given more than once)."""
    seen: dict[str, int] = {}
    for i in ids:
        seen[i] = seen.get(i, 0) + 1
    return list(seen), [i for i, n in seen.items() if n > 1]
