"""Chat and embedding models behind one small interface; see base.py and factory.py."""

from kbgraph.llm.base import (
    CancelCheck,
    Cancelled,
    ChatModel,
    Embedder,
    LLMError,
    LLMNotConfigured,
    Message,
    Usage,
    UsageLedger,
)
from kbgraph.llm.factory import build_chat, build_embedder, require_chat

__all__ = [
    "CancelCheck", "Cancelled", "ChatModel", "Embedder", "LLMError", "LLMNotConfigured",
    "Message", "Usage", "UsageLedger", "build_chat", "build_embedder", "require_chat",
]
