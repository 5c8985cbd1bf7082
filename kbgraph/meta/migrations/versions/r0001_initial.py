"""The schema as ``Base.metadata.create_all`` made it before migrations existed.

A database that create_all made (no ``alembic_version`` table) is adopted at this revision
(``kbgraph.meta.migrate``): stamped, not created again. Written by ``alembic revision
--autogenerate`` against an empty database and read line by line against kbgraph/meta/models.py;
the JSON columns are spelled out (JSON, JSONB on PostgreSQL, as models.JsonType makes them) so that
this revision never changes when the models do.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# the tables of this revision, parents first (what adoption checks a create_all database for)
TABLES = ("tenant", "api_key", "app_user", "assistant", "chat", "knowledge_base", "chat_session", "document", "task")


def _json() -> sa.types.TypeEngine:  # type: ignore[type-arg]
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _tenant_fk() -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["tenant_id"], ["tenant.id"], ondelete="CASCADE")


def _times() -> list[sa.Column]:  # type: ignore[type-arg]
    return [sa.Column("created", sa.BigInteger(), nullable=False), sa.Column("updated", sa.BigInteger(), nullable=False)]


def _accounts() -> None:
    op.create_table(
        "tenant",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("created", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "api_key",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("created", sa.BigInteger(), nullable=False),
        _tenant_fk(),
        sa.PrimaryKeyConstraint("token_hash"),
    )
    op.create_index("ix_api_key_tenant_id", "api_key", ["tenant_id"], unique=False)
    op.create_table(
        "app_user",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("created", sa.BigInteger(), nullable=False),
        _tenant_fk(),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("email"),
    )
    op.create_index("ix_app_user_tenant_id", "app_user", ["tenant_id"], unique=False)


def _chats() -> None:
    op.create_table(
        "assistant",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("name_key", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("icon", sa.Text(), nullable=False),
        sa.Column("language", sa.String(length=32), nullable=False),
        sa.Column("kb_ids", _json(), nullable=False),
        sa.Column("llm_id", sa.String(length=255), nullable=False),
        sa.Column("llm_setting", _json(), nullable=False),
        sa.Column("prompt_config", _json(), nullable=False),
        sa.Column("similarity_threshold", sa.Float(), nullable=False),
        sa.Column("vector_similarity_weight", sa.Float(), nullable=False),
        sa.Column("top_n", sa.Integer(), nullable=False),
        sa.Column("top_k", sa.Integer(), nullable=False),
        sa.Column("rerank_id", sa.String(length=255), nullable=False),
        sa.Column("do_refer", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        *_times(),
        _tenant_fk(),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_assistant_tenant", "assistant", ["tenant_id", "deleted"], unique=False)
    op.create_table(
        "chat",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("kb_ids", _json(), nullable=False),
        sa.Column("system_prompt", sa.Text(), nullable=False),
        sa.Column("retrieval", _json(), nullable=False),
        *_times(),
        _tenant_fk(),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_chat_tenant", "chat", ["tenant_id"], unique=False)


def _knowledge_bases() -> None:
    op.create_table(
        "knowledge_base",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("name_key", sa.String(length=128), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("embedding_model", sa.String(length=255), nullable=False),
        sa.Column("chunk_tokens", sa.Integer(), nullable=False),
        sa.Column("chunk_overlap", sa.Integer(), nullable=False),
        sa.Column("graph", _json(), nullable=False),
        sa.Column("extra", _json(), nullable=False),
        *_times(),
        _tenant_fk(),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant_id", "name_key", name="uq_kb_tenant_name"),
    )
    op.create_table(
        "chat_session",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("assistant_id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=False),
        sa.Column("messages", _json(), nullable=False),
        sa.Column("references", _json(), nullable=False),
        *_times(),
        sa.ForeignKeyConstraint(["assistant_id"], ["assistant.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_chat_session_assistant", "chat_session", ["assistant_id", "created"], unique=False)


def _documents() -> None:
    op.create_table(
        "document",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("kb_id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("extracted", sa.Boolean(), nullable=False),
        sa.Column("graph_version", sa.Integer(), nullable=False),
        sa.Column("extra", _json(), nullable=False),
        *_times(),
        sa.Column("started", sa.BigInteger(), nullable=True),
        sa.Column("finished", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["kb_id"], ["knowledge_base.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("kb_id", "name", name="uq_document_kb_name"),
    )
    op.create_index("ix_document_kb_status", "document", ["kb_id", "status"], unique=False)
    op.create_table(
        "task",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("kb_id", sa.String(length=32), nullable=False),
        sa.Column("doc_id", sa.String(length=32), nullable=True),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("llm_calls", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        *_times(),
        sa.Column("started", sa.BigInteger(), nullable=True),
        sa.Column("finished", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["doc_id"], ["document.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["kb_id"], ["knowledge_base.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_task_doc_id", "task", ["doc_id"], unique=False)
    op.create_index("ix_task_kb_status", "task", ["kb_id", "status"], unique=False)


def upgrade() -> None:
    _accounts()
    _chats()
    _knowledge_bases()
    _documents()


def downgrade() -> None:
    for table in reversed(TABLES):
        op.drop_table(table)
