"""A knowledge base's documents: listed, found by name or id, deleted (exactly their part of the
graph with them), reset to be parsed again, disabled and renamed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbgraph.engine.core import EngineCore
from kbgraph.engine.errors import KBGraphError, did_you_mean
from kbgraph.meta.schemas import Document, KnowledgeBase

if TYPE_CHECKING:
    from kbgraph.graph.derive.recompute import DeriveResult


class Documents(EngineCore):
    """The documents part of ``Engine``."""

    def list_documents(self, kb_name: str) -> list[Document]:
        return self.meta.list_documents(self.kb(kb_name).id, limit=None)

    def document(self, kb: KnowledgeBase, name_or_id: str) -> Document:
        doc = self.meta.find_document(kb.id, name_or_id)
        if doc is None:
            names = [d.name for d in self.meta.list_documents(kb.id, limit=None)]
            raise KBGraphError(f"no document {name_or_id!r} in knowledge base {kb.name!r}{did_you_mean(name_or_id, names)}")
        return doc

    def delete_document(self, kb_name: str, name_or_id: str, *, refresh: bool = True) -> DeriveResult:
        from kbgraph.index.delete import delete_document
        from kbgraph.index.repair import changing_rows, refresh_recorded

        kb = self.kb(kb_name)
        doc = self.document(kb, name_or_id)
        ctx = self.context(kb)
        with self.kb_lock(kb.id):
            with changing_rows(self.meta, kb, "a document's deletion"):
                change = delete_document(ctx, doc.id)
            self.meta.delete_document(kb.id, doc.id)
            if refresh and kb.graph.enabled and change.changed:
                refresh_recorded(ctx, self.meta, kb)
        return change

    def reset_document(self, kb: KnowledgeBase, doc: Document,
                       reason: str = "") -> tuple[Document, DeriveResult]:
        """Drop a document's chunks and exactly its part of the graph; it waits to be parsed again."""
        from kbgraph.index.delete import delete_document
        from kbgraph.index.repair import changing_rows

        with self.kb_lock(kb.id):
            with changing_rows(self.meta, kb, "a document's reset"):
                change = delete_document(self.context(kb), doc.id)
            return self.meta.reset_document(kb.id, doc.id, reason), change

    def set_document_enabled(self, kb: KnowledgeBase, doc: Document, enabled: bool) -> Document:
        """A disabled document stays listed but its chunks leave retrieval."""
        from kbgraph.index.chunk_edit import set_document_availability

        set_document_availability(self.context(kb), doc.id, enabled)
        return self.meta.update_document(kb.id, doc.id, enabled=enabled)

    def rename_document(self, kb: KnowledgeBase, doc: Document, name: str) -> Document:
        from kbgraph.index.chunk_edit import rename_document_chunks

        renamed = self.meta.update_document(kb.id, doc.id, name=name)
        rename_document_chunks(self.context(kb), doc.id, renamed.name)
        return renamed
