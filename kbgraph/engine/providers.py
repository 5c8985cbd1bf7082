"""Tenants' model providers in use: their API keys sealed at rest (Fernet, AES-128-CBC with an HMAC,
from ``cryptography``; the key derived from setting ``provider_key_secret``) and a model named
``model@provider`` turned into the settings of that provider's endpoint.

A name whose ``@`` suffix is no provider of the tenant is left alone: RAGFlow's own ``name@factory``
form (``gpt-4o-mini@OpenAI``) still means the server's configured endpoint.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from kbgraph.config import Settings
from kbgraph.engine.errors import KBGraphError
from kbgraph.meta import MetaDB, ModelProvider


def _secret(settings: Settings) -> str:
    if settings.provider_key_secret:
        return settings.provider_key_secret
    path = settings.data_dir / "provider_key_secret"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".provider_key_secret-{secrets.token_hex(8)}")
        partial.write_text(secrets.token_urlsafe(48), encoding="utf-8")
        partial.chmod(0o600)
        try:  # of several processes starting at once, exactly one secret wins
            os.link(partial, path)
        except FileExistsError:
            pass
        finally:
            partial.unlink()
    return Path(path).read_text(encoding="utf-8").strip()


def _box(settings: Settings) -> Fernet:
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(_secret(settings).encode("utf-8")).digest()))


def seal_key(settings: Settings, api_key: str) -> str:
    return _box(settings).encrypt(api_key.encode("utf-8")).decode("ascii") if api_key else ""


def unseal_key(settings: Settings, sealed: str) -> str:
    if not sealed:
        return ""
    try:
        return _box(settings).decrypt(sealed.encode("ascii")).decode("utf-8")
    except InvalidToken:
        raise KBGraphError("a model provider's key cannot be read: setting provider_key_secret differs from the one "
                           "it was stored with; set it back, or add the provider again") from None


def split_model(name: str) -> tuple[str, str]:
    """(model, provider name) of ``model@provider``; ("", "") when there is no ``@``."""
    model, at, provider = name.rpartition("@")
    return (model.strip(), provider.strip()) if at else ("", "")


def provider_of(meta: MetaDB, tenant: str, name: str) -> tuple[ModelProvider, str] | None:
    """The tenant's provider a ``model@provider`` name points at, and the model; None otherwise."""
    model, provider = split_model(name)
    if not model or not provider:
        return None
    found = meta.find_provider(tenant, provider)
    return (found, model) if found is not None else None


def provider_settings(settings: Settings, provider: ModelProvider, model: str) -> dict[str, str]:
    """The LLM settings of one of a provider's chat models."""
    return {"llm_base_url": provider.base_url, "llm_api_key": unseal_key(settings, provider.api_key_sealed),
            "llm_model": model}


def resolved_llm(settings: Settings, meta: MetaDB, tenant: str, llm: dict[str, str]) -> dict[str, str]:
    """A knowledge base's LLM settings with a ``model@provider`` model turned into that provider's
    endpoint, key and model (other names are left as they are)."""
    named = provider_of(meta, tenant, llm.get("llm_model") or "")
    return {**llm, **provider_settings(settings, *named)} if named is not None else llm
