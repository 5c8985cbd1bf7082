"""Documents: the files of a knowledge base, with the status, progress and counters of their runs.

Registering a file (``upsert_documents``) decides whether it needs (re)indexing; a document that
must be parsed again goes back to "pending" with its counters and graph state cleared
(``_back_to_pending``, the one place that reset is written). ``doc_row`` is the document lookup
tasks use inside their own transactions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

import kbgraph.meta.models as m
from kbgraph.meta.checks import check_content_hash, check_count, check_name, check_status, check_step
from kbgraph.meta.database import Database, new_id, now_ms
from kbgraph.meta.knowledge_bases import require_kb
from kbgraph.meta.schemas import AlreadyExists, Document, NotFound
from kbgraph.meta.status import apply_status, owns_row, stays_cancelled


@dataclass
class DocumentFile:
    """A file to register, for ``MetaDB.upsert_documents``."""

    name: str
    location: str = ""
    size: int = 0
    content_hash: str = ""
    extra: dict[str, Any] | None = None


@dataclass
class DocumentStatus:
    """One document's step, for ``MetaDB.set_document_statuses`` (None: leave the field as it is)."""

    doc_id: str
    status: str
    progress: float | None = None
    message: str | None = None
    error: str | None = None
    chunk_count: int | None = None
    token_count: int | None = None
    extracted: bool | None = None
    run_id: str | None = None  # the run writing (see ``set_document_status``)


def doc_row(s: Session, doc_id: str, kb_id: str | None = None, *, lock: bool = False) -> m.Document:
    query = select(m.Document).where(m.Document.id == doc_id)
    if kb_id is not None:
        query = query.where(m.Document.kb_id == kb_id)
    row = s.scalar(query.with_for_update() if lock else query)
    if row is None:
        where = f" in knowledge base {kb_id!r}" if kb_id is not None else ""
        raise NotFound(f"document {doc_id!r} does not exist{where}")
    return row


def _checked_file(name: str, size: int, content_hash: str) -> str:
    """The checks of a file to register; returns its name stripped."""
    name = check_name(name, "document", 255)
    check_count("size", size)
    check_content_hash(content_hash)
    return name


def _back_to_pending(row: m.Document, message: str, now: int) -> None:
    """Back to "pending" with no chunks, no progress and no graph state (it must be parsed again)."""
    apply_status(row, "pending", None, now)
    row.message, row.chunk_count, row.token_count = message, 0, 0
    row.extracted, row.graph_version, row.updated = False, 0, now


class DocumentsMixin(Database):
    """``MetaDB``'s calls on documents."""

    def upsert_document(
        self,
        kb_id: str,
        name: str,
        location: str = "",
        size: int = 0,
        content_hash: str = "",
        *,
        extra: dict[str, Any] | None = None,
    ) -> tuple[Document, bool]:
        """Register a file by name; ``changed`` says whether it needs (re)indexing.

        ``changed`` is True for a new document, for new content (the hash differs), and for a
        document whose last run did not finish as "done" (failed, cancelled, or interrupted by a
        crash), so re-running an index command picks up where it stopped. A changed document is
        reset to "pending" with its counters and graph state cleared; an unchanged one only gets
        its location and size refreshed.
        """
        return self.upsert_documents(kb_id, [DocumentFile(name, location, size, content_hash, extra)])[0]

    def upsert_documents(self, kb_id: str, files: Sequence[DocumentFile]) -> list[tuple[Document, bool]]:
        """``upsert_document`` for many files in one transaction (an indexing run registers its
        files in batches: one commit per file would cost more than indexing a short one)."""
        names = [_checked_file(f.name, f.size, f.content_hash) for f in files]
        now = now_ms()
        out: list[tuple[m.Document, bool]] = []
        try:
            with self._write() as s:
                require_kb(s, kb_id)
                found: dict[str, m.Document] = {}
                for start in range(0, len(names), 500):
                    query = select(m.Document).where(m.Document.kb_id == kb_id,
                                                     m.Document.name.in_(names[start:start + 500])).with_for_update()
                    found |= {row.name: row for row in s.scalars(query)}
                for name, f in zip(names, files):
                    row = found.get(name)
                    if row is None:
                        changed = True
                        row = found[name] = m.Document(
                            id=new_id(), kb_id=kb_id, name=name, status="pending", extra={}, created=now
                        )
                        s.add(row)
                    else:
                        changed = row.content_hash != f.content_hash or row.status != "done"
                    row.location, row.size, row.content_hash, row.updated = f.location, f.size, f.content_hash, now
                    if f.extra is not None:
                        row.extra = dict(f.extra)
                    if changed:
                        _back_to_pending(row, "", now)
                    out.append((row, changed))
        except IntegrityError:
            raise AlreadyExists(f"a document of {[f.name for f in files][:3]} was registered concurrently; "
                                "retry") from None
        return [(Document.model_validate(row), changed) for row, changed in out]

    def create_document(
        self,
        kb_id: str,
        name: str,
        location: str,
        size: int,
        content_hash: str,
        *,
        doc_id: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Document:
        """Register a new document; raises AlreadyExists when the KB has one of this name (the
        unique constraint decides between concurrent uploads, never a read before the write)."""
        name = _checked_file(name, size, content_hash)
        now = now_ms()
        try:
            with self._write() as s:
                require_kb(s, kb_id)
                row = m.Document(id=doc_id or new_id(), kb_id=kb_id, name=name, status="pending", location=location,
                                 size=size, content_hash=content_hash, extra=dict(extra or {}), created=now,
                                 updated=now)
                _back_to_pending(row, "", now)
                s.add(row)
        except IntegrityError:
            raise AlreadyExists(f"document {name!r} already exists in knowledge base {kb_id!r}") from None
        return Document.model_validate(row)

    def get_document(self, kb_id: str, doc_id: str) -> Document:
        with self._read() as s:
            return Document.model_validate(doc_row(s, doc_id, kb_id))

    def find_document(self, kb_id: str, name_or_id: str) -> Document | None:
        """The KB's document with this id, else with this exact name, else None."""
        with self._read() as s:
            rows = s.scalars(
                select(m.Document).where(
                    m.Document.kb_id == kb_id, or_(m.Document.id == name_or_id, m.Document.name == name_or_id)
                )
            ).all()
            rows = sorted(rows, key=lambda r: r.id != name_or_id)  # an id match beats a name match
            return Document.model_validate(rows[0]) if rows else None

    def list_documents(
        self,
        kb_id: str,
        status: str | None = None,
        offset: int = 0,
        limit: int | None = 100,
        *,
        newest_first: bool = False,
    ) -> list[Document]:
        if status is not None:
            check_status(status)
        with self._read() as s:
            order = (m.Document.created, m.Document.id)
            if newest_first:
                order = (m.Document.created.desc(), m.Document.id.desc())
            query = select(m.Document).where(m.Document.kb_id == kb_id)
            if status is not None:
                query = query.where(m.Document.status == status)
            rows = s.scalars(query.order_by(*order).offset(offset).limit(limit))
            return [Document.model_validate(r) for r in rows]

    def count_documents(self, kb_id: str, status: str | None = None) -> int:
        with self._read() as s:
            query = select(func.count(m.Document.id)).where(m.Document.kb_id == kb_id)
            if status is not None:
                query = query.where(m.Document.status == status)
            return int(s.scalar(query) or 0)

    def set_document_status(
        self,
        doc_id: str,
        status: str,
        progress: float | None = None,
        message: str | None = None,
        error: str | None = None,
        chunk_count: int | None = None,
        token_count: int | None = None,
        run_id: str | None = None,
    ) -> Document:
        """Record a step of a document's run. "running" (from another status) stamps ``started``;
        "done"/"failed"/"cancelled" stamp ``finished``; "done" sets progress 1 and clears the error;
        "pending" resets progress, times and error. A cancelled document ignores "running" until it
        is reset to "pending" (see ``stays_cancelled``).

        ``run_id`` names the run writing: "pending" with a run id makes that run the document's
        owner; any other write naming a run that is not the owner is ignored (a cancelled run that
        ends after the user parsed the document again must not overwrite the new run's row)."""
        check_step(status, progress, chunk_count, token_count)
        with self._write() as s:
            row = doc_row(s, doc_id, lock=True)
            if stays_cancelled(row, status) or not owns_row(row, status, run_id):
                return Document.model_validate(row)
            if status == "pending" and run_id is not None:
                row.run_id = run_id
            now = now_ms()
            apply_status(row, status, progress, now)
            if message is not None:
                row.message = message
            if error is not None:
                row.error = error
            if chunk_count is not None:
                row.chunk_count = chunk_count
            if token_count is not None:
                row.token_count = token_count
            row.updated = now
        return Document.model_validate(row)

    def set_document_statuses(self, updates: Sequence[DocumentStatus]) -> set[str]:
        """``set_document_status`` (and ``extracted``) for many documents in one transaction, as an
        indexing run records a batch of them; documents deleted meanwhile are skipped. Returns the
        ids of those recorded."""
        for u in updates:
            check_step(u.status, u.progress, u.chunk_count, u.token_count)
        by_id = {u.doc_id: u for u in updates}
        written: set[str] = set()
        with self._write() as s:
            ids = sorted(by_id)
            for start in range(0, len(ids), 500):
                query = select(m.Document).where(m.Document.id.in_(ids[start:start + 500])).with_for_update()
                for row in s.scalars(query):
                    u = by_id[row.id]
                    written.add(row.id)
                    if stays_cancelled(row, u.status) or not owns_row(row, u.status, u.run_id):
                        continue
                    now = now_ms()
                    apply_status(row, u.status, u.progress, now)
                    for name in ("message", "error", "chunk_count", "token_count", "extracted"):
                        if getattr(u, name) is not None:
                            setattr(row, name, getattr(u, name))
                    row.updated = now
        return written

    def set_document_graph_state(
        self, doc_id: str, *, extracted: bool | None = None, graph_version: int | None = None
    ) -> Document:
        check_count("graph_version", graph_version)
        with self._write() as s:
            row = doc_row(s, doc_id, lock=True)
            if extracted is not None:
                row.extracted = extracted
            if graph_version is not None:
                row.graph_version = graph_version
            row.updated = now_ms()
        return Document.model_validate(row)

    def update_document(
        self,
        kb_id: str,
        doc_id: str,
        *,
        name: str | None = None,
        enabled: bool | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Document:
        """Rename (exact names are unique per KB), enable/disable, or replace ``extra``."""
        try:
            with self._write() as s:
                row = doc_row(s, doc_id, kb_id, lock=True)
                if name is not None:
                    name = check_name(name, "document", 255)
                    taken = s.scalar(
                        select(m.Document.id).where(
                            m.Document.kb_id == kb_id, m.Document.name == name, m.Document.id != doc_id
                        )
                    )
                    if taken:
                        raise AlreadyExists(f"a document named {name!r} already exists in this knowledge base")
                    row.name = name
                if enabled is not None:
                    row.enabled = enabled
                if extra is not None:
                    row.extra = dict(extra)
                row.updated = now_ms()
        except IntegrityError:
            raise AlreadyExists(f"a document named {name!r} already exists in this knowledge base") from None
        return Document.model_validate(row)

    def delete_document(self, kb_id: str, doc_id: str) -> None:
        """Delete the document and its tasks (the stores' rows are the pipeline's business)."""
        with self._write() as s:
            result = s.execute(delete(m.Document).where(m.Document.kb_id == kb_id, m.Document.id == doc_id))
            if not result.rowcount:  # type: ignore[attr-defined]
                raise NotFound(f"document {doc_id!r} does not exist in knowledge base {kb_id!r}")

    def add_document_counts(self, kb_id: str, doc_id: str, *, chunks: int = 0, tokens: int = 0) -> Document:
        """Move a document's chunk and token counters (chunks added or deleted by hand); never below 0."""
        with self._write() as s:
            row = doc_row(s, doc_id, kb_id, lock=True)
            row.chunk_count = max(0, row.chunk_count + chunks)
            row.token_count = max(0, row.token_count + tokens)
            row.updated = now_ms()
        return Document.model_validate(row)

    def set_document_counts(self, kb_id: str, doc_id: str, *, chunks: int, tokens: int) -> Document:
        check_count("chunk_count", chunks)
        check_count("token_count", tokens)
        with self._write() as s:
            row = doc_row(s, doc_id, kb_id, lock=True)
            row.chunk_count, row.token_count, row.updated = chunks, tokens, now_ms()
        return Document.model_validate(row)

    def reset_document(self, kb_id: str, doc_id: str, message: str = "") -> Document:
        """Back to "pending" with no chunks, no progress and no graph state (it must be parsed again);
        ``message`` says why."""
        with self._write() as s:
            row = doc_row(s, doc_id, kb_id, lock=True)
            _back_to_pending(row, message, now_ms())
        return Document.model_validate(row)
