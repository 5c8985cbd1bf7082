"""A knowledge base's graph settings and the graph built, rebuilt, dropped and refreshed.

Changing the settings says what that leaves to do (``GraphChange``): switching the graph off drops
it at once; switching it on, or changing what extraction does, leaves the extraction to
``build_graph`` (the stored graph stays, marked for a rebuild, until it runs); community or
resolution settings leave a refresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from kbgraph.config import Settings
from kbgraph.engine.core import EngineCore
from kbgraph.engine.errors import KBGraphError
from kbgraph.engine.files import IndexReport
from kbgraph.llm.base import CancelCheck
from kbgraph.meta.schemas import GraphConfig, KnowledgeBase
from kbgraph.utils.progress import Progress, ProgressFn, never, no_progress

if TYPE_CHECKING:
    from kbgraph.index.context import KBContext
    from kbgraph.index.refresh_state import RefreshResult

GraphAction = Literal["none", "build", "remove", "rebuild", "refresh"]
# the settings that decide what extraction wrote; changing one makes the stored mentions outdated
_EXTRACTION_SETTINGS = ("method", "entity_types", "max_gleanings")


@dataclass(frozen=True)
class GraphChange:
    """What a change of a knowledge base's graph settings did, and what is left to do.

    ``action``: "build" (graph switched on: extract the documents, ``Engine.build_graph``), "remove"
    (switched off: the graph is already gone), "rebuild" (extraction settings changed: the stored
    graph stays until ``Engine.build_graph(rebuild=True)``), "refresh" (community or resolution
    settings changed: ``Engine.refresh_graph``), "none". ``documents``: how many it concerns.
    """

    kb: KnowledgeBase
    before: GraphConfig
    action: GraphAction
    documents: int = 0

    def describe(self) -> str:
        name, n = self.kb.name, self.documents
        docs = f"{n} document{'s' if n != 1 else ''}"
        if self.action == "build":
            return f"graph switched on ({self.kb.graph.method}); {docs} to extract"
        if self.action == "remove":
            return f"graph switched off; the graph of {name!r} was removed (its chunks stay)"
        if self.action == "rebuild":
            changed = ", ".join(f for f in _EXTRACTION_SETTINGS
                                if getattr(self.before, f) != getattr(self.kb.graph, f))
            return (f"extraction settings changed ({changed}): the graph of {docs} will be extracted again "
                    f"with them by `kbgraph graph refresh --kb {name} --rebuild`; until then the graph stays as it was")
        if self.action == "refresh":
            return "community/resolution settings changed; the graph's communities and reports are recomputed"
        if self.before != self.kb.graph:
            return "graph settings saved; the graph is off, and they apply once it is switched on"
        return "graph settings unchanged"


# kept in KnowledgeBase.extra while the stored graph was extracted with settings since changed
_REBUILD_MARK = "graph_rebuild_pending"


def _without_rebuild_mark(extra: dict) -> dict:
    return {k: v for k, v in extra.items() if k != _REBUILD_MARK}


def check_graph_llm(settings: Settings, graph: GraphConfig, llm: dict[str, str]) -> None:
    """A graph method other than nlp needs a chat model, configured or the knowledge base's own (``llm``)."""
    if graph.enabled and graph.method != "nlp" and not settings.replace(**llm).llm_configured:
        raise KBGraphError(
            f"graph method {graph.method!r} needs a chat model: set KBGRAPH_LLM_BASE_URL and KBGRAPH_LLM_MODEL "
            "(and KBGRAPH_LLM_API_KEY), or use --graph nlp, which needs no LLM")


class GraphSettings(EngineCore):
    """The graph part of ``Engine``."""

    def set_graph(self, kb_name: str, graph: GraphConfig) -> GraphChange:
        """Store new graph settings for a knowledge base and say what that leaves to do.

        Switching the graph off removes it at once. Everything else that costs extraction or LLM
        calls is left to the caller (see GraphChange.action), which can show progress or queue it.
        """
        from kbgraph.index.delete import drop_graph

        kb = self.kb(kb_name)
        before = kb.graph
        from kbgraph.engine.providers import resolved_llm  # an extraction model of one of the tenant's providers

        check_graph_llm(self.settings, graph, resolved_llm(self.settings, self.meta, self.tenant, kb.extra.get("llm") or {}))
        if graph == before:
            return GraphChange(kb, before, "none")
        extracted = [d for d in self.meta.list_documents(kb.id, limit=None) if d.extracted]
        if not graph.enabled:
            with self.kb_lock(kb.id):
                if before.enabled or extracted:
                    drop_graph(self.context(kb))
                for doc in extracted:
                    self.meta.set_document_graph_state(doc.id, extracted=False)
                kb = self.meta.update_kb(self.tenant, kb.id, graph=graph, extra=_without_rebuild_mark(kb.extra))
            return GraphChange(kb, before, "remove" if before.enabled else "none", len(extracted))
        if not before.enabled:
            kb = self.meta.update_kb(self.tenant, kb.id, graph=graph)
            return GraphChange(kb, before, "build", self.meta.count_documents(kb.id, "done"))
        if any(getattr(before, f) != getattr(graph, f) for f in _EXTRACTION_SETTINGS):
            kb = self.meta.update_kb(self.tenant, kb.id, graph=graph, extra={**kb.extra, _REBUILD_MARK: True})
            return GraphChange(kb, before, "rebuild", len(extracted))
        kb = self.meta.update_kb(self.tenant, kb.id, graph=graph)
        return GraphChange(kb, before, "refresh", len(extracted))

    def build_graph(self, kb_name: str, *, rebuild: bool = False, progress: ProgressFn = no_progress,
                    cancel: CancelCheck = never) -> IndexReport:
        """Extract the graph of every indexed document that lacks one (all of them when ``rebuild``,
        with the current extraction settings), then refresh the knowledge base's graph."""
        from kbgraph.index.documents import DocumentInput
        from kbgraph.index.repair import refresh_recorded
        from kbgraph.index.run import IndexRun

        kb = self.kb(kb_name)
        if not kb.graph.enabled:
            raise KBGraphError(f"knowledge base {kb_name!r} has no knowledge graph; switch it on with "
                               f"`kbgraph kb set {kb_name} --graph nlp`")
        todo = [d for d in self.meta.list_documents(kb.id, limit=None)
                if d.status == "done" and (rebuild or not d.extracted)]
        report = IndexReport(ledger=self.ledger)
        # the same bounded pipeline as indexing: the chunks of many documents extracted at once,
        # merged together; summaries wait for the refresh's summary pass
        run = IndexRun(self.context(kb), self.meta, kb, self.kb_lock, progress=progress, cancel=cancel)
        report.documents = run.run((DocumentInput.parsed(d) for d in todo), total=len(todo))
        progress(Progress("documents", len(todo), len(todo)))
        if report.count("cancelled"):
            return report
        with self.kb_lock(kb.id):
            _rederive_curated(self.context(kb))  # kept while the graph was off or dropped for a rebuild
            report.refresh = refresh_recorded(self.context(kb), self.meta, kb, progress=progress, cancel=cancel)
            kb = self.meta.get_kb(self.tenant, kb.id)  # without the repair mark the refresh cleared
            if rebuild and _REBUILD_MARK in kb.extra:
                self.meta.update_kb(self.tenant, kb.id, extra=_without_rebuild_mark(kb.extra))
        return report

    def clear_graph_for_rebuild(self, kb_name: str) -> KnowledgeBase:
        """Drop the stored graph and mark every document unextracted, so that a whole-KB build (the
        worker's, which extracts the documents not in the graph) extracts them all again with the
        current settings; for callers that queue the build instead of calling ``build_graph``."""
        from kbgraph.index.delete import drop_graph

        kb = self.kb(kb_name)
        with self.kb_lock(kb.id):
            drop_graph(self.context(kb))
            _rederive_curated(self.context(kb))
            for doc in self.meta.list_documents(kb.id, limit=None):
                if doc.extracted or doc.graph_version:
                    self.meta.set_document_graph_state(doc.id, extracted=False, graph_version=0)
            return self.meta.update_kb(self.tenant, kb.id, extra=_without_rebuild_mark(kb.extra))

    def graph_needs_rebuild(self, kb: KnowledgeBase) -> bool:
        """Whether the extraction settings changed since the stored graph was extracted."""
        return bool(kb.extra.get(_REBUILD_MARK))

    def refresh_graph(self, kb_name: str, *, force: bool = False,
                      progress: ProgressFn = no_progress) -> RefreshResult:
        from kbgraph.index.repair import refresh_recorded

        kb = self.kb(kb_name)
        if not kb.graph.enabled:
            raise KBGraphError(f"knowledge base {kb_name!r} has no knowledge graph; switch it on with "
                               f"`kbgraph kb set {kb_name} --graph nlp`")
        with self.kb_lock(kb.id):
            return refresh_recorded(self.context(kb), self.meta, kb, force=force, progress=progress)


def _rederive_curated(ctx: KBContext) -> None:
    """The rows of the curated mentions a dropped graph kept (kbgraph.index.curated)."""
    from kbgraph.index.curated import live_sources, rederive_curated

    sources = live_sources(ctx)
    if sources:
        rederive_curated(ctx, sources)
