"""Tenants' model providers: OpenAI-compatible endpoints (base URL, a key sealed by the caller, the
chat and embedding model names offered) that a tenant's assistants and knowledge bases may name as
``model@provider``. This module stores what it is given; sealing and unsealing keys is the caller's."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

import kbgraph.meta.models as m
from kbgraph.meta.database import Database, new_id, now_ms
from kbgraph.meta.schemas import AlreadyExists, MetaError, ModelProvider
from kbgraph.meta.tenants import tenant_row

# a provider's name ends a model's name after "@": letters, digits, - _ . only, no spaces or "@"
PROVIDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _model_names(names: Sequence[str], what: str) -> list[str]:
    out = list(dict.fromkeys(n.strip() for n in names if n.strip()))
    bad = [n for n in out if "@" in n or len(n) > 255]
    if bad:
        raise MetaError(f"{what} model names cannot hold '@' or run past 255 characters: {', '.join(bad)}")
    return out


class ProvidersMixin(Database):
    """``MetaDB``'s calls on model providers."""

    def add_provider(self, tenant_id: str, name: str, base_url: str, api_key_sealed: str, *,
                     chat_models: Sequence[str] = (), embedding_models: Sequence[str] = ()) -> ModelProvider:
        if not PROVIDER_NAME.fullmatch(name or ""):
            raise MetaError("a provider's name is 1-64 letters, digits, '-', '_' or '.', starting with a letter or digit")
        if not re.match(r"https?://[^\s/]+", base_url or ""):
            raise MetaError(f"the base URL must start with http:// or https:// and name a host, not {base_url!r}")
        chats, embeds = _model_names(chat_models, "chat"), _model_names(embedding_models, "embedding")
        try:
            with self._write() as s:
                tenant_row(s, tenant_id)
                if s.scalar(select(m.ModelProvider.id).where(m.ModelProvider.tenant_id == tenant_id,
                                                              m.ModelProvider.name == name)) is not None:
                    raise AlreadyExists(f"a provider named {name!r} exists already")
                row = m.ModelProvider(id=new_id(), tenant_id=tenant_id, name=name, base_url=base_url.rstrip("/"),
                                      api_key_sealed=api_key_sealed, chat_models=chats, embedding_models=embeds,
                                      created=now_ms())
                s.add(row)
        except IntegrityError:
            raise AlreadyExists(f"a provider named {name!r} exists already") from None
        return ModelProvider.model_validate(row)

    def list_providers(self, tenant_id: str) -> list[ModelProvider]:
        with self._read() as s:
            rows = s.scalars(select(m.ModelProvider).where(m.ModelProvider.tenant_id == tenant_id)
                             .order_by(m.ModelProvider.name))
            return [ModelProvider.model_validate(r) for r in rows]

    def find_provider(self, tenant_id: str, name: str) -> ModelProvider | None:
        with self._read() as s:
            row = s.scalar(select(m.ModelProvider).where(m.ModelProvider.tenant_id == tenant_id,
                                                          m.ModelProvider.name == name))
            return ModelProvider.model_validate(row) if row else None

    def delete_provider(self, tenant_id: str, name: str) -> bool:
        with self._write() as s:
            result = s.execute(delete(m.ModelProvider).where(m.ModelProvider.tenant_id == tenant_id,
                                                             m.ModelProvider.name == name))
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def reseal_provider_keys(self, reseal: Callable[[ModelProvider], str | None]) -> int:
        """Every tenant's provider keys replaced by ``reseal(provider)`` (None: left as it is), in one
        transaction: a key rotation moves all keys or none. Returns the keys replaced."""
        changed = 0
        with self._write() as s:
            for row in s.scalars(select(m.ModelProvider).where(m.ModelProvider.api_key_sealed != "")
                                 .order_by(m.ModelProvider.tenant_id, m.ModelProvider.name)):
                again = reseal(ModelProvider.model_validate(row))
                if again is not None and again != row.api_key_sealed:
                    row.api_key_sealed = again
                    changed += 1
        return changed
