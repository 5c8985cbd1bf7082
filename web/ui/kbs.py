"""Knowledge bases: the list, create, delete (after a confirmation), and the settings page with
the knowledge-graph switch."""

from __future__ import annotations

from typing import Any

from flask import Response, flash, redirect, render_template, request, url_for

from kbgraph.engine import KBGraphError
from kbgraph.meta import DEFAULT_ENTITY_TYPES, AlreadyExists, GraphConfig, KnowledgeBase, MetaError, graph_config
from kbgraph.store.base import eq
from kbgraph.store.records import Entity
from web.services import services
from web.ui.common import PageError, engine, form_int, own_kb, page_blueprint, tenant
from web.ui.kbsettings import apply_settings, plan_graph_change
from web.ui.providers import chat_model_choices, embedding_model_choices

blueprint = page_blueprint("ui_kb")
METHODS = {"nlp": "nlp: no LLM, fast (noun phrases and co-occurrence)",
           "light": "light: LLM extraction, one pass (LightRAG style)",
           "general": "general: LLM extraction with gleaning (GraphRAG style)"}


def _graph_from_form(current: GraphConfig | None = None) -> GraphConfig:
    form = request.form
    types = [t.strip() for t in (form.get("entity_types") or "").replace("\n", ",").split(",") if t.strip()]
    values: dict[str, Any] = {
        "enabled": form.get("graph") == "on",
        "method": form.get("method") or "nlp",
        "entity_types": types or list(DEFAULT_ENTITY_TYPES),
        "resolution": form.get("resolution") == "on",
        "community": form.get("community") == "on",
    }
    if current is not None:
        values["max_gleanings"] = current.max_gleanings
    if values["method"] not in METHODS:
        raise PageError(f"unknown extraction method {values['method']!r}")
    try:
        config = graph_config(values)
    except MetaError as exc:
        raise PageError(str(exc)) from None
    if config.enabled and config.method != "nlp" and not services().settings.llm_configured \
            and not request.form.get("extraction_model"):  # a provider's model extracts instead
        raise PageError(f"The {config.method!r} method extracts with an LLM, and this server has none configured "
                        "(KBGRAPH_LLM_BASE_URL, KBGRAPH_LLM_MODEL). Choose 'nlp', which needs no LLM.")
    return config


def _summary(kb: KnowledgeBase) -> dict[str, Any]:
    svc = services()
    counts = svc.meta.kb_counts(kb.id)
    entities = svc.engine(tenant()).store.count(tenant(), [kb.id], [eq("knowledge_graph_kwd", Entity.KIND)]) \
        if kb.graph.enabled else 0
    return {"kb": kb, "documents": counts.documents, "chunks": counts.chunks, "entities": entities}


@blueprint.get("/kbs")
def list_kbs() -> str:
    kbs = [_summary(kb) for kb in engine().list_kbs()]
    return render_template("kbs.html", kbs=kbs, methods=METHODS, default_types=", ".join(DEFAULT_ENTITY_TYPES),
                           chunk_tokens=services().settings.chunk_tokens, embedding_models=embedding_model_choices(),
                           embedding_model=engine().embedder.model_name)


@blueprint.post("/kbs")
def create_kb() -> Response:
    name = (request.form.get("name") or "").strip()
    if not name:
        raise PageError("Give the knowledge base a name.")
    chunk_tokens = form_int("chunk_tokens", services().settings.chunk_tokens, 16, 8192)
    graph = _graph_from_form()
    try:
        kb = engine().create_kb(name, graph=graph, description=(request.form.get("description") or "").strip(),
                                chunk_tokens=chunk_tokens, chunk_overlap=min(services().settings.chunk_overlap,
                                                                             chunk_tokens // 8),
                                embedding_model=(request.form.get("embedding_model") or "").strip())
    except AlreadyExists:
        raise PageError(f"You have a knowledge base named {name!r} already; choose another name.", 409) from None
    flash(f"Knowledge base {kb.name!r} created. Upload documents to it.")
    return redirect(url_for("ui_docs.documents_page", kb_id=kb.id))


@blueprint.get("/kbs/<kb_id>/delete")
def confirm_delete(kb_id: str) -> str:
    return render_template("kb_delete.html", **_summary(own_kb(kb_id)))


@blueprint.post("/kbs/<kb_id>/delete")
def delete_kb(kb_id: str) -> Response:
    kb = own_kb(kb_id)
    if (request.form.get("confirm_name") or "").strip() != kb.name:
        raise PageError("Type the knowledge base's name exactly to confirm the deletion.")
    svc = services()
    for doc in svc.meta.list_documents(kb.id, limit=None):
        svc.meta.request_cancel_document(kb.id, doc.id)
    engine().delete_kb(kb.name)
    svc.delete_kb_files(kb.id)
    flash(f"Knowledge base {kb.name!r} deleted with its documents and graph.")
    return redirect(url_for("ui_kb.list_kbs"))


@blueprint.get("/kbs/<kb_id>/settings")
def settings_page(kb_id: str) -> str:
    kb = own_kb(kb_id)
    svc = services()
    return render_template("kb_settings.html", **_summary(kb), methods=METHODS, models=chat_model_choices(),
                           extraction_model=(kb.extra.get("llm") or {}).get("llm_model", ""),
                           embedding_models=embedding_model_choices(),
                           embedding_model=svc.engine(tenant()).embedder.model_name,
                           llm_configured=svc.settings.llm_configured)


@blueprint.post("/kbs/<kb_id>/settings/preview")
def preview_settings(kb_id: str) -> dict[str, Any]:
    """What saving the form as it stands would rebuild (the settings page asks before saving)."""
    kb = own_kb(kb_id)
    notes = plan_graph_change(kb.graph, _graph_from_form(kb.graph))
    chunk_tokens = form_int("chunk_tokens", kb.chunk_tokens, 16, 8192)
    if chunk_tokens != kb.chunk_tokens:
        notes.append("The new chunk size applies to documents parsed from now on.")
    embedding = _embedding_from_form(kb)
    if embedding is not None:
        notes.append(f"Documents will be embedded with {embedding}.")
    return {"notes": notes}


def _embedding_from_form(kb: KnowledgeBase) -> str | None:
    """The embedding model the form picks when it differs from the knowledge base's (None when it
    is the same or the form has none: the field is disabled while there are chunks)."""
    sent = (request.form.get("embedding_model") or "").strip() if "embedding_model" in request.form else None
    if sent is None or sent == kb.embedding_model:  # unchanged, even if its provider is gone meanwhile
        return None
    try:
        chosen = engine().embedding_choice(sent)
    except KBGraphError as exc:
        raise PageError(str(exc)) from None
    return chosen if chosen != kb.embedding_model else None


def _save_embedding_model(kb: KnowledgeBase) -> KnowledgeBase:
    """The form's embedding model, kept while the knowledge base has chunks (their vectors are of its
    model) or a document is being parsed (it would write vectors of the old one), as RAGFlow does."""
    chosen = _embedding_from_form(kb)
    if chosen is None:
        return kb
    svc = services()
    chunks = svc.meta.kb_counts(kb.id).chunks
    if chunks:
        raise PageError(f"The embedding model stays {kb.embedding_model} while the knowledge base has chunks "
                        f"({chunks}); delete its documents first to change it.", 409)
    if svc.meta.count_documents(kb.id, status="running"):
        raise PageError("The embedding model cannot change while documents are being parsed with the current one.",
                        409)
    return svc.meta.update_kb(tenant(), kb.id, embedding_model=chosen)


def _save_extraction_model(kb: KnowledgeBase) -> KnowledgeBase:
    """The form's extraction model: "" (the server's) or a ``model@provider`` of the tenant's; it
    applies to extraction from then on (the graph already built stays)."""
    if "extraction_model" not in request.form:
        return kb
    chosen = (request.form.get("extraction_model") or "").strip()
    llm = dict(kb.extra.get("llm") or {})
    if chosen == llm.get("llm_model", ""):
        return kb
    if chosen and chosen not in chat_model_choices():
        raise PageError(f"No provider of yours offers the model {chosen!r}; add it on the settings page.")
    if chosen:
        llm["llm_model"] = chosen
    else:
        llm.pop("llm_model", None)
    extra = {k: v for k, v in kb.extra.items() if k != "llm"} | ({"llm": llm} if llm else {})
    return services().meta.update_kb(tenant(), kb.id, extra=extra)


@blueprint.post("/kbs/<kb_id>/settings")
def save_settings(kb_id: str) -> Response:
    kb = own_kb(kb_id)
    chunk_tokens = form_int("chunk_tokens", kb.chunk_tokens, 16, 8192)
    graph = _graph_from_form(kb.graph)
    description = (request.form.get("description") or "").strip()
    svc = services()
    if description != kb.description:
        kb = svc.meta.update_kb(tenant(), kb.id, description=description)
    kb = _save_embedding_model(kb)
    kb = _save_extraction_model(kb)
    change = apply_settings(svc, kb, chunk_tokens=chunk_tokens, graph=graph)
    flash("Saved. " + " ".join(change.notes) if change.notes else "Settings saved.")
    return redirect(url_for("ui_kb.settings_page", kb_id=kb.id))
