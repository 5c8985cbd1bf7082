"""Web sign-ins kept on the server, the run that owns a document's status, tenants' model providers.

``web_session``: one row per signed-in browser (the cookie carries a random token, the row its
sha256); signing out deletes the row, so a copied cookie stops working. ``document.run_id``: the task
of the document's newest run; a status write from another run (one cancelled and replaced) is
ignored. ``model_provider``: an OpenAI-compatible endpoint a tenant added (its key sealed by the web
app, never in the clear) and the chat and embedding models it offers.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "web_session",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("created", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["app_user.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("token_hash"),
    )
    op.create_index("ix_web_session_user_id", "web_session", ["user_id"], unique=False)
    with op.batch_alter_table("document") as batch:
        batch.add_column(sa.Column("run_id", sa.String(length=32), nullable=True))
    json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    op.create_table(
        "model_provider",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("base_url", sa.Text(), nullable=False),
        sa.Column("api_key_sealed", sa.Text(), nullable=False),
        sa.Column("chat_models", json, nullable=False),
        sa.Column("embedding_models", json, nullable=False),
        sa.Column("created", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenant.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant_id", "name", name="uq_provider_tenant_name"),
    )


def downgrade() -> None:
    op.drop_table("model_provider")
    with op.batch_alter_table("document") as batch:
        batch.drop_column("run_id")
    op.drop_index("ix_web_session_user_id", table_name="web_session")
    op.drop_table("web_session")
