"""The metadata database: tenants, API keys, knowledge bases, documents, tasks and chats.

SQLite in the data dir by default (embedded mode), PostgreSQL when ``KBGRAPH_DATABASE_URL`` says
so. Callers use ``MetaDB`` and get frozen records back::

    db = MetaDB.open(settings.meta_url)
    kb = db.get_kb_by_name(DEFAULT_TENANT, "demo") or db.create_kb(DEFAULT_TENANT, "demo", ...)
    doc, changed = db.upsert_document(kb.id, "a.txt", "/docs/a.txt", size, sha256_hex)
"""

from kbgraph.meta.checks import MAX_CHUNK_TOKENS
from kbgraph.meta.database import database_revision, upgrade_database
from kbgraph.meta.documents import DocumentFile, DocumentStatus
from kbgraph.meta.migrate import HEAD as SCHEMA_HEAD
from kbgraph.meta.migrate import history as schema_history
from kbgraph.meta.repo import MetaDB
from kbgraph.meta.schemas import (
    DEFAULT_ENTITY_TYPES,
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
    GraphMethod,
    KBCounts,
    KnowledgeBase,
    MetaError,
    ModelProvider,
    NotFound,
    Status,
    Task,
    Tenant,
    User,
    graph_config,
)

__all__ = [
    "DEFAULT_ENTITY_TYPES",
    "DEFAULT_TENANT",
    "FINISHED",
    "MAX_CHUNK_TOKENS",
    "SCHEMA_HEAD",
    "STATUSES",
    "AlreadyExists",
    "ApiKey",
    "Assistant",
    "Chat",
    "ChatSession",
    "Document",
    "DocumentFile",
    "DocumentStatus",
    "GraphConfig",
    "GraphMethod",
    "KBCounts",
    "KnowledgeBase",
    "MetaDB",
    "MetaError",
    "ModelProvider",
    "NotFound",
    "Status",
    "Task",
    "Tenant",
    "User",
    "database_revision",
    "graph_config",
    "schema_history",
    "upgrade_database",
]
