"""Build the chat model and the embedder from Settings, with their layers in place."""

from __future__ import annotations

from pathlib import Path

from kbgraph.config import Settings
from kbgraph.llm.base import ChatModel, Embedder, LLMNotConfigured, UsageLedger
from kbgraph.llm.embedders import CachedEmbedder, HashEmbedder, LocalEmbedder, OpenAIEmbedder
from kbgraph.llm.layers.accounting import AccountedChat
from kbgraph.llm.layers.base import ChatBase
from kbgraph.llm.layers.budget import BudgetedChat
from kbgraph.llm.layers.cache import CachedChat
from kbgraph.llm.layers.retry import RetryingChat, RetryPolicy
from kbgraph.llm.layers.slots import LimitedChat
from kbgraph.llm.limits import PROCESS_LIMITS, CallLimits


def build_chat(settings: Settings, ledger: UsageLedger | None = None, cache: bool = True, *,
               backoff_base: float = 1.0, backoff_max: float = 30.0, kb_id: str = "",
               limits: CallLimits = PROCESS_LIMITS, advice: str = "") -> ChatModel | None:
    """The configured chat model, or None when no LLM is configured.

    Layers, outermost first: cache (optional) -> retry -> per-minute budget -> the knowledge base's
    concurrency limit (with ``kb_id``) -> the process's concurrency limit -> accounting -> HTTP.
    ``backoff_*`` shape the retry waits (seconds); tests shrink them. ``limits`` keeps the limits
    and the budget: in this process (default) or shared by several (kbgraph.llm.limits). ``advice``:
    what to check when nothing answers at the endpoint (default: the server's setting).
    """
    if not settings.llm_configured:
        return None
    # imported here: the openai package costs ~0.4 s to import, which a query without an LLM
    # (or with only a local embedder) should not pay
    from kbgraph.llm.openai_chat import OpenAIChat, setting_advice

    model: ChatBase = OpenAIChat(settings.llm_base_url, settings.llm_model, settings.llm_api_key,
                                 timeout=settings.llm_timeout,
                                 temperature=settings.llm_temperature,
                                 max_tokens=settings.llm_max_tokens or None,
                                 advice=advice or setting_advice("llm_base_url"))
    model = AccountedChat(model, ledger)
    model_key = f"{settings.llm_base_url}|{settings.llm_model}"
    model = LimitedChat(model, limits.slots(model_key, settings.llm_concurrency))
    if kb_id and settings.llm_kb_concurrency:
        model = LimitedChat(model, limits.slots(f"kb:{kb_id}|{model_key}", settings.llm_kb_concurrency))
    model = BudgetedChat(model, limits.budget(model_key, settings.llm_requests_per_minute,
                                              settings.llm_tokens_per_minute))
    model = RetryingChat(model, RetryPolicy(settings.llm_max_retries, backoff_base, backoff_max))
    if cache:
        model = CachedChat(model, settings.cache_path, ledger)
    return model


def require_chat(settings: Settings, ledger: UsageLedger | None = None, cache: bool = True, *,
                 backoff_base: float = 1.0, backoff_max: float = 30.0) -> ChatModel:
    """Like build_chat, but raise LLMNotConfigured (saying what to set) instead of returning None."""
    model = build_chat(settings, ledger, cache, backoff_base=backoff_base, backoff_max=backoff_max)
    if model is None:
        missing = [name for name, value in (("KBGRAPH_LLM_BASE_URL", settings.llm_base_url),
                                            ("KBGRAPH_LLM_MODEL", settings.llm_model)) if not value]
        raise LLMNotConfigured(
            "this needs a chat model, and none is configured (missing: " + ", ".join(missing)
            + "). Set KBGRAPH_LLM_BASE_URL (an OpenAI-compatible endpoint, e.g."
            " https://api.openai.com/v1 or http://localhost:11434/v1), KBGRAPH_LLM_MODEL and,"
            " if the endpoint needs one, KBGRAPH_LLM_API_KEY; or use the same keys without the"
            " KBGRAPH_ prefix, lower-cased, in kbgraph.toml.")
    return model


def build_embedder(settings: Settings, cache: bool = True, ledger: UsageLedger | None = None, *,
                   backoff_base: float = 1.0, backoff_max: float = 30.0) -> Embedder:
    """The configured embedder ("local", "openai" or "hash"), behind the vector cache.

    The "openai" provider uses embedding_base_url/embedding_api_key, falling back to the
    chat endpoint's llm_base_url/llm_api_key when embedding_base_url is empty.
    """
    inner: LocalEmbedder | OpenAIEmbedder | HashEmbedder
    provider = settings.embedding_provider
    if provider == "hash":
        inner = HashEmbedder(settings.embedding_dim, ledger=ledger)
    elif provider == "local":
        inner = LocalEmbedder(threads=settings.local_embedding_threads,
                              cache_root=Path(settings.embedding_model_cache).expanduser()
                              if settings.embedding_model_cache else None,
                              ledger=ledger)
    elif provider == "openai":
        from kbgraph.llm.openai_chat import setting_advice

        base_url = settings.embedding_base_url or settings.llm_base_url
        api_key = (settings.embedding_api_key if settings.embedding_base_url
                   else settings.embedding_api_key or settings.llm_api_key)
        if not base_url or not settings.embedding_model:
            raise LLMNotConfigured(
                "embedding_provider is 'openai' but no endpoint or model is set: set"
                " KBGRAPH_EMBEDDING_MODEL and KBGRAPH_EMBEDDING_BASE_URL (or KBGRAPH_LLM_BASE_URL),"
                " plus KBGRAPH_EMBEDDING_API_KEY if the endpoint needs one")
        inner = OpenAIEmbedder(base_url, settings.embedding_model, api_key,
                               batch_size=settings.embedding_batch_size,
                               concurrency=settings.embedding_concurrency,
                               timeout=settings.llm_timeout,
                               retry=RetryPolicy(settings.llm_max_retries, backoff_base,
                                                 backoff_max),
                               ledger=ledger,
                               advice=setting_advice("embedding_base_url" if settings.embedding_base_url
                                                     else "llm_base_url"))
    else:
        raise ValueError(f"unknown embedding_provider {provider!r}")
    # Hashing is cheaper than a cache lookup, so the hash embedder goes uncached.
    if cache and provider != "hash":
        return CachedEmbedder(inner, settings.cache_path, ledger)
    return inner


def build_embedder_for(settings: Settings, model_name: str, ledger: UsageLedger | None = None) -> Embedder:
    """An embedder for vectors made by ``model_name`` (a knowledge base's recorded model): the
    bundled model, a hash embedder of that size, or that model at the configured OpenAI-compatible
    endpoint. Raises LLMNotConfigured when none of these can produce it."""
    if model_name == LocalEmbedder.MODEL_NAME:
        return build_embedder(settings.replace(embedding_provider="local"), ledger=ledger)
    size = model_name.removeprefix("hash-")
    if model_name.startswith("hash-") and size.isdigit():
        return build_embedder(settings.replace(embedding_provider="hash", embedding_dim=int(size)), ledger=ledger)
    if settings.embedding_base_url or settings.llm_base_url:
        return build_embedder(settings.replace(embedding_provider="openai", embedding_model=model_name),
                              ledger=ledger)
    raise LLMNotConfigured("no local model of that name and no OpenAI-compatible embedding endpoint configured")


def build_provider_embedder(settings: Settings, base_url: str, api_key: str, model: str,
                            ledger: UsageLedger | None = None, *, advice: str = "") -> Embedder:
    """``model`` at a tenant's own OpenAI-compatible endpoint (a model provider), with the server's
    batching, concurrency, timeout and retries, behind the vector cache. ``advice``: what to check
    when nothing answers there (the provider's settings, not the server's)."""
    inner = OpenAIEmbedder(base_url, model, api_key, batch_size=settings.embedding_batch_size,
                           concurrency=settings.embedding_concurrency, timeout=settings.llm_timeout,
                           retry=RetryPolicy(settings.llm_max_retries, 1.0, 30.0), ledger=ledger, advice=advice)
    cached = CachedEmbedder(inner, settings.cache_path, ledger)
    # the cache is the server's, shared by every tenant: vectors are kept per endpoint, since two
    # providers may serve different models under one name (the requests still name ``model``)
    cached.model_name = f"{model}@{base_url}"
    return cached


def preload_embedder(embedder: Embedder) -> None:
    """Load a local model now (servers and workers do at start); remote and hash embedders have
    nothing to load."""
    load = getattr(embedder, "load", None)
    if load is not None:
        load()


__all__ = ["build_chat", "build_embedder", "build_embedder_for", "build_provider_embedder", "preload_embedder",
           "require_chat"]
