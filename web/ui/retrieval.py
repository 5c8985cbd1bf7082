"""The retrieval test page: a question against one knowledge base in any mode, with every score
shown (term, vector, graph), the knowledge-graph part and the source chunks, question words marked.

A plain GET form: the results are a page of their own (bookmarkable, no script needed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import render_template, request
from markupsafe import Markup

from kbgraph.graph.extract.nlp.extractor import NLPExtractor
from kbgraph.llm.base import LLMError
from kbgraph.search.retrieve import MODES, RetrievalResult, retrieve
from web.highlight import mark
from web.services import services
from web.ui.common import PageError, engine, own_kb, page_blueprint, tenant

blueprint = page_blueprint("ui_search")
MODE_NOTES = {
    "naive": "hybrid chunk search: BM25 + vectors",
    "kg": "entities and relations the question is about, their neighbours, reports and source chunks",
    "ppr": "Personalized PageRank from the question's entities (multi-hop)",
    "global": "map-reduce over community reports (needs an LLM)",
    "mix": "naive chunks fused with the kg context",
}


@dataclass(frozen=True)
class RetrievalForm:
    question: str
    mode: str
    similarity_threshold: float
    vector_similarity_weight: float
    top_n: int
    top_k: int


def _number(name: str, default: float, low: float, high: float, *, integer: bool = False) -> Any:
    raw = (request.args.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise PageError(f"{name.replace('_', ' ')} must be a number, not {raw!r}") from None
    if not low <= value <= high:
        raise PageError(f"{name.replace('_', ' ')} must lie between {low} and {high}, not {value}")
    return value


def _form(default_mode: str) -> RetrievalForm:
    settings = services().settings
    mode = request.args.get("mode") or default_mode
    if mode not in MODES:
        raise PageError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    return RetrievalForm(
        question=(request.args.get("question") or "").strip()[:2000], mode=mode,
        similarity_threshold=_number("similarity_threshold", settings.similarity_threshold, 0.0, 1.0),
        vector_similarity_weight=_number("vector_similarity_weight", settings.hybrid_vector_weight, 0.0, 1.0),
        top_n=_number("top_n", settings.top_n, 1, 100, integer=True),
        top_k=_number("top_k", settings.top_k, 1, 10_000, integer=True))


def highlight(text: str, question: str) -> Markup:
    """``text`` escaped, with the question's words (whole words) wrapped in <mark>."""
    return mark(text, question)


def run_retrieval(form: RetrievalForm, kb_id: str) -> RetrievalResult:
    kb = own_kb(kb_id)
    eng = engine()
    if form.mode != "naive" and not kb.graph.enabled:
        raise PageError(f"Mode {form.mode!r} needs the knowledge graph, which is off for this knowledge base: "
                        "choose naive, or switch the graph on in its settings.")
    if form.mode == "global" and eng.chat_for(kb) is None:
        raise PageError("Mode 'global' summarizes community reports with an LLM, and none is configured.")
    eng.context(kb)  # the embedding model must match the one the KB was indexed with
    settings = services().settings.replace(similarity_threshold=form.similarity_threshold,
                                           vector_similarity_weight=form.vector_similarity_weight, top_k=form.top_k)
    types = list(kb.graph.entity_types)
    try:
        return retrieve(eng.store, tenant(), [kb.id], form.question, form.mode, embedder=eng.embedder_for(kb),
                        chat=eng.chat_for(kb), settings=settings, top_n=form.top_n,
                        extractor=NLPExtractor(entity_types=types), entity_types=types)
    except LLMError as exc:
        raise PageError(f"The LLM call failed: {exc}") from None


@blueprint.get("/kbs/<kb_id>/retrieval")
def retrieval_page(kb_id: str) -> str:
    kb = own_kb(kb_id)
    form = _form("kg" if kb.graph.enabled else "naive")
    result, error = None, None
    if form.question:
        try:
            result = run_retrieval(form, kb.id)
        except PageError as exc:
            error = str(exc)
    return render_template("retrieval.html", kb=kb, form=form, result=result, error=error, modes=MODES,
                           mode_notes=MODE_NOTES, highlight=highlight)
