"""Web sign-ins kept on the server: a signed-in browser holds a random token in its (signed) session
cookie, the database holds the token's sha256 and the user. Signing out deletes the row, so the same
cookie, copied or replayed, no longer signs anybody in."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import delete, select

import kbgraph.meta.models as m
from kbgraph.meta.database import Database, now_ms
from kbgraph.meta.schemas import NotFound, User


def _session_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class WebSessionsMixin(Database):
    """``MetaDB``'s calls on web sessions."""

    def create_web_session(self, user_id: str, max_age_ms: int) -> str:
        """A new session of ``user_id``; returns its token (kept only by the browser). Sessions older
        than ``max_age_ms`` (the cookie's lifetime: abandoned, never signed out) go at the same time."""
        token = secrets.token_urlsafe(32)
        now = now_ms()
        with self._write() as s:
            if s.get(m.User, user_id) is None:
                raise NotFound(f"user {user_id!r} does not exist")
            s.execute(delete(m.WebSession).where(m.WebSession.created < now - max_age_ms))
            s.add(m.WebSession(token_hash=_session_hash(token), user_id=user_id, created=now))
        return token

    def user_for_web_session(self, token: str, max_age_ms: int) -> User | None:
        """The user a live session belongs to (None: signed out, older than ``max_age_ms``, unknown,
        or the user is gone)."""
        with self._read() as s:
            row = s.scalar(select(m.User).join(m.WebSession, m.WebSession.user_id == m.User.id)
                           .where(m.WebSession.token_hash == _session_hash(token),
                                  m.WebSession.created >= now_ms() - max_age_ms))
            return User.model_validate(row) if row else None

    def delete_web_session(self, token: str) -> bool:
        with self._write() as s:
            result = s.execute(delete(m.WebSession).where(m.WebSession.token_hash == _session_hash(token)))
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def delete_user_web_sessions(self, user_id: str) -> int:
        """Sign a user out everywhere; returns how many sessions ended."""
        with self._write() as s:
            result = s.execute(delete(m.WebSession).where(m.WebSession.user_id == user_id))
            return int(result.rowcount)  # type: ignore[attr-defined]
