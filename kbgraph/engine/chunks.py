"""A document's chunks listed and edited by hand (kbgraph.index.chunk_edit), with the document's
counts kept and the knowledge base's lock held while the graph changes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kbgraph.engine.core import EngineCore
from kbgraph.meta.schemas import Document, KnowledgeBase

if TYPE_CHECKING:
    from kbgraph.index.chunk_edit import ChunkChange, ChunkPage, ChunkRecord


class Chunks(EngineCore):
    """The chunks part of ``Engine``."""

    def chunk_page(self, kb: KnowledgeBase, doc_id: str, *, keywords: str = "", offset: int = 0,
                   limit: int | None = 30) -> "ChunkPage":
        from kbgraph.index.chunk_edit import list_chunks

        return list_chunks(self.context(kb), doc_id, keywords=keywords, offset=offset, limit=limit)

    def get_chunk(self, kb: KnowledgeBase, chunk_id: str) -> "ChunkRecord | None":
        from kbgraph.index.chunk_edit import get_chunk

        return get_chunk(self.context(kb), chunk_id)

    def find_chunk(self, chunk_id: str) -> "ChunkRecord | None":
        """The tenant's chunk with this id, in whichever of its knowledge bases it is."""
        from kbgraph.index.chunk_edit import find_chunk

        return find_chunk(self.store, self.tenant, [kb.id for kb in self.list_kbs()], chunk_id)

    def add_chunk(self, kb: KnowledgeBase, doc: Document, content: str, *, important_keywords: Sequence[str] = (),
                  questions: Sequence[str] = ()) -> "ChunkChange":
        """Add a chunk to a document: searchable at once, and in the graph when the KB has one."""
        from kbgraph.index.chunk_edit import add_chunk

        change = add_chunk(self.context(kb), doc.id, doc.name, content, important_keywords=important_keywords,
                           questions=questions, lock=lambda: self.kb_lock(kb.id))
        self.meta.add_document_counts(kb.id, doc.id, chunks=change.chunks_delta, tokens=change.tokens_delta)
        return change

    def update_chunk(self, kb: KnowledgeBase, chunk: "ChunkRecord", *, content: str | None = None,
                     important_keywords: Sequence[str] | None = None, questions: Sequence[str] | None = None,
                     available: bool | None = None) -> "ChunkChange":
        from kbgraph.index.chunk_edit import update_chunk

        change = update_chunk(self.context(kb), chunk, content=content, important_keywords=important_keywords,
                              questions=questions, available=available, lock=lambda: self.kb_lock(kb.id))
        self.meta.add_document_counts(kb.id, chunk.doc_id, tokens=change.tokens_delta)
        return change

    def delete_chunks(self, kb: KnowledgeBase, doc: Document, chunk_ids: Sequence[str] | None) -> "ChunkChange":
        """Delete these chunks of the document (None or empty: all), their mentions leaving the graph."""
        from kbgraph.index.chunk_edit import delete_chunks, document_totals

        ctx = self.context(kb)
        change = delete_chunks(ctx, doc.id, chunk_ids, lock=lambda: self.kb_lock(kb.id))
        if change.deleted:
            # recounted: adding the same content twice counts twice (as RAGFlow does) but stores one chunk
            chunks, tokens = document_totals(ctx, doc.id)
            self.meta.set_document_counts(kb.id, doc.id, chunks=chunks, tokens=tokens)
        return change
