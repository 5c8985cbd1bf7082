"""Model selection: the engine's embedder (or the one a knowledge base was indexed with, which it
keeps until it is re-embedded, or a ``model@provider`` of one of the tenant's providers, at that
provider's endpoint with its key) and its chat models (the configured one, with a knowledge base's own
LLM settings or an assistant's model on top), each built on first use and kept."""

from __future__ import annotations

from kbgraph.config import Settings
from kbgraph.engine.errors import KBGraphError
from kbgraph.llm.base import ChatModel, Embedder, UsageLedger
from kbgraph.llm.limits import CallLimits
from kbgraph.meta import MetaDB
from kbgraph.meta.schemas import KnowledgeBase


class ModelSelection:
    """The models part of ``Engine`` (kbgraph/engine/engine.py sets the attributes declared here)."""

    settings: Settings
    meta: MetaDB
    tenant: str
    ledger: UsageLedger
    # the chat model's concurrency limits and budgets (see Engine.__init__)
    limits: CallLimits
    _embedder: Embedder | None
    _kb_embedders: dict[str, Embedder]
    _chats: dict[tuple[tuple[tuple[str, str], ...], str], ChatModel | None]

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from kbgraph.llm.factory import build_embedder

            self._embedder = build_embedder(self.settings, ledger=self.ledger)
        return self._embedder

    def embedder_for(self, kb: KnowledgeBase) -> Embedder:
        """The model a knowledge base was indexed with: one of the tenant's providers' models, or a
        model of the server's, which it keeps when the configured one changes, until ``reembed_kb``
        moves it to the configured one."""
        model = kb.embedding_model
        if "@" in model:  # provider names hold no "@", the server's models none either
            return self._provider_embedder(kb)
        if not model or model == self.embedder.model_name:
            return self.embedder
        if model not in self._kb_embedders:
            from kbgraph.llm.base import LLMNotConfigured
            from kbgraph.llm.factory import build_embedder_for

            try:
                self._kb_embedders[model] = build_embedder_for(self.settings, model, ledger=self.ledger)
            except LLMNotConfigured as exc:
                raise KBGraphError(
                    f"knowledge base {kb.name!r} was indexed with embedding model {model!r}, which cannot run "
                    f"here ({exc}); re-embed it with the configured model {self.embedder.model_name!r}: "
                    f"`kbgraph kb reembed {kb.name}`") from None
        return self._kb_embedders[model]

    def _provider_embedder(self, kb: KnowledgeBase) -> Embedder:
        """A knowledge base's ``model@provider`` at that provider's endpoint, with its key; built again
        when the provider changes (removed and added again with another URL or key)."""
        from kbgraph.engine.providers import provider_advice, provider_of, unseal_key

        named = provider_of(self.meta, self.tenant, kb.embedding_model)
        if named is None:
            raise KBGraphError(
                f"knowledge base {kb.name!r} embeds with {kb.embedding_model!r}, and you have no model provider "
                f"named {kb.embedding_model.rpartition('@')[2]!r} any more; add it again (same name, same model) "
                "on the settings page")
        provider, model = named
        key = f"{kb.embedding_model}|{provider.base_url}|{provider.api_key_sealed}"
        if key not in self._kb_embedders:
            from kbgraph.llm.factory import build_provider_embedder

            self._kb_embedders[key] = build_provider_embedder(
                self.settings, provider.base_url, unseal_key(self.settings, provider.api_key_sealed), model,
                ledger=self.ledger, advice=provider_advice(provider.name))
        return self._kb_embedders[key]

    @property
    def chat(self) -> ChatModel | None:
        """The configured chat model (None without an LLM)."""
        return self.chat_for(None)

    def chat_for(self, kb: KnowledgeBase | None, model: str = "") -> ChatModel | None:
        """The chat model for a knowledge base: the engine's, with the KB's own LLM settings on top;
        ``model`` names another model of the same endpoint (a chat assistant's own choice), or, as
        ``model@provider``, a model of one of the tenant's providers (kbgraph/engine/providers.py)."""
        from kbgraph.engine.providers import provider_advice, provider_of, provider_settings, resolved_llm

        kb_llm = dict(kb.extra.get("llm") or {}) if kb is not None else {}
        wanted = resolved_llm(self.settings, self.meta, self.tenant, kb_llm) if kb is not None else {}
        advice = ""
        if wanted.get("llm_model") != kb_llm.get("llm_model"):  # the KB's model is one of a provider's
            advice = provider_advice(kb_llm["llm_model"].rpartition("@")[2])
        if "@" in model:
            named = provider_of(self.meta, self.tenant, model)
            if named is not None:
                wanted.update(provider_settings(self.settings, *named))
                advice = provider_advice(named[0].name)
                model = ""
            else:  # RAGFlow's name@factory: a model of the configured endpoint
                model = model.rsplit("@", 1)[0].strip()
        if model and self.settings.llm_configured and model != wanted.get("llm_model", self.settings.llm_model):
            wanted["llm_model"] = model
        overrides = tuple(sorted(wanted.items()))
        key = (overrides, kb.id if kb is not None else "")
        # the advice follows from the overrides (a provider's endpoint), so the key need not hold it
        if key not in self._chats:
            from kbgraph.llm.factory import build_chat

            # a knowledge base's chat has its own concurrency limit inside the process-wide one
            self._chats[key] = build_chat(self.settings.replace(**dict(overrides)), ledger=self.ledger, kb_id=key[1],
                                          limits=self.limits, advice=advice)
        return self._chats[key]
