"""The metadata repository: ``MetaDB``, the one object callers hold, made of one part per group of
tables.

Each group of tables has its own module with its calls (``kbgraph.meta.tenants``: tenants, API keys
and users; ``web_sessions``: the web pages' sign-ins; ``providers``: tenants' model providers; ``knowledge_bases``; ``documents``; ``tasks``; ``chats``: chats, assistants and their
sessions), written as a mixin over ``kbgraph.meta.database.Database``, so they all share one engine
and sessionmaker and every call stays ``meta.<method>(...)``. Every method is one short transaction
and returns frozen records (``kbgraph.meta.schemas``). Scoping: KB and chat calls take the tenant
id, document and task reads take the KB id, so one tenant never reaches another's rows through this
API. Calls keyed by a document or task id alone (status updates, cancel flags) are for workers that
got the id from a task they were handed.
"""

from __future__ import annotations

from kbgraph.meta.chats import ChatsMixin
from kbgraph.meta.database import open_engine
from kbgraph.meta.documents import DocumentsMixin
from kbgraph.meta.knowledge_bases import KnowledgeBasesMixin
from kbgraph.meta.schemas import DEFAULT_TENANT
from kbgraph.meta.providers import ProvidersMixin
from kbgraph.meta.tasks import TasksMixin
from kbgraph.meta.tenants import TenantsMixin
from kbgraph.meta.web_sessions import WebSessionsMixin


class MetaDB(TenantsMixin, WebSessionsMixin, ProvidersMixin, KnowledgeBasesMixin, DocumentsMixin, TasksMixin, ChatsMixin):
    """The metadata database. Open with ``MetaDB.open(settings.meta_url)``; thread-safe."""

    @classmethod
    def open(cls, url: str) -> MetaDB:
        """Connect, create missing tables and make sure the default tenant exists."""
        db = cls(open_engine(url))
        db.ensure_tenant(DEFAULT_TENANT)
        return db

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> MetaDB:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


__all__ = ["MetaDB"]
