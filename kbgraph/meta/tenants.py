"""Tenants, their API keys and the web users who sign in to them.

A tenant owns knowledge bases and chats; an API key (stored as its sha256 only) and a web user
each lead to one tenant. ``tenant_row`` is the tenant lookup the other groups of tables use inside
their own transactions.
"""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

import kbgraph.meta.models as m
from kbgraph.meta.checks import check_email
from kbgraph.meta.database import Database, new_id, now_ms
from kbgraph.meta.schemas import AlreadyExists, ApiKey, MetaError, NotFound, Tenant, User


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def tenant_row(s: Session, tenant_id: str) -> m.Tenant:
    row = s.get(m.Tenant, tenant_id)
    if row is None:
        raise NotFound(f"tenant {tenant_id!r} does not exist")
    return row


class TenantsMixin(Database):
    """``MetaDB``'s calls on tenants, API keys and users."""

    # -- tenants and API keys ---------------------------------------------------------------

    def ensure_tenant(self, tenant_id: str, name: str = "") -> Tenant:
        if not isinstance(tenant_id, str) or not tenant_id.strip() or len(tenant_id) > 64:
            raise MetaError("tenant id must be a non-empty string of at most 64 characters")
        try:
            with self._write() as s:
                row = s.get(m.Tenant, tenant_id)
                if row is None:
                    row = m.Tenant(id=tenant_id, name=name or tenant_id, created=now_ms())
                    s.add(row)
        except IntegrityError:  # created concurrently by another process: it is there now
            return self.get_tenant(tenant_id)
        return Tenant.model_validate(row)

    def list_tenants(self) -> list[Tenant]:
        with self._read() as s:
            return [Tenant.model_validate(r) for r in s.scalars(select(m.Tenant).order_by(m.Tenant.id))]

    def get_tenant(self, tenant_id: str) -> Tenant:
        with self._read() as s:
            return Tenant.model_validate(tenant_row(s, tenant_id))

    def create_api_key(self, tenant_id: str, name: str = "") -> tuple[ApiKey, str]:
        """A new key for ``tenant_id``: the record and the token, which is shown only this once."""
        token = "kbgraph-" + secrets.token_urlsafe(32)
        with self._write() as s:
            tenant_row(s, tenant_id)
            row = m.ApiKey(token_hash=_token_hash(token), tenant_id=tenant_id, name=name, created=now_ms())
            s.add(row)
        return ApiKey.model_validate(row), token

    def tenant_for_api_key(self, token: str) -> str | None:
        with self._read() as s:
            row = s.get(m.ApiKey, _token_hash(token))
            return row.tenant_id if row else None

    def list_api_keys(self, tenant_id: str) -> list[ApiKey]:
        with self._read() as s:
            rows = s.scalars(select(m.ApiKey).where(m.ApiKey.tenant_id == tenant_id).order_by(m.ApiKey.created))
            return [ApiKey.model_validate(r) for r in rows]

    def delete_api_key(self, tenant_id: str, token_hash: str) -> bool:
        with self._write() as s:
            result = s.execute(
                delete(m.ApiKey).where(m.ApiKey.tenant_id == tenant_id, m.ApiKey.token_hash == token_hash)
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    # -- users ------------------------------------------------------------------------------

    def create_user(self, email: str, password_hash: str, tenant_id: str) -> User:
        """A web user in ``tenant_id`` (created if missing); ``password_hash`` is already hashed."""
        email = check_email(email)
        if not password_hash:
            raise MetaError("a user needs a password hash")
        self.ensure_tenant(tenant_id, email)
        try:
            with self._write() as s:
                if s.scalar(select(m.User.id).where(m.User.email == email)) is not None:
                    raise AlreadyExists(f"an account for {email} already exists")
                row = m.User(id=new_id(), email=email, password_hash=password_hash, tenant_id=tenant_id,
                             created=now_ms())
                s.add(row)
        except IntegrityError:  # registered concurrently
            raise AlreadyExists(f"an account for {email} already exists") from None
        return User.model_validate(row)

    def set_user_tenant(self, email: str, tenant_id: str) -> tuple[User, str]:
        """Move a web user to an existing tenant (an administrator linking an account to a tenant that
        API keys or the CLI made); returns the user and the tenant it leaves, whose rows stay."""
        with self._write() as s:
            tenant_row(s, tenant_id)
            row = s.scalar(select(m.User).where(m.User.email == email.strip().lower()))
            if row is None:
                raise NotFound(f"no account for {email.strip().lower()}")
            before, row.tenant_id = row.tenant_id, tenant_id
        return User.model_validate(row), before

    def list_users(self) -> list[User]:
        with self._read() as s:
            return [User.model_validate(r) for r in s.scalars(select(m.User).order_by(m.User.email))]

    def find_user_by_email(self, email: str) -> User | None:
        with self._read() as s:
            row = s.scalar(select(m.User).where(m.User.email == email.strip().lower()))
            return User.model_validate(row) if row else None

    def find_user(self, user_id: str) -> User | None:
        with self._read() as s:
            row = s.get(m.User, user_id)
            return User.model_validate(row) if row else None
