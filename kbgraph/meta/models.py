"""SQLAlchemy tables of the metadata database (SQLite or PostgreSQL).

Only the modules of ``kbgraph.meta`` touch these classes; everything outside it gets the frozen
pydantic records of ``kbgraph.meta.schemas``. Times are integer milliseconds since the epoch, as the
REST API reports them (``create_time``), so no engine's time-zone handling gets in the way. Child
rows are removed by ``ON DELETE CASCADE`` (SQLite needs ``PRAGMA foreign_keys=ON``, which
``kbgraph.meta.database`` sets), so deleting a knowledge base is one statement however many
documents and tasks it has.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator, TypeEngine


class JsonType(TypeDecorator):
    """JSONB on PostgreSQL (indexable, compact); plain JSON text on SQLite. The PostgreSQL dialect
    (with its asyncpg module, ~35 ms) is imported only once a PostgreSQL database is used, not by
    every command that opens an SQLite one."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JsonType(), list[str]: JsonType(), list[dict[str, Any]]: JsonType()}


class Tenant(Base):
    __tablename__ = "tenant"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), default="")
    created: Mapped[int] = mapped_column(BigInteger)


class ApiKey(Base):
    __tablename__ = "api_key"

    # only the sha256 of a token is kept: a leaked database does not leak working keys
    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenant.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(128), default="")
    created: Mapped[int] = mapped_column(BigInteger)


class User(Base):
    """A person who signs in to the web pages; each user works inside one tenant."""

    __tablename__ = "app_user"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    # stored lower-cased: one account per address whatever case it is typed in
    email: Mapped[str] = mapped_column(String(254), unique=True)
    # a salted hash in the format of the hashing library the web app uses (never the password)
    password_hash: Mapped[str] = mapped_column(String(255))
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenant.id", ondelete="CASCADE"), index=True)
    created: Mapped[int] = mapped_column(BigInteger)


class WebSession(Base):
    """A signed-in browser: its cookie carries a random token, this row only the token's sha256.
    Signing out deletes the row, so a copied cookie stops working at once."""

    __tablename__ = "web_session"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("app_user.id", ondelete="CASCADE"), index=True)
    created: Mapped[int] = mapped_column(BigInteger)


class ModelProvider(Base):
    """An OpenAI-compatible endpoint a tenant added, with its key sealed (encrypted by the layer above:
    this table never holds a key in the clear) and the model names it offers."""

    __tablename__ = "model_provider"
    __table_args__ = (UniqueConstraint("tenant_id", "name", name="uq_provider_tenant_name"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenant.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(64))
    base_url: Mapped[str] = mapped_column(Text)
    api_key_sealed: Mapped[str] = mapped_column(Text, default="")
    chat_models: Mapped[list[str]]
    embedding_models: Mapped[list[str]]
    created: Mapped[int] = mapped_column(BigInteger)


class KnowledgeBase(Base):
    __tablename__ = "knowledge_base"
    # names are unique per tenant ignoring case, as RAGFlow's dataset names are
    __table_args__ = (UniqueConstraint("tenant_id", "name_key", name="uq_kb_tenant_name"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenant.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    name_key: Mapped[str] = mapped_column(String(128))
    description: Mapped[str] = mapped_column(Text, default="")
    embedding_model: Mapped[str] = mapped_column(String(255), default="")
    chunk_tokens: Mapped[int] = mapped_column(Integer)
    chunk_overlap: Mapped[int] = mapped_column(Integer)
    graph: Mapped[dict[str, Any]]
    # REST-only settings (avatar, permission, chunk_method, parser_config...) kept verbatim
    extra: Mapped[dict[str, Any]]
    created: Mapped[int] = mapped_column(BigInteger)
    updated: Mapped[int] = mapped_column(BigInteger)


class Document(Base):
    __tablename__ = "document"
    __table_args__ = (
        UniqueConstraint("kb_id", "name", name="uq_document_kb_name"),
        Index("ix_document_kb_status", "kb_id", "status"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kb_id: Mapped[str] = mapped_column(ForeignKey("knowledge_base.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    location: Mapped[str] = mapped_column(Text, default="")
    size: Mapped[int] = mapped_column(BigInteger, default=0)
    content_hash: Mapped[str] = mapped_column(String(64), default="")
    status: Mapped[str] = mapped_column(String(16))
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str | None] = mapped_column(Text, default=None)
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    token_count: Mapped[int] = mapped_column(Integer, default=0)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    # graph state: whether this document's mentions are extracted, and the KB graph version
    # that last merged them (0 = never merged)
    extracted: Mapped[bool] = mapped_column(Boolean, default=False)
    graph_version: Mapped[int] = mapped_column(Integer, default=0)
    # the task of the newest run: a status write naming another run (one cancelled and replaced
    # while it still worked) is ignored; None: no run recorded, every write lands
    run_id: Mapped[str | None] = mapped_column(String(32), default=None)
    extra: Mapped[dict[str, Any]]
    created: Mapped[int] = mapped_column(BigInteger)
    updated: Mapped[int] = mapped_column(BigInteger)
    started: Mapped[int | None] = mapped_column(BigInteger, default=None)
    finished: Mapped[int | None] = mapped_column(BigInteger, default=None)


class Task(Base):
    __tablename__ = "task"
    __table_args__ = (Index("ix_task_kb_status", "kb_id", "status"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kb_id: Mapped[str] = mapped_column(ForeignKey("knowledge_base.id", ondelete="CASCADE"))
    doc_id: Mapped[str | None] = mapped_column(
        ForeignKey("document.id", ondelete="CASCADE"), default=None, index=True
    )
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str | None] = mapped_column(Text, default=None)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    llm_calls: Mapped[int] = mapped_column(Integer, default=0)
    prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    completion_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    created: Mapped[int] = mapped_column(BigInteger)
    updated: Mapped[int] = mapped_column(BigInteger)
    started: Mapped[int | None] = mapped_column(BigInteger, default=None)
    finished: Mapped[int | None] = mapped_column(BigInteger, default=None)


class Chat(Base):
    __tablename__ = "chat"
    __table_args__ = (Index("ix_chat_tenant", "tenant_id"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenant.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    kb_ids: Mapped[list[str]]
    system_prompt: Mapped[str] = mapped_column(Text, default="")
    retrieval: Mapped[dict[str, Any]]
    created: Mapped[int] = mapped_column(BigInteger)
    updated: Mapped[int] = mapped_column(BigInteger)


class Assistant(Base):
    """A chat assistant as the REST API knows it (RAGFlow's "dialog"); deleting one only marks it."""

    __tablename__ = "assistant"
    __table_args__ = (Index("ix_assistant_tenant", "tenant_id", "deleted"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenant.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    name_key: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    icon: Mapped[str] = mapped_column(Text, default="")
    language: Mapped[str] = mapped_column(String(32), default="English")
    kb_ids: Mapped[list[str]]
    llm_id: Mapped[str] = mapped_column(String(255), default="")
    llm_setting: Mapped[dict[str, Any]]
    prompt_config: Mapped[dict[str, Any]]
    similarity_threshold: Mapped[float] = mapped_column(Float, default=0.2)
    vector_similarity_weight: Mapped[float] = mapped_column(Float, default=0.3)
    top_n: Mapped[int] = mapped_column(Integer, default=6)
    top_k: Mapped[int] = mapped_column(Integer, default=1024)
    rerank_id: Mapped[str] = mapped_column(String(255), default="")
    do_refer: Mapped[bool] = mapped_column(Boolean, default=True)
    deleted: Mapped[bool] = mapped_column(Boolean, default=False)
    created: Mapped[int] = mapped_column(BigInteger)
    updated: Mapped[int] = mapped_column(BigInteger)


class ChatSession(Base):
    """One conversation with an assistant: its messages and, per assistant turn, the chunks it cited."""

    __tablename__ = "chat_session"
    __table_args__ = (Index("ix_chat_session_assistant", "assistant_id", "created"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    assistant_id: Mapped[str] = mapped_column(ForeignKey("assistant.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[str] = mapped_column(String(255), default="")
    messages: Mapped[list[dict[str, Any]]]
    references: Mapped[list[dict[str, Any]]]
    created: Mapped[int] = mapped_column(BigInteger)
    updated: Mapped[int] = mapped_column(BigInteger)


__all__ = ["ApiKey", "Assistant", "Base", "Chat", "ChatSession", "Document", "KnowledgeBase", "Task", "Tenant",
           "User"]
