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


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    # the factories pull in the openai SDK (~0.6 s): import them only when one is asked for,
    # so modules that need just the protocols above (and `kbgraph --help`) start fast
    if name in {"build_chat", "build_embedder", "require_chat"}:
        from kbgraph.llm import factory

        return getattr(factory, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "CancelCheck", "Cancelled", "ChatModel", "Embedder", "LLMError", "LLMNotConfigured",
    "Message", "Usage", "UsageLedger", "build_chat", "build_embedder", "require_chat",
]
