"""Changing a knowledge base's settings from its settings page, and what each change sets off.

The engine's ``set_graph`` stores the graph settings and says what is left to do; the page queues
that work on the workers so it shows progress: switched on, the graph is built for the documents
already parsed; new extraction settings (method, entity types) drop the graph and build it again;
resolution or communities only need the KB's graph phases refreshed; switched off, the engine has
removed the graph already. A new chunk size applies to documents parsed from then on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbgraph.meta import GraphConfig, KnowledgeBase
from task_executor.submit import enqueue_graph
from task_executor.tasks import schedule_refresh
from web.services import Services

_EXTRACTION = ("method", "entity_types", "max_gleanings")


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
    if any(getattr(before, f) != getattr(after, f) for f in _EXTRACTION):
        return ["Extraction settings changed: the whole graph will be extracted again from every document."]
    notes = []
    if before.resolution != after.resolution:
        notes.append("Entity resolution " + ("on" if after.resolution else "off")
                     + ": the graph's phases (PageRank, resolution, communities) will be refreshed.")
    if before.community != after.community:
        notes.append("Communities " + ("on: communities and their reports will be computed."
                                       if after.community else "off: communities and reports will be dropped at the next refresh."))
    return notes


def queue_graph_build(svc: Services, kb: KnowledgeBase) -> KnowledgeBase:
    task = enqueue_graph(svc.settings, kb.tenant_id, kb.id, meta=svc.meta, app=svc.celery)
    return svc.meta.update_kb(kb.tenant_id, kb.id, extra={**kb.extra, "graphrag_task_id": task.id})


def apply_settings(svc: Services, kb: KnowledgeBase, *, chunk_tokens: int, graph: GraphConfig) -> SettingsChange:
    notes = plan_graph_change(kb.graph, graph)
    if chunk_tokens != kb.chunk_tokens:
        notes.append(f"Chunk size {kb.chunk_tokens} → {chunk_tokens} tokens: applies to documents parsed from now "
                     "on; re-parse a document to re-chunk it.")
        kb = svc.meta.update_kb(kb.tenant_id, kb.id, chunk_tokens=chunk_tokens,
                                chunk_overlap=min(kb.chunk_overlap, chunk_tokens // 8))
    engine = svc.engine(kb.tenant_id)
    change = engine.set_graph(kb.name, graph)
    updated = change.kb
    parsed = svc.meta.count_documents(kb.id, status="done") > 0
    if change.action == "build" and parsed:
        updated = queue_graph_build(svc, updated)
    elif change.action == "rebuild":
        updated = engine.clear_graph_for_rebuild(updated.name)
        if parsed:
            updated = queue_graph_build(svc, updated)
    elif change.action == "refresh":
        schedule_refresh(svc.celery, kb.tenant_id, kb.id)
    return SettingsChange(updated, notes)
