"""The metadata repository: tenants, API keys, knowledge bases, documents, tasks and chats.

``MetaDB`` owns an engine and a sessionmaker; every method is one short transaction and returns
frozen records (``kbgraph.meta.schemas``). Scoping: KB and chat calls take the tenant id, document
and task reads take the KB id, so one tenant never reaches another's rows through this API. Calls
keyed by a document or task id alone (status updates, cancel flags) are for workers that got the id
from a task they were handed.

Concurrency: read-modify-write calls lock what they change first (``SELECT ... FOR UPDATE`` on
PostgreSQL; ``BEGIN IMMEDIATE`` on SQLite, which otherwise fails with "database is locked" when a
deferred read transaction tries to upgrade after another writer committed), so two workers adding
token counts to one task never lose an update.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, delete, event, func, or_, select
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from kbgraph.meta import models as m
from kbgraph.meta.schemas import (
    DEFAULT_TENANT,
    FINISHED,
    STATUSES,
    AlreadyExists,
    ApiKey,
    Assistant,
    Chat,
    ChatSession,
    Document,
    GraphConfig,
    KBCounts,
    KnowledgeBase,
    MetaError,
    NotFound,
    Task,
    Tenant,
    User,
    graph_config,
)

MAX_CHUNK_TOKENS = 8192
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
_KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_WRITE = {"kbgraph_write": True}
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def _now() -> int:
    return time.time_ns() // 1_000_000


def _new_id() -> str:
    # uuid1 hex, as RAGFlow's ids are: its REST API validates dataset ids as UUID1
    return uuid.uuid1().hex


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _check_name(name: Any, what: str, limit: int) -> str:
    if not isinstance(name, str) or not name.strip():
        raise MetaError(f"{what} name must be a non-empty string")
    name = name.strip()
    if len(name) > limit:
        raise MetaError(f"{what} name is {len(name)} characters long; the limit is {limit}")
    return name


def _check_email(email: Any) -> str:
    if not isinstance(email, str) or not _EMAIL_RE.match(email.strip()) or len(email.strip()) > 254:
        raise MetaError("enter an e-mail address such as name@example.com")
    return email.strip().lower()


def _check_chunking(chunk_tokens: int, chunk_overlap: int) -> None:
    if not isinstance(chunk_tokens, int) or not 1 <= chunk_tokens <= MAX_CHUNK_TOKENS:
        raise MetaError(f"chunk_tokens must be an integer from 1 to {MAX_CHUNK_TOKENS}, not {chunk_tokens!r}")
    if not isinstance(chunk_overlap, int) or not 0 <= chunk_overlap < chunk_tokens:
        raise MetaError(
            f"chunk_overlap must be an integer from 0 to chunk_tokens - 1 ({chunk_tokens - 1}), not {chunk_overlap!r}"
        )


def _check_status(status: str) -> None:
    if status not in STATUSES:
        raise MetaError(f"status {status!r} is not one of {list(STATUSES)}")


def _check_progress(progress: float | None) -> None:
    if progress is not None and not 0.0 <= progress <= 1.0:
        raise MetaError(f"progress must lie between 0 and 1, not {progress!r}")


def _check_count(name: str, value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or value < 0):
        raise MetaError(f"{name} must be a non-negative integer, not {value!r}")


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


def _apply_status(row: m.Document | m.Task, status: str, progress: float | None, now: int) -> None:
    """The timestamp and progress side effects of a status change, shared by documents and tasks."""
    previous = row.status
    row.status = status
    if status == "pending":
        row.progress, row.started, row.finished, row.error = 0.0, None, None, None
    elif status == "running":
        if previous != "running":
            row.started, row.finished, row.error = now, None, None
    else:
        row.finished = now
        if status == "done":
            row.progress, row.error = 1.0, None
    if progress is not None:
        row.progress = progress


def _stays_cancelled(row: m.Document, status: str) -> bool:
    """A stop the user asked for is shown at once, but the worker sees it only at its next check
    and may report progress before that: such a late "running" must not bring the run back. A new
    run goes through "pending" first (a new parse, or a changed file), which is let through."""
    return row.status == "cancelled" and status == "running"


def _setup_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # hand transaction control to the "begin" hook below (pysqlite's own BEGIN is deferred)
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        # waiting first: several processes (gunicorn workers) open a new file at the same moment
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get("kbgraph_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


_ASSISTANT_FIELDS = frozenset({
    "description", "icon", "language", "kb_ids", "llm_id", "llm_setting", "prompt_config", "similarity_threshold",
    "vector_similarity_weight", "top_n", "top_k", "rerank_id", "do_refer"})


def _check_assistant_fields(fields: dict[str, Any]) -> None:
    unknown = sorted(set(fields) - _ASSISTANT_FIELDS)
    if unknown:
        raise MetaError(f"unknown chat setting(s): {', '.join(unknown)}")


def _server_engine(url: URL) -> Engine:
    try:
        return create_engine(url, pool_pre_ping=True)
    except ModuleNotFoundError as exc:
        # the PostgreSQL driver is the optional `postgres` extra; say so instead of a bare import error
        hint = ' (pip install "kbgraph[postgres]")' if url.get_backend_name() == "postgresql" else ""
        raise MetaError(f"the metadata database {url.render_as_string(hide_password=True)} needs the "
                        f"Python driver {exc.name!r}, which is not installed{hint}") from exc


class MetaDB:
    """The metadata database. Open with ``MetaDB.open(settings.meta_url)``; thread-safe."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._sqlite = engine.dialect.name == "sqlite"

    @classmethod
    def open(cls, url: str) -> MetaDB:
        """Connect, create missing tables and make sure the default tenant exists."""
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite":
            if parsed.database in (None, "", ":memory:"):
                raise MetaError("the metadata database needs a SQLite file, not an in-memory database")
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(parsed)
            _setup_sqlite(engine)
        else:
            engine = _server_engine(parsed)
        # under the write lock: two processes creating the tables in deferred transactions would
        # deadlock (each holds a read lock the other's write needs) and one would fail at once
        with engine.connect().execution_options(**_WRITE) as conn, conn.begin():
            m.Base.metadata.create_all(conn)
        db = cls(engine)
        db.ensure_tenant(DEFAULT_TENANT)
        return db

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> MetaDB:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with self._sessions() as session, session.begin():
            yield session

    @contextmanager
    def _write(self) -> Iterator[Session]:
        with self._sessions() as session, session.begin():
            # the option reaches the SQLite "begin" hook: this transaction takes the write lock now
            session.connection(execution_options=_WRITE)
            yield session

    # -- tenants and API keys ---------------------------------------------------------------

    def ensure_tenant(self, tenant_id: str, name: str = "") -> Tenant:
        if not isinstance(tenant_id, str) or not tenant_id.strip() or len(tenant_id) > 64:
            raise MetaError("tenant id must be a non-empty string of at most 64 characters")
        try:
            with self._write() as s:
                row = s.get(m.Tenant, tenant_id)
                if row is None:
                    row = m.Tenant(id=tenant_id, name=name or tenant_id, created=_now())
                    s.add(row)
        except IntegrityError:  # created concurrently by another process: it is there now
            return self.get_tenant(tenant_id)
        return Tenant.model_validate(row)

    def get_tenant(self, tenant_id: str) -> Tenant:
        with self._read() as s:
            return Tenant.model_validate(self._tenant(s, tenant_id))

    def create_api_key(self, tenant_id: str, name: str = "") -> tuple[ApiKey, str]:
        """A new key for ``tenant_id``: the record and the token, which is shown only this once."""
        token = "kbgraph-" + secrets.token_urlsafe(32)
        with self._write() as s:
            self._tenant(s, tenant_id)
            row = m.ApiKey(token_hash=_token_hash(token), tenant_id=tenant_id, name=name, created=_now())
            s.add(row)
        return ApiKey.model_validate(row), token

    def tenant_for_api_key(self, token: str) -> str | None:
        with self._read() as s:
            row = s.get(m.ApiKey, _token_hash(token))
            return row.tenant_id if row else None

    def list_api_keys(self, tenant_id: str) -> list[ApiKey]:
        with self._read() as s:
            rows = s.scalars(select(m.ApiKey).where(m.ApiKey.tenant_id == tenant_id).order_by(m.ApiKey.created))
            return [ApiKey.model_validate(r) for r in rows]

    def delete_api_key(self, tenant_id: str, token_hash: str) -> bool:
        with self._write() as s:
            result = s.execute(
                delete(m.ApiKey).where(m.ApiKey.tenant_id == tenant_id, m.ApiKey.token_hash == token_hash)
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    # -- users ------------------------------------------------------------------------------

    def create_user(self, email: str, password_hash: str, tenant_id: str) -> User:
        """A web user in ``tenant_id`` (created if missing); ``password_hash`` is already hashed."""
        email = _check_email(email)
        if not password_hash:
            raise MetaError("a user needs a password hash")
        self.ensure_tenant(tenant_id, email)
        try:
            with self._write() as s:
                if s.scalar(select(m.User.id).where(m.User.email == email)) is not None:
                    raise AlreadyExists(f"an account for {email} already exists")
                row = m.User(id=_new_id(), email=email, password_hash=password_hash, tenant_id=tenant_id,
                             created=_now())
                s.add(row)
        except IntegrityError:  # registered concurrently
            raise AlreadyExists(f"an account for {email} already exists") from None
        return User.model_validate(row)

    def find_user_by_email(self, email: str) -> User | None:
        with self._read() as s:
            row = s.scalar(select(m.User).where(m.User.email == email.strip().lower()))
            return User.model_validate(row) if row else None

    def find_user(self, user_id: str) -> User | None:
        with self._read() as s:
            row = s.get(m.User, user_id)
            return User.model_validate(row) if row else None

    # -- knowledge bases --------------------------------------------------------------------

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
        name = _check_name(name, "knowledge base", 128)
        _check_chunking(chunk_tokens, chunk_overlap)
        config = graph_config(graph)
        now = _now()
        try:
            with self._write() as s:
                self._tenant(s, tenant_id)
                self._check_kb_name_free(s, tenant_id, name, None)
                row = m.KnowledgeBase(
                    id=_new_id(),
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
            return KnowledgeBase.model_validate(self._kb(s, tenant_id, kb_id))

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
                row = self._kb(s, tenant_id, kb_id, lock=True)
                _check_chunking(
                    chunk_tokens if chunk_tokens is not None else row.chunk_tokens,
                    chunk_overlap if chunk_overlap is not None else row.chunk_overlap,
                )
                if name is not None:
                    name = _check_name(name, "knowledge base", 128)
                    self._check_kb_name_free(s, tenant_id, name, kb_id)
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
                row.updated = _now()
        except IntegrityError:
            raise AlreadyExists(f"a knowledge base named {name!r} already exists") from None
        return KnowledgeBase.model_validate(row)

    def delete_kb(self, tenant_id: str, kb_id: str) -> None:
        """Delete the KB with its documents and tasks, and drop it from the tenant's chats."""
        with self._write() as s:
            self._kb(s, tenant_id, kb_id)
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

    # -- documents --------------------------------------------------------------------------

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
        for f in files:
            _check_name(f.name, "document", 255)
            _check_count("size", f.size)
            if f.content_hash and not _HASH_RE.match(f.content_hash):
                raise MetaError("content_hash must be the lower-case hex sha256 of the file's bytes")
        now = _now()
        out: list[tuple[m.Document, bool]] = []
        try:
            with self._write() as s:
                if s.get(m.KnowledgeBase, kb_id) is None:
                    raise NotFound(f"knowledge base {kb_id!r} does not exist")
                names = [_check_name(f.name, "document", 255) for f in files]
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
                            id=_new_id(), kb_id=kb_id, name=name, status="pending", extra={}, created=now
                        )
                        s.add(row)
                    else:
                        changed = row.content_hash != f.content_hash or row.status != "done"
                    row.location, row.size, row.content_hash, row.updated = f.location, f.size, f.content_hash, now
                    if f.extra is not None:
                        row.extra = dict(f.extra)
                    if changed:
                        _apply_status(row, "pending", None, now)
                        row.message, row.chunk_count, row.token_count = "", 0, 0
                        row.extracted, row.graph_version = False, 0
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
        name = _check_name(name, "document", 255)
        _check_count("size", size)
        if content_hash and not _HASH_RE.match(content_hash):
            raise MetaError("content_hash must be the lower-case hex sha256 of the file's bytes")
        now = _now()
        try:
            with self._write() as s:
                if s.get(m.KnowledgeBase, kb_id) is None:
                    raise NotFound(f"knowledge base {kb_id!r} does not exist")
                row = m.Document(id=doc_id or _new_id(), kb_id=kb_id, name=name, status="pending", location=location,
                                 size=size, content_hash=content_hash, extra=dict(extra or {}), created=now,
                                 updated=now)
                _apply_status(row, "pending", None, now)
                row.message, row.chunk_count, row.token_count = "", 0, 0
                row.extracted, row.graph_version = False, 0
                s.add(row)
        except IntegrityError:
            raise AlreadyExists(f"document {name!r} already exists in knowledge base {kb_id!r}") from None
        return Document.model_validate(row)

    def get_document(self, kb_id: str, doc_id: str) -> Document:
        with self._read() as s:
            return Document.model_validate(self._doc(s, doc_id, kb_id))

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
            _check_status(status)
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
    ) -> Document:
        """Record a step of a document's run. "running" (from another status) stamps ``started``;
        "done"/"failed"/"cancelled" stamp ``finished``; "done" sets progress 1 and clears the error;
        "pending" resets progress, times and error. A cancelled document ignores "running" until it
        is reset to "pending" (see ``_stays_cancelled``)."""
        _check_status(status)
        _check_progress(progress)
        _check_count("chunk_count", chunk_count)
        _check_count("token_count", token_count)
        with self._write() as s:
            row = self._doc(s, doc_id, lock=True)
            if _stays_cancelled(row, status):
                return Document.model_validate(row)
            now = _now()
            _apply_status(row, status, progress, now)
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
            _check_status(u.status)
            _check_progress(u.progress)
            _check_count("chunk_count", u.chunk_count)
            _check_count("token_count", u.token_count)
        by_id = {u.doc_id: u for u in updates}
        written: set[str] = set()
        with self._write() as s:
            ids = sorted(by_id)
            for start in range(0, len(ids), 500):
                query = select(m.Document).where(m.Document.id.in_(ids[start:start + 500])).with_for_update()
                for row in s.scalars(query):
                    u = by_id[row.id]
                    written.add(row.id)
                    if _stays_cancelled(row, u.status):
                        continue
                    now = _now()
                    _apply_status(row, u.status, u.progress, now)
                    for name in ("message", "error", "chunk_count", "token_count", "extracted"):
                        if getattr(u, name) is not None:
                            setattr(row, name, getattr(u, name))
                    row.updated = now
        return written

    def set_document_graph_state(
        self, doc_id: str, *, extracted: bool | None = None, graph_version: int | None = None
    ) -> Document:
        _check_count("graph_version", graph_version)
        with self._write() as s:
            row = self._doc(s, doc_id, lock=True)
            if extracted is not None:
                row.extracted = extracted
            if graph_version is not None:
                row.graph_version = graph_version
            row.updated = _now()
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
                row = self._doc(s, doc_id, kb_id, lock=True)
                if name is not None:
                    name = _check_name(name, "document", 255)
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
                row.updated = _now()
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
            row = self._doc(s, doc_id, kb_id, lock=True)
            row.chunk_count = max(0, row.chunk_count + chunks)
            row.token_count = max(0, row.token_count + tokens)
            row.updated = _now()
        return Document.model_validate(row)

    def set_document_counts(self, kb_id: str, doc_id: str, *, chunks: int, tokens: int) -> Document:
        _check_count("chunk_count", chunks)
        _check_count("token_count", tokens)
        with self._write() as s:
            row = self._doc(s, doc_id, kb_id, lock=True)
            row.chunk_count, row.token_count, row.updated = chunks, tokens, _now()
        return Document.model_validate(row)

    def reset_document(self, kb_id: str, doc_id: str, message: str = "") -> Document:
        """Back to "pending" with no chunks, no progress and no graph state (it must be parsed again);
        ``message`` says why."""
        with self._write() as s:
            row = self._doc(s, doc_id, kb_id, lock=True)
            now = _now()
            _apply_status(row, "pending", None, now)
            row.message, row.chunk_count, row.token_count = message, 0, 0
            row.extracted, row.graph_version, row.updated = False, 0, now
        return Document.model_validate(row)

    # -- tasks ------------------------------------------------------------------------------

    def create_task(self, kb_id: str, kind: str, doc_id: str | None = None) -> Task:
        if not isinstance(kind, str) or not _KIND_RE.match(kind):
            raise MetaError(f"task kind {kind!r} must be a short lower-case word such as 'parse' or 'extract'")
        now = _now()
        with self._write() as s:
            if s.get(m.KnowledgeBase, kb_id) is None:
                raise NotFound(f"knowledge base {kb_id!r} does not exist")
            if doc_id is not None:
                self._doc(s, doc_id, kb_id)
            row = m.Task(
                id=_new_id(), kb_id=kb_id, doc_id=doc_id, kind=kind, status="pending", created=now, updated=now
            )
            s.add(row)
        return Task.model_validate(row)

    def prune_finished_tasks(self, kb_id: str, kind: str, keep: int) -> int:
        """Delete the KB's finished (done, failed, cancelled) tasks of one document-less kind but the
        newest ``keep``: a KB refreshed after every batch would otherwise gather a row per refresh.
        Pending and running tasks are never touched. Returns how many rows went."""
        if keep < 0:
            raise MetaError(f"keep must be >= 0, not {keep}")
        finished = (m.Task.kb_id == kb_id, m.Task.kind == kind, m.Task.doc_id.is_(None),
                    m.Task.status.in_(("done", "failed", "cancelled")))
        with self._write() as s:
            kept = select(m.Task.id).where(*finished).order_by(m.Task.created.desc(), m.Task.id.desc()).limit(keep)
            gone = s.execute(delete(m.Task).where(*finished, m.Task.id.not_in(kept.scalar_subquery())))
            return gone.rowcount or 0

    def get_task(self, kb_id: str, task_id: str) -> Task:
        with self._read() as s:
            return Task.model_validate(self._task(s, task_id, kb_id))

    def update_task(
        self,
        task_id: str,
        *,
        status: str | None = None,
        progress: float | None = None,
        message: str | None = None,
        error: str | None = None,
        add_attempts: int = 0,
        add_llm_calls: int = 0,
        add_prompt_tokens: int = 0,
        add_completion_tokens: int = 0,
    ) -> Task:
        """Set status/progress/message/error and add to the counters (adds never lose updates).
        Status side effects are those of ``set_document_status``."""
        if status is not None:
            _check_status(status)
        _check_progress(progress)
        for key, value in (
            ("add_attempts", add_attempts),
            ("add_llm_calls", add_llm_calls),
            ("add_prompt_tokens", add_prompt_tokens),
            ("add_completion_tokens", add_completion_tokens),
        ):
            _check_count(key, value)
        with self._write() as s:
            row = self._task(s, task_id, lock=True)
            now = _now()
            if status is not None:
                _apply_status(row, status, progress, now)
            elif progress is not None:
                row.progress = progress
            if message is not None:
                row.message = message
            if error is not None:
                row.error = error
            row.attempts += add_attempts
            row.llm_calls += add_llm_calls
            row.prompt_tokens += add_prompt_tokens
            row.completion_tokens += add_completion_tokens
            row.updated = now
        return Task.model_validate(row)

    def request_cancel(self, task_id: str) -> Task:
        """Ask a task to stop. A pending task is cancelled at once; a running one sees the flag at
        its next ``is_cancel_requested`` check; a finished one is left as it is."""
        with self._write() as s:
            row = self._task(s, task_id, lock=True)
            if row.status not in FINISHED:
                now = _now()
                row.cancel_requested, row.updated = True, now
                if row.status == "pending":
                    _apply_status(row, "cancelled", None, now)
        return Task.model_validate(row)

    def request_cancel_document(self, kb_id: str, doc_id: str) -> int:
        """Request cancellation of every unfinished task of a document; returns how many."""
        with self._read() as s:
            ids = s.scalars(
                select(m.Task.id).where(
                    m.Task.kb_id == kb_id, m.Task.doc_id == doc_id, m.Task.status.not_in(FINISHED)
                )
            ).all()
        for task_id in ids:
            try:
                self.request_cancel(task_id)
            except NotFound:  # deleted meanwhile: nothing left to cancel
                pass
        return len(ids)

    def is_cancel_requested(self, task_id: str) -> bool:
        """True when the task was asked to stop, or no longer exists (its KB or document was
        deleted under it, so its work is unwanted)."""
        with self._read() as s:
            flag = s.scalar(select(m.Task.cancel_requested).where(m.Task.id == task_id))
            return True if flag is None else bool(flag)

    def list_tasks(
        self,
        kb_id: str,
        *,
        doc_id: str | None = None,
        kind: str | None = None,
        status: str | None = None,
        offset: int = 0,
        limit: int | None = 100,
        newest_first: bool = False,
    ) -> list[Task]:
        query = select(m.Task).where(m.Task.kb_id == kb_id)
        if doc_id is not None:
            query = query.where(m.Task.doc_id == doc_id)
        if kind is not None:
            query = query.where(m.Task.kind == kind)
        if status is not None:
            _check_status(status)
            query = query.where(m.Task.status == status)
        order = (m.Task.created.desc(), m.Task.id.desc()) if newest_first else (m.Task.created, m.Task.id)
        with self._read() as s:
            return [Task.model_validate(r) for r in s.scalars(query.order_by(*order).offset(offset).limit(limit))]

    def running_tasks(self) -> list[tuple[str, Task]]:
        """(tenant id, task) of every task marked running, in any knowledge base: what a sweep for
        tasks whose worker died looks at."""
        query = (select(m.KnowledgeBase.tenant_id, m.Task).join(m.KnowledgeBase, m.KnowledgeBase.id == m.Task.kb_id)
                 .where(m.Task.status == "running").order_by(m.Task.created, m.Task.id))
        with self._read() as s:
            return [(tenant, Task.model_validate(row)) for tenant, row in s.execute(query).all()]

    # -- chats ------------------------------------------------------------------------------

    def create_chat(
        self,
        tenant_id: str,
        name: str,
        *,
        kb_ids: Sequence[str] = (),
        system_prompt: str = "",
        retrieval: dict[str, Any] | None = None,
    ) -> Chat:
        name = _check_name(name, "chat", 255)
        now = _now()
        with self._write() as s:
            self._tenant(s, tenant_id)
            self._check_kb_ids(s, tenant_id, kb_ids)
            row = m.Chat(
                id=_new_id(),
                tenant_id=tenant_id,
                name=name,
                kb_ids=list(kb_ids),
                system_prompt=system_prompt,
                retrieval=dict(retrieval or {}),
                created=now,
                updated=now,
            )
            s.add(row)
        return Chat.model_validate(row)

    def get_chat(self, tenant_id: str, chat_id: str) -> Chat:
        with self._read() as s:
            return Chat.model_validate(self._chat(s, tenant_id, chat_id))

    def list_chats(self, tenant_id: str) -> list[Chat]:
        with self._read() as s:
            rows = s.scalars(select(m.Chat).where(m.Chat.tenant_id == tenant_id).order_by(m.Chat.created, m.Chat.id))
            return [Chat.model_validate(r) for r in rows]

    def update_chat(
        self,
        tenant_id: str,
        chat_id: str,
        *,
        name: str | None = None,
        kb_ids: Sequence[str] | None = None,
        system_prompt: str | None = None,
        retrieval: dict[str, Any] | None = None,
    ) -> Chat:
        with self._write() as s:
            row = self._chat(s, tenant_id, chat_id, lock=True)
            if name is not None:
                row.name = _check_name(name, "chat", 255)
            if kb_ids is not None:
                self._check_kb_ids(s, tenant_id, kb_ids)
                row.kb_ids = list(kb_ids)
            if system_prompt is not None:
                row.system_prompt = system_prompt
            if retrieval is not None:
                row.retrieval = dict(retrieval)
            row.updated = _now()
        return Chat.model_validate(row)

    def delete_chat(self, tenant_id: str, chat_id: str) -> None:
        with self._write() as s:
            result = s.execute(delete(m.Chat).where(m.Chat.tenant_id == tenant_id, m.Chat.id == chat_id))
            if not result.rowcount:  # type: ignore[attr-defined]
                raise NotFound(f"chat {chat_id!r} does not exist")

    # -- chat assistants and their sessions ------------------------------------------------

    def create_assistant(self, tenant_id: str, name: str, **fields: Any) -> Assistant:
        """A new assistant; ``fields`` are Assistant columns (kb_ids, llm_setting, prompt_config, top_n...)."""
        name = _check_name(name, "chat", 255)
        _check_assistant_fields(fields)
        now = _now()
        with self._write() as s:
            self._tenant(s, tenant_id)
            self._check_kb_ids(s, tenant_id, fields.get("kb_ids", []))
            row = m.Assistant(id=_new_id(), tenant_id=tenant_id, name=name, name_key=name.casefold(), kb_ids=[],
                              llm_setting={}, prompt_config={}, deleted=False, created=now, updated=now)
            for key, value in fields.items():
                setattr(row, key, value)
            s.add(row)
            s.flush()
        return Assistant.model_validate(row)

    def get_assistant(self, tenant_id: str, assistant_id: str) -> Assistant:
        with self._read() as s:
            return Assistant.model_validate(self._assistant(s, tenant_id, assistant_id))

    def find_assistant(self, tenant_id: str, name: str) -> Assistant | None:
        """The tenant's live assistant called ``name`` (ignoring case), or None."""
        with self._read() as s:
            row = s.scalar(select(m.Assistant).where(
                m.Assistant.tenant_id == tenant_id, m.Assistant.name_key == name.strip().casefold(),
                m.Assistant.deleted.is_(False)).limit(1))
            return Assistant.model_validate(row) if row else None

    def list_assistants(self, tenant_id: str) -> list[Assistant]:
        with self._read() as s:
            rows = s.scalars(select(m.Assistant).where(m.Assistant.tenant_id == tenant_id, m.Assistant.deleted.is_(False))
                             .order_by(m.Assistant.created, m.Assistant.id))
            return [Assistant.model_validate(r) for r in rows]

    def update_assistant(self, tenant_id: str, assistant_id: str, *, name: str | None = None,
                         **fields: Any) -> Assistant:
        _check_assistant_fields(fields)
        with self._write() as s:
            row = self._assistant(s, tenant_id, assistant_id, lock=True)
            if name is not None:
                row.name = _check_name(name, "chat", 255)
                row.name_key = row.name.casefold()
            if "kb_ids" in fields:
                self._check_kb_ids(s, tenant_id, fields["kb_ids"])
            for key, value in fields.items():
                setattr(row, key, value)
            row.updated = _now()
        return Assistant.model_validate(row)

    def delete_assistant(self, tenant_id: str, assistant_id: str) -> None:
        """Mark the assistant deleted (its sessions stay, unreachable, as RAGFlow keeps them)."""
        with self._write() as s:
            row = self._assistant(s, tenant_id, assistant_id, lock=True)
            row.deleted, row.updated = True, _now()

    def create_session(self, tenant_id: str, assistant_id: str, name: str, *, user_id: str = "",
                       messages: Sequence[dict[str, Any]] = ()) -> ChatSession:
        name = _check_name(name, "session", 255)
        now = _now()
        with self._write() as s:
            self._assistant(s, tenant_id, assistant_id)
            row = m.ChatSession(id=_new_id(), assistant_id=assistant_id, name=name, user_id=user_id or "",
                                messages=[dict(x) for x in messages], references=[], created=now, updated=now)
            s.add(row)
            s.flush()
        return ChatSession.model_validate(row)

    def get_session(self, tenant_id: str, assistant_id: str, session_id: str) -> ChatSession:
        with self._read() as s:
            return ChatSession.model_validate(self._session(s, tenant_id, assistant_id, session_id))

    def session_of_deleted_assistant(self, tenant_id: str, assistant_id: str, session_id: str) -> bool:
        """Whether this is a session kept under one of the tenant's deleted assistants."""
        with self._read() as s:
            found = s.scalar(select(m.ChatSession.id).join(m.Assistant, m.Assistant.id == m.ChatSession.assistant_id)
                             .where(m.ChatSession.id == session_id, m.Assistant.id == assistant_id,
                                    m.Assistant.tenant_id == tenant_id, m.Assistant.deleted.is_(True)))
            return found is not None

    def list_sessions(self, tenant_id: str, assistant_id: str) -> list[ChatSession]:
        with self._read() as s:
            self._assistant(s, tenant_id, assistant_id)
            rows = s.scalars(select(m.ChatSession).where(m.ChatSession.assistant_id == assistant_id)
                             .order_by(m.ChatSession.created, m.ChatSession.id))
            return [ChatSession.model_validate(r) for r in rows]

    def rename_session(self, tenant_id: str, assistant_id: str, session_id: str, name: str) -> ChatSession:
        with self._write() as s:
            row = self._session(s, tenant_id, assistant_id, session_id, lock=True)
            row.name, row.updated = _check_name(name, "session", 255), _now()
        return ChatSession.model_validate(row)

    def append_turn(self, tenant_id: str, assistant_id: str, session_id: str, messages: Sequence[dict[str, Any]],
                    reference: dict[str, Any] | None = None) -> ChatSession:
        """Add a question and its answer (and the answer's reference) to the conversation."""
        with self._write() as s:
            row = self._session(s, tenant_id, assistant_id, session_id, lock=True)
            row.messages = [*row.messages, *(dict(x) for x in messages)]
            if reference is not None:
                row.references = [*row.references, dict(reference)]
            row.updated = _now()
        return ChatSession.model_validate(row)

    def delete_session(self, tenant_id: str, assistant_id: str, session_id: str) -> None:
        with self._write() as s:
            self._session(s, tenant_id, assistant_id, session_id)
            s.execute(delete(m.ChatSession).where(m.ChatSession.id == session_id))

    # -- lookups inside a session -----------------------------------------------------------

    def _tenant(self, s: Session, tenant_id: str) -> m.Tenant:
        row = s.get(m.Tenant, tenant_id)
        if row is None:
            raise NotFound(f"tenant {tenant_id!r} does not exist")
        return row

    def _kb(self, s: Session, tenant_id: str, kb_id: str, *, lock: bool = False) -> m.KnowledgeBase:
        query = select(m.KnowledgeBase).where(m.KnowledgeBase.id == kb_id, m.KnowledgeBase.tenant_id == tenant_id)
        row = s.scalar(query.with_for_update() if lock else query)
        if row is None:
            raise NotFound(f"knowledge base {kb_id!r} does not exist")
        return row

    def _doc(self, s: Session, doc_id: str, kb_id: str | None = None, *, lock: bool = False) -> m.Document:
        query = select(m.Document).where(m.Document.id == doc_id)
        if kb_id is not None:
            query = query.where(m.Document.kb_id == kb_id)
        row = s.scalar(query.with_for_update() if lock else query)
        if row is None:
            where = f" in knowledge base {kb_id!r}" if kb_id is not None else ""
            raise NotFound(f"document {doc_id!r} does not exist{where}")
        return row

    def _task(self, s: Session, task_id: str, kb_id: str | None = None, *, lock: bool = False) -> m.Task:
        query = select(m.Task).where(m.Task.id == task_id)
        if kb_id is not None:
            query = query.where(m.Task.kb_id == kb_id)
        row = s.scalar(query.with_for_update() if lock else query)
        if row is None:
            raise NotFound(f"task {task_id!r} does not exist")
        return row

    def _chat(self, s: Session, tenant_id: str, chat_id: str, *, lock: bool = False) -> m.Chat:
        query = select(m.Chat).where(m.Chat.id == chat_id, m.Chat.tenant_id == tenant_id)
        row = s.scalar(query.with_for_update() if lock else query)
        if row is None:
            raise NotFound(f"chat {chat_id!r} does not exist")
        return row

    def _assistant(self, s: Session, tenant_id: str, assistant_id: str, *, lock: bool = False) -> m.Assistant:
        query = select(m.Assistant).where(m.Assistant.id == assistant_id, m.Assistant.tenant_id == tenant_id,
                                          m.Assistant.deleted.is_(False))
        row = s.scalar(query.with_for_update() if lock else query)
        if row is None:
            raise NotFound(f"chat {assistant_id!r} does not exist")
        return row

    def _session(self, s: Session, tenant_id: str, assistant_id: str, session_id: str, *,
                 lock: bool = False) -> m.ChatSession:
        self._assistant(s, tenant_id, assistant_id)
        query = select(m.ChatSession).where(m.ChatSession.id == session_id, m.ChatSession.assistant_id == assistant_id)
        row = s.scalar(query.with_for_update() if lock else query)
        if row is None:
            raise NotFound(f"session {session_id!r} does not exist")
        return row

    def _check_kb_name_free(self, s: Session, tenant_id: str, name: str, own_id: str | None) -> None:
        query = select(m.KnowledgeBase.id).where(
            m.KnowledgeBase.tenant_id == tenant_id, m.KnowledgeBase.name_key == name.casefold()
        )
        if own_id is not None:
            query = query.where(m.KnowledgeBase.id != own_id)
        if s.scalar(query) is not None:
            raise AlreadyExists(f"a knowledge base named {name!r} already exists")

    def _check_kb_ids(self, s: Session, tenant_id: str, kb_ids: Sequence[str]) -> None:
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


__all__ = ["MAX_CHUNK_TOKENS", "MetaDB"]
