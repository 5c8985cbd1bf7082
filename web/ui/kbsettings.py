"""Changing a knowledge base's settings from its settings page, and what each change sets off.

Switching the graph on builds it for the documents already parsed (a Celery task with progress);
switching it off removes every graph row; a new extraction method or entity types make the
existing mentions stale, so the graph is rebuilt; resolution or communities only need the KB's
graph phases refreshed; a new chunk size applies to documents parsed from then on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbgraph.meta import GraphConfig, KnowledgeBase, graph_config
from kbgraph.store.base import any_of
from task_executor.submit import enqueue_graph
from task_executor.tasks import schedule_refresh
from web.datasets import GRAPH_KINDS
from web.services import Services


@dataclass
class SettingsChange:
    kb: KnowledgeBase
    notes: list[str] = field(default_factory=list)


def plan_graph_change(before: GraphConfig, after: GraphConfig) -> list[str]:
    """What saving ``after`` over ``before`` will rebuild, in the words the page shows."""
    if before.enabled and not after.enabled:
        return ["The knowledge graph will be removed (entities, relations, communities and reports)."]
    if after.enabled and not before.enabled:
        return ["The knowledge graph will be built for every parsed document; progress shows on the documents page."]
    if not after.enabled:
        return []
    if (before.method, before.entity_types, before.max_gleanings) != (after.method, after.entity_types,
                                                                       after.max_gleanings):
        return ["Extraction settings changed: the whole graph will be extracted again from every document."]
    notes = []
    if before.resolution != after.resolution:
        notes.append("Entity resolution " + ("on" if after.resolution else "off")
                     + ": the graph's phases (PageRank, resolution, communities) will be refreshed.")
    if before.community != after.community:
        notes.append("Communities " + ("on: communities and their reports will be computed."
                                       if after.community else "off: communities and reports will be dropped at the next refresh."))
    return notes


def drop_graph(svc: Services, kb: KnowledgeBase) -> None:
    """Remove every graph row of the KB (mentions too) and mark its documents unextracted."""
    engine = svc.engine(kb.tenant_id)
    with engine.kb_lock(kb.id):
        engine.store.delete(kb.tenant_id, [kb.id], [any_of("knowledge_graph_kwd", GRAPH_KINDS)])
        engine.store.refresh(kb.tenant_id)
        for doc in svc.meta.list_documents(kb.id, limit=None):
            if doc.extracted or doc.graph_version:
                svc.meta.set_document_graph_state(doc.id, extracted=False, graph_version=0)


def build_graph(svc: Services, kb: KnowledgeBase) -> KnowledgeBase:
    task = enqueue_graph(svc.settings, kb.tenant_id, kb.id, meta=svc.meta, app=svc.celery)
    return svc.meta.update_kb(kb.tenant_id, kb.id, extra={**kb.extra, "graphrag_task_id": task.id})


def apply_settings(svc: Services, kb: KnowledgeBase, *, chunk_tokens: int, graph: GraphConfig) -> SettingsChange:
    graph = graph_config(graph)
    notes = plan_graph_change(kb.graph, graph)
    overlap = min(kb.chunk_overlap, max(chunk_tokens // 8, 0))
    if chunk_tokens != kb.chunk_tokens:
        notes.append(f"Chunk size {kb.chunk_tokens} → {chunk_tokens} tokens: applies to documents parsed from now "
                     "on; re-parse a document to re-chunk it.")
    updated = svc.meta.update_kb(kb.tenant_id, kb.id, chunk_tokens=chunk_tokens, chunk_overlap=overlap, graph=graph)
    before = kb.graph
    has_docs = svc.meta.count_documents(kb.id, status="done") > 0
    if before.enabled and not graph.enabled:
        drop_graph(svc, updated)
    elif graph.enabled and not before.enabled:
        if has_docs:
            updated = build_graph(svc, updated)
    elif graph.enabled and (before.method, before.entity_types, before.max_gleanings) != (
            graph.method, graph.entity_types, graph.max_gleanings):
        drop_graph(svc, updated)
        if has_docs:
            updated = build_graph(svc, updated)
    elif graph.enabled and (before.resolution, before.community) != (graph.resolution, graph.community):
        schedule_refresh(svc.celery, kb.tenant_id, kb.id)
    return SettingsChange(updated, notes)
