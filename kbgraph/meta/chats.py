"""Chats: the plain chats (a prompt over knowledge bases), and the RAGFlow-style chat assistants
with their sessions (the conversations, message by message, with each answer's reference).

A deleted assistant is only marked deleted: its sessions stay, unreachable, as RAGFlow keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

import kbgraph.meta.models as m
from kbgraph.meta.checks import check_assistant_fields, check_name
from kbgraph.meta.database import Database, new_id, now_ms
from kbgraph.meta.knowledge_bases import check_kb_ids
from kbgraph.meta.schemas import Assistant, Chat, ChatSession, NotFound
from kbgraph.meta.tenants import tenant_row


def chat_row(s: Session, tenant_id: str, chat_id: str, *, lock: bool = False) -> m.Chat:
    query = select(m.Chat).where(m.Chat.id == chat_id, m.Chat.tenant_id == tenant_id)
    row = s.scalar(query.with_for_update() if lock else query)
    if row is None:
        raise NotFound(f"chat {chat_id!r} does not exist")
    return row


def assistant_row(s: Session, tenant_id: str, assistant_id: str, *, lock: bool = False) -> m.Assistant:
    query = select(m.Assistant).where(m.Assistant.id == assistant_id, m.Assistant.tenant_id == tenant_id,
                                      m.Assistant.deleted.is_(False))
    row = s.scalar(query.with_for_update() if lock else query)
    if row is None:
        raise NotFound(f"chat {assistant_id!r} does not exist")
    return row


def session_row(s: Session, tenant_id: str, assistant_id: str, session_id: str, *,
                lock: bool = False) -> m.ChatSession:
    assistant_row(s, tenant_id, assistant_id)
    query = select(m.ChatSession).where(m.ChatSession.id == session_id, m.ChatSession.assistant_id == assistant_id)
    row = s.scalar(query.with_for_update() if lock else query)
    if row is None:
        raise NotFound(f"session {session_id!r} does not exist")
    return row


class ChatsMixin(Database):
    """``MetaDB``'s calls on chats, chat assistants and their sessions."""

    # -- chats ------------------------------------------------------------------------------

    def create_chat(
        self,
        tenant_id: str,
        name: str,
        *,
        kb_ids: Sequence[str] = (),
        system_prompt: str = "",
        retrieval: dict[str, Any] | None = None,
    ) -> Chat:
        name = check_name(name, "chat", 255)
        now = now_ms()
        with self._write() as s:
            tenant_row(s, tenant_id)
            check_kb_ids(s, tenant_id, kb_ids)
            row = m.Chat(
                id=new_id(),
                tenant_id=tenant_id,
                name=name,
                kb_ids=list(kb_ids),
                system_prompt=system_prompt,
                retrieval=dict(retrieval or {}),
                created=now,
                updated=now,
            )
            s.add(row)
        return Chat.model_validate(row)

    def get_chat(self, tenant_id: str, chat_id: str) -> Chat:
        with self._read() as s:
            return Chat.model_validate(chat_row(s, tenant_id, chat_id))

    def list_chats(self, tenant_id: str) -> list[Chat]:
        with self._read() as s:
            rows = s.scalars(select(m.Chat).where(m.Chat.tenant_id == tenant_id).order_by(m.Chat.created, m.Chat.id))
            return [Chat.model_validate(r) for r in rows]

    def update_chat(
        self,
        tenant_id: str,
        chat_id: str,
        *,
        name: str | None = None,
        kb_ids: Sequence[str] | None = None,
        system_prompt: str | None = None,
        retrieval: dict[str, Any] | None = None,
    ) -> Chat:
        with self._write() as s:
            row = chat_row(s, tenant_id, chat_id, lock=True)
            if name is not None:
                row.name = check_name(name, "chat", 255)
            if kb_ids is not None:
                check_kb_ids(s, tenant_id, kb_ids)
                row.kb_ids = list(kb_ids)
            if system_prompt is not None:
                row.system_prompt = system_prompt
            if retrieval is not None:
                row.retrieval = dict(retrieval)
            row.updated = now_ms()
        return Chat.model_validate(row)

    def delete_chat(self, tenant_id: str, chat_id: str) -> None:
        with self._write() as s:
            result = s.execute(delete(m.Chat).where(m.Chat.tenant_id == tenant_id, m.Chat.id == chat_id))
            if not result.rowcount:  # type: ignore[attr-defined]
                raise NotFound(f"chat {chat_id!r} does not exist")

    # -- chat assistants and their sessions ------------------------------------------------

    def create_assistant(self, tenant_id: str, name: str, **fields: Any) -> Assistant:
        """A new assistant; ``fields`` are Assistant columns (kb_ids, llm_setting, prompt_config, top_n...)."""
        name = check_name(name, "chat", 255)
        check_assistant_fields(fields)
        now = now_ms()
        with self._write() as s:
            tenant_row(s, tenant_id)
            check_kb_ids(s, tenant_id, fields.get("kb_ids", []))
            row = m.Assistant(id=new_id(), tenant_id=tenant_id, name=name, name_key=name.casefold(), kb_ids=[],
                              llm_setting={}, prompt_config={}, deleted=False, created=now, updated=now)
            for key, value in fields.items():
                setattr(row, key, value)
            s.add(row)
            s.flush()
        return Assistant.model_validate(row)

    def get_assistant(self, tenant_id: str, assistant_id: str) -> Assistant:
        with self._read() as s:
            return Assistant.model_validate(assistant_row(s, tenant_id, assistant_id))

    def find_assistant(self, tenant_id: str, name: str) -> Assistant | None:
        """The tenant's live assistant called ``name`` (ignoring case), or None."""
        with self._read() as s:
            row = s.scalar(select(m.Assistant).where(
                m.Assistant.tenant_id == tenant_id, m.Assistant.name_key == name.strip().casefold(),
                m.Assistant.deleted.is_(False)).limit(1))
            return Assistant.model_validate(row) if row else None

    def list_assistants(self, tenant_id: str) -> list[Assistant]:
        with self._read() as s:
            rows = s.scalars(select(m.Assistant).where(m.Assistant.tenant_id == tenant_id, m.Assistant.deleted.is_(False))
                             .order_by(m.Assistant.created, m.Assistant.id))
            return [Assistant.model_validate(r) for r in rows]

    def update_assistant(self, tenant_id: str, assistant_id: str, *, name: str | None = None,
                         **fields: Any) -> Assistant:
        check_assistant_fields(fields)
        with self._write() as s:
            row = assistant_row(s, tenant_id, assistant_id, lock=True)
            if name is not None:
                row.name = check_name(name, "chat", 255)
                row.name_key = row.name.casefold()
            if "kb_ids" in fields:
                check_kb_ids(s, tenant_id, fields["kb_ids"])
            for key, value in fields.items():
                setattr(row, key, value)
            row.updated = now_ms()
        return Assistant.model_validate(row)

    def delete_assistant(self, tenant_id: str, assistant_id: str) -> None:
        """Mark the assistant deleted (its sessions stay, unreachable, as RAGFlow keeps them)."""
        with self._write() as s:
            row = assistant_row(s, tenant_id, assistant_id, lock=True)
            row.deleted, row.updated = True, now_ms()

    def create_session(self, tenant_id: str, assistant_id: str, name: str, *, user_id: str = "",
                       messages: Sequence[dict[str, Any]] = ()) -> ChatSession:
        name = check_name(name, "session", 255)
        now = now_ms()
        with self._write() as s:
            assistant_row(s, tenant_id, assistant_id)
            row = m.ChatSession(id=new_id(), assistant_id=assistant_id, name=name, user_id=user_id or "",
                                messages=[dict(x) for x in messages], references=[], created=now, updated=now)
            s.add(row)
            s.flush()
        return ChatSession.model_validate(row)

    def get_session(self, tenant_id: str, assistant_id: str, session_id: str) -> ChatSession:
        with self._read() as s:
            return ChatSession.model_validate(session_row(s, tenant_id, assistant_id, session_id))

    def session_of_deleted_assistant(self, tenant_id: str, assistant_id: str, session_id: str) -> bool:
        """Whether this is a session kept under one of the tenant's deleted assistants."""
        with self._read() as s:
            found = s.scalar(select(m.ChatSession.id).join(m.Assistant, m.Assistant.id == m.ChatSession.assistant_id)
                             .where(m.ChatSession.id == session_id, m.Assistant.id == assistant_id,
                                    m.Assistant.tenant_id == tenant_id, m.Assistant.deleted.is_(True)))
            return found is not None

    def list_sessions(self, tenant_id: str, assistant_id: str) -> list[ChatSession]:
        with self._read() as s:
            assistant_row(s, tenant_id, assistant_id)
            rows = s.scalars(select(m.ChatSession).where(m.ChatSession.assistant_id == assistant_id)
                             .order_by(m.ChatSession.created, m.ChatSession.id))
            return [ChatSession.model_validate(r) for r in rows]

    def rename_session(self, tenant_id: str, assistant_id: str, session_id: str, name: str) -> ChatSession:
        with self._write() as s:
            row = session_row(s, tenant_id, assistant_id, session_id, lock=True)
            row.name, row.updated = check_name(name, "session", 255), now_ms()
        return ChatSession.model_validate(row)

    def append_turn(self, tenant_id: str, assistant_id: str, session_id: str, messages: Sequence[dict[str, Any]],
                    reference: dict[str, Any] | None = None) -> ChatSession:
        """Add a question and its answer (and the answer's reference) to the conversation."""
        with self._write() as s:
            row = session_row(s, tenant_id, assistant_id, session_id, lock=True)
            row.messages = [*row.messages, *(dict(x) for x in messages)]
            if reference is not None:
                row.references = [*row.references, dict(reference)]
            row.updated = now_ms()
        return ChatSession.model_validate(row)

    def delete_session(self, tenant_id: str, assistant_id: str, session_id: str) -> None:
        with self._write() as s:
            session_row(s, tenant_id, assistant_id, session_id)
            s.execute(delete(m.ChatSession).where(m.ChatSession.id == session_id))
