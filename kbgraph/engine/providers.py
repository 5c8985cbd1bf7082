"""Tenants' model providers in use: their API keys sealed at rest (Fernet, AES-128-CBC with an HMAC,
from ``cryptography``; the key derived from setting ``provider_key_secret``; keys sealed with an
earlier secret stay readable while it is listed in ``provider_key_previous_secrets``, and
``reseal_keys`` moves them to the current one) and a model named ``model@provider`` turned into the
settings of that provider's endpoint (a chat model) or checked against its embedding models.

A name whose ``@`` suffix is no provider of the tenant is left alone: RAGFlow's own ``name@factory``
form (``gpt-4o-mini@OpenAI``) still means the server's configured endpoint.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

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


def _fernet(secret: str) -> Fernet:
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(secret.encode("utf-8")).digest()))


def previous_secrets(settings: Settings) -> list[str]:
    """The secrets of ``provider_key_previous_secrets`` (comma-separated), in the order given."""
    return [s.strip() for s in settings.provider_key_previous_secrets.split(",") if s.strip()]


def _generated_secret(settings: Settings) -> list[str]:
    """The secret made for this data folder before provider_key_secret was set, if any: keys sealed
    with it stay readable when an operator sets one."""
    path = settings.data_dir / "provider_key_secret"
    return [path.read_text(encoding="utf-8").strip()] if settings.provider_key_secret and path.exists() else []


def _box(settings: Settings) -> MultiFernet:
    """Seals with the current secret; opens what the current or any previous secret sealed."""
    older = [*previous_secrets(settings), *_generated_secret(settings)]
    return MultiFernet([_fernet(_secret(settings)), *(_fernet(s) for s in older)])


UNREADABLE = ("a model provider's key cannot be read: it was sealed with another secret than setting "
              "provider_key_secret (KBGRAPH_PROVIDER_KEY_SECRET){previous}; set the secret it was sealed with back, "
              "or list it in provider_key_previous_secrets (KBGRAPH_PROVIDER_KEY_PREVIOUS_SECRETS), or add the "
              "provider again")


def _unreadable(settings: Settings) -> KBGraphError:
    count = len(previous_secrets(settings))
    previous = f" and the {count} listed in provider_key_previous_secrets" if count else ""
    return KBGraphError(UNREADABLE.format(previous=previous))


def seal_key(settings: Settings, api_key: str) -> str:
    return _box(settings).encrypt(api_key.encode("utf-8")).decode("ascii") if api_key else ""


def unseal_key(settings: Settings, sealed: str) -> str:
    if not sealed:
        return ""
    try:
        return _box(settings).decrypt(sealed.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError):
        raise _unreadable(settings) from None


def reseal_key(settings: Settings, sealed: str) -> str:
    """``sealed`` sealed again with the current secret (raises KBGraphError when no secret opens it)."""
    if not sealed:
        return ""
    try:
        return _box(settings).rotate(sealed.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeError):
        raise _unreadable(settings) from None


def reseal_keys(settings: Settings, meta: MetaDB) -> tuple[int, list[str]]:
    """Every tenant's provider keys sealed again with the current secret, so the previous secrets can
    be dropped from the settings. Returns (keys resealed, "tenant/provider" of those no secret opens,
    which are left as they are)."""
    unreadable: list[str] = []

    def again(provider: ModelProvider) -> str | None:
        try:
            return reseal_key(settings, provider.api_key_sealed)
        except KBGraphError:
            unreadable.append(f"{provider.tenant_id}/{provider.name}")
            return None

    return meta.reseal_provider_keys(again), unreadable


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


def embedding_provider_of(meta: MetaDB, tenant: str, name: str) -> tuple[ModelProvider, str] | None:
    """The tenant's provider and model a ``model@provider`` embedding name points at, when that
    provider lists the model among its embedding models; None otherwise."""
    named = provider_of(meta, tenant, name)
    return named if named is not None and named[1] in named[0].embedding_models else None


def embedding_choice(meta: MetaDB, tenant: str, name: str, default_model: str) -> str | None:
    """What a knowledge base records for an embedding model a user names: ``model@provider`` for one
    of the tenant's providers' embedding models; the server's model (``default_model``) when the
    name is it, bare or as RAGFlow's ``name@factory``; None when it is neither."""
    name = name.strip()
    named = embedding_provider_of(meta, tenant, name)
    if named is not None:
        return f"{named[1]}@{named[0].name}"
    bare = name.split("@", 1)[0].strip()
    return default_model if bare == default_model else None


def provider_advice(name: str) -> str:
    """What to check when nothing answers at a provider's endpoint: its settings, not the server's."""
    return f"check the base URL of your model provider {name!r} (settings page, Model providers)"


def resolved_llm(settings: Settings, meta: MetaDB, tenant: str, llm: dict[str, str]) -> dict[str, str]:
    """A knowledge base's LLM settings with a ``model@provider`` model turned into that provider's
    endpoint, key and model (other names are left as they are)."""
    named = provider_of(meta, tenant, llm.get("llm_model") or "")
    return {**llm, **provider_settings(settings, *named)} if named is not None else llm
