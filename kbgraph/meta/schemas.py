"""What the metadata database hands out: frozen pydantic records, never live ORM rows.

Records are detached snapshots, safe to pass between threads and to serialize (``model_dump``).
Times are integer milliseconds since the epoch.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

DEFAULT_TENANT = "default"
DEFAULT_ENTITY_TYPES: tuple[str, ...] = ("organization", "person", "geo", "event", "category")

GraphMethod = Literal["general", "light", "nlp"]
Status = Literal["pending", "running", "done", "failed", "cancelled"]
STATUSES: tuple[str, ...] = ("pending", "running", "done", "failed", "cancelled")
FINISHED: frozenset[str] = frozenset({"done", "failed", "cancelled"})


class MetaError(Exception):
    """A metadata operation cannot be done; the message says why in user terms."""


class NotFound(MetaError):
    """The tenant, knowledge base, document, task or chat does not exist (for this tenant/KB)."""


class AlreadyExists(MetaError):
    """A name is taken: knowledge base names are unique per tenant, document names per KB."""


class GraphConfig(BaseModel):
    """A knowledge base's knowledge-graph settings (stored as JSON on the KB row)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = False
    method: GraphMethod = "nlp"
    entity_types: tuple[str, ...] = DEFAULT_ENTITY_TYPES
    resolution: bool = False
    community: bool = False
    max_gleanings: int = Field(default=1, ge=0, le=10)

    @field_validator("entity_types", mode="before")
    @classmethod
    def _entity_types(cls, value: Any) -> Any:
        # a bare string would otherwise be accepted as a sequence of one-letter types
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ValueError("entity_types must be a list of strings")
        cleaned = []
        for item in value:
            if not isinstance(item, str) or not item.strip():
                raise ValueError("entity_types must hold non-empty strings")
            if item.strip() not in cleaned:
                cleaned.append(item.strip())
        if not cleaned:
            raise ValueError("entity_types must not be empty")
        return tuple(cleaned)


def graph_config(value: GraphConfig | dict[str, Any] | None) -> GraphConfig:
    """``value`` as a GraphConfig; bad settings raise MetaError naming the field."""
    if value is None:
        return GraphConfig()
    if isinstance(value, GraphConfig):
        return value
    try:
        return GraphConfig.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'graph'}: {err['msg']}" for err in exc.errors()
        )
        raise MetaError(f"invalid graph settings: {problems}") from None


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, from_attributes=True)


class Tenant(_Record):
    id: str
    name: str
    created: int


class ModelProvider(_Record):
    id: str
    tenant_id: str
    name: str
    base_url: str
    api_key_sealed: str
    chat_models: list[str]
    embedding_models: list[str]
    created: int


class ApiKey(_Record):
    token_hash: str
    tenant_id: str
    name: str
    created: int


class User(_Record):
    id: str
    email: str
    password_hash: str
    tenant_id: str
    created: int


class KnowledgeBase(_Record):
    id: str
    tenant_id: str
    name: str
    description: str
    embedding_model: str
    chunk_tokens: int
    chunk_overlap: int
    graph: GraphConfig
    extra: dict[str, Any]
    created: int
    updated: int


class KBCounts(_Record):
    documents: int
    chunks: int
    tokens: int


class Document(_Record):
    id: str
    kb_id: str
    name: str
    location: str
    size: int
    content_hash: str
    status: Status
    progress: float
    message: str
    error: str | None
    chunk_count: int
    token_count: int
    enabled: bool
    extracted: bool
    graph_version: int
    run_id: str | None = None
    extra: dict[str, Any]
    created: int
    updated: int
    started: int | None
    finished: int | None


class Task(_Record):
    id: str
    kb_id: str
    doc_id: str | None
    kind: str
    status: Status
    progress: float
    message: str
    error: str | None
    attempts: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cancel_requested: bool
    created: int
    updated: int
    started: int | None
    finished: int | None


class Chat(_Record):
    id: str
    tenant_id: str
    name: str
    kb_ids: list[str]
    system_prompt: str
    retrieval: dict[str, Any]
    created: int
    updated: int


class Assistant(_Record):
    """A chat assistant: its knowledge bases, LLM settings, prompt settings and retrieval knobs.

    ``prompt_config`` keeps RAGFlow's keys (system, prologue, parameters, empty_response, quote,
    use_kg...); ``vector_similarity_weight`` is the vector share of the hybrid score."""

    id: str
    tenant_id: str
    name: str
    description: str
    icon: str
    language: str
    kb_ids: list[str]
    llm_id: str
    llm_setting: dict[str, Any]
    prompt_config: dict[str, Any]
    similarity_threshold: float
    vector_similarity_weight: float
    top_n: int
    top_k: int
    rerank_id: str
    do_refer: bool
    deleted: bool
    created: int
    updated: int


class ChatSession(_Record):
    """A conversation: ``messages`` ({role, content, id?, created_at?}) and one ``references`` entry
    (the retrieved chunks an answer's [ID:n] markers index) per assistant answer."""

    id: str
    assistant_id: str
    name: str
    user_id: str
    messages: list[dict[str, Any]]
    references: list[dict[str, Any]]
    created: int
    updated: int


__all__ = [
    "Assistant",
    "ChatSession",
    "DEFAULT_ENTITY_TYPES",
    "DEFAULT_TENANT",
    "FINISHED",
    "STATUSES",
    "AlreadyExists",
    "ApiKey",
    "Chat",
    "Document",
    "GraphConfig",
    "GraphMethod",
    "KBCounts",
    "KnowledgeBase",
    "MetaError",
    "NotFound",
    "Status",
    "Task",
    "Tenant",
    "User",
    "graph_config",
]
