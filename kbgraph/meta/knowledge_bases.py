"""Knowledge bases: a tenant's named collections of documents, with their chunking and graph settings.

Besides ``MetaDB``'s calls on them, this holds the knowledge-base lookups and checks that documents,
tasks and chats run inside their own transactions (``kb_row``, ``require_kb``, ``check_kb_ids``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

import kbgraph.meta.models as m
from kbgraph.meta.checks import check_chunking, check_name
from kbgraph.meta.database import Database, new_id, now_ms
from kbgraph.meta.schemas import AlreadyExists, GraphConfig, KBCounts, KnowledgeBase, MetaError, NotFound, graph_config
from kbgraph.meta.tenants import tenant_row


def kb_row(s: Session, tenant_id: str, kb_id: str, *, lock: bool = False) -> m.KnowledgeBase:
    query = select(m.KnowledgeBase).where(m.KnowledgeBase.id == kb_id, m.KnowledgeBase.tenant_id == tenant_id)
    row = s.scalar(query.with_for_update() if lock else query)
    if row is None:
        raise NotFound(f"knowledge base {kb_id!r} does not exist")
    return row


def require_kb(s: Session, kb_id: str) -> None:
    """NotFound unless the knowledge base exists (in any tenant: for calls keyed by the KB id)."""
    if s.get(m.KnowledgeBase, kb_id) is None:
        raise NotFound(f"knowledge base {kb_id!r} does not exist")


def check_kb_name_free(s: Session, tenant_id: str, name: str, own_id: str | None) -> None:
    query = select(m.KnowledgeBase.id).where(
        m.KnowledgeBase.tenant_id == tenant_id, m.KnowledgeBase.name_key == name.casefold()
    )
    if own_id is not None:
        query = query.where(m.KnowledgeBase.id != own_id)
    if s.scalar(query) is not None:
        raise AlreadyExists(f"a knowledge base named {name!r} already exists")


def check_kb_ids(s: Session, tenant_id: str, kb_ids: Sequence[str]) -> None:
    if isinstance(kb_ids, str):
        raise MetaError("kb_ids must be a list of knowledge base ids")
    wanted = set(kb_ids)
    found = set(
        s.scalars(
            select(m.KnowledgeBase.id).where(
                m.KnowledgeBase.tenant_id == tenant_id, m.KnowledgeBase.id.in_(wanted)
            )
        )
    )
    missing = sorted(wanted - found)
    if missing:
        raise NotFound(f"knowledge bases do not exist: {missing}")


class KnowledgeBasesMixin(Database):
    """``MetaDB``'s calls on knowledge bases."""

    def create_kb(
        self,
        tenant_id: str,
        name: str,
        *,
        description: str = "",
        embedding_model: str = "",
        chunk_tokens: int = 512,
        chunk_overlap: int = 64,
        graph: GraphConfig | dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> KnowledgeBase:
        name = check_name(name, "knowledge base", 128)
        check_chunking(chunk_tokens, chunk_overlap)
        config = graph_config(graph)
        now = now_ms()
        try:
            with self._write() as s:
                tenant_row(s, tenant_id)
                check_kb_name_free(s, tenant_id, name, None)
                row = m.KnowledgeBase(
                    id=new_id(),
                    tenant_id=tenant_id,
                    name=name,
                    name_key=name.casefold(),
                    description=description or "",
                    embedding_model=embedding_model or "",
                    chunk_tokens=chunk_tokens,
                    chunk_overlap=chunk_overlap,
                    graph=config.model_dump(mode="json"),
                    extra=dict(extra or {}),
                    created=now,
                    updated=now,
                )
                s.add(row)
        except IntegrityError:  # lost a race for the name with another process
            raise AlreadyExists(f"a knowledge base named {name!r} already exists") from None
        return KnowledgeBase.model_validate(row)

    def get_kb(self, tenant_id: str, kb_id: str) -> KnowledgeBase:
        with self._read() as s:
            return KnowledgeBase.model_validate(kb_row(s, tenant_id, kb_id))

    def get_kb_by_name(self, tenant_id: str, name: str) -> KnowledgeBase | None:
        """The tenant's KB called ``name`` (ignoring case), or None."""
        with self._read() as s:
            row = s.scalar(
                select(m.KnowledgeBase).where(
                    m.KnowledgeBase.tenant_id == tenant_id, m.KnowledgeBase.name_key == name.strip().casefold()
                )
            )
            return KnowledgeBase.model_validate(row) if row else None

    def list_kbs(self, tenant_id: str, *, offset: int = 0, limit: int | None = None) -> list[KnowledgeBase]:
        with self._read() as s:
            query = (
                select(m.KnowledgeBase)
                .where(m.KnowledgeBase.tenant_id == tenant_id)
                .order_by(m.KnowledgeBase.created, m.KnowledgeBase.id)
                .offset(offset)
                .limit(limit)
            )
            return [KnowledgeBase.model_validate(r) for r in s.scalars(query)]

    def update_kb(
        self,
        tenant_id: str,
        kb_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        embedding_model: str | None = None,
        chunk_tokens: int | None = None,
        chunk_overlap: int | None = None,
        graph: GraphConfig | dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> KnowledgeBase:
        """Change the given fields (None = keep); ``extra`` replaces the stored dict."""
        config = graph_config(graph) if graph is not None else None
        try:
            with self._write() as s:
                row = kb_row(s, tenant_id, kb_id, lock=True)
                check_chunking(
                    chunk_tokens if chunk_tokens is not None else row.chunk_tokens,
                    chunk_overlap if chunk_overlap is not None else row.chunk_overlap,
                )
                if name is not None:
                    name = check_name(name, "knowledge base", 128)
                    check_kb_name_free(s, tenant_id, name, kb_id)
                    row.name, row.name_key = name, name.casefold()
                if description is not None:
                    row.description = description
                if embedding_model is not None:
                    row.embedding_model = embedding_model
                if chunk_tokens is not None:
                    row.chunk_tokens = chunk_tokens
                if chunk_overlap is not None:
                    row.chunk_overlap = chunk_overlap
                if config is not None:
                    row.graph = config.model_dump(mode="json")
                if extra is not None:
                    row.extra = dict(extra)
                row.updated = now_ms()
        except IntegrityError:
            raise AlreadyExists(f"a knowledge base named {name!r} already exists") from None
        return KnowledgeBase.model_validate(row)

    def set_kb_mark(self, kb_id: str, key: str, value: Any) -> Any:
        """Set one key of the KB's ``extra`` (``None`` removes it) in one locked transaction, so that
        writers of other keys lose nothing; returns the key's previous value (None if the KB is gone)."""
        with self._write() as s:
            row = s.scalar(select(m.KnowledgeBase).where(m.KnowledgeBase.id == kb_id).with_for_update())
            if row is None:
                return None
            extra = dict(row.extra or {})
            previous = extra.get(key)
            if value is None:
                extra.pop(key, None)
            else:
                extra[key] = value
            if extra != row.extra:
                row.extra = extra  # a new dict: the JSON column sees the change
            return previous

    def kbs_marked(self, key: str) -> list[KnowledgeBase]:
        """Every knowledge base, of any tenant, whose ``extra`` holds ``key`` (a start-up sweep's
        question; the JSON is read in Python, the same on SQLite and PostgreSQL)."""
        with self._read() as s:
            rows = s.scalars(select(m.KnowledgeBase).order_by(m.KnowledgeBase.created, m.KnowledgeBase.id))
            return [KnowledgeBase.model_validate(r) for r in rows if key in (r.extra or {})]

    def delete_kb(self, tenant_id: str, kb_id: str) -> None:
        """Delete the KB with its documents and tasks, and drop it from the tenant's chats."""
        with self._write() as s:
            kb_row(s, tenant_id, kb_id)
            s.execute(delete(m.KnowledgeBase).where(m.KnowledgeBase.id == kb_id))
            # chats hold KB ids in a JSON list; few chats per tenant, so filtering in Python is fine
            for chat in s.scalars(select(m.Chat).where(m.Chat.tenant_id == tenant_id)):
                if kb_id in chat.kb_ids:
                    chat.kb_ids = [k for k in chat.kb_ids if k != kb_id]

    def kb_counts(self, kb_id: str) -> KBCounts:
        with self._read() as s:
            docs, chunks, tokens = s.execute(
                select(
                    func.count(m.Document.id),
                    func.coalesce(func.sum(m.Document.chunk_count), 0),
                    func.coalesce(func.sum(m.Document.token_count), 0),
                ).where(m.Document.kb_id == kb_id)
            ).one()
            return KBCounts(documents=int(docs), chunks=int(chunks), tokens=int(tokens))
