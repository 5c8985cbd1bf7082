"""Chat sessions and completions (RAGFLOW_API.md §9, §10): create/list/update/delete sessions, and
``POST /chats/{id}/completions``, answered whole or streamed as server-sent events. The conversation
itself is kbgraph's (``kbgraph.chat.Conversation``: retrieval, the graph in front with ``use_kg``,
history, citations, the session kept up to date)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from flask import Response, request, stream_with_context

from kbgraph.chat import Conversation, references_by_message
from kbgraph.meta import Assistant, ChatSession, NotFound
from kbgraph.store.base import StoreError
from web.api import blueprint, dedupe, tenant
from web.envelope import DATA_ERROR, SERVER_ERROR, ApiError, json_body, ok, store_failure_message
from web.rows import http_date
from web.services import services

log = logging.getLogger(__name__)

SSE_HEADERS = {"Cache-control": "no-cache", "Connection": "keep-alive", "X-Accel-Buffering": "no"}
NEW_SESSION = "New session"
LISTED_REFERENCE_KEYS = ("id", "content", "document_id", "document_name", "dataset_id", "image_id", "positions")


def sse(payload: Any) -> str:
    """One event, framed as RAGFlow frames it (no space after ``data:``)."""
    return "data:" + json.dumps(payload, ensure_ascii=False) + "\n\n"


def event_stream(events: Iterator[str]) -> Response:
    return Response(stream_with_context(events), mimetype="text/event-stream", headers=SSE_HEADERS,
                    content_type="text/event-stream; charset=utf-8")


def _assistant(chat_id: str, message: str) -> Assistant:
    try:
        return services().meta.get_assistant(tenant(), chat_id)
    except NotFound:
        raise ApiError(DATA_ERROR, message) from None


def _opener(assistant: Assistant) -> str:
    return str(assistant.prompt_config.get("prologue") or "")


def session_row(session: ChatSession, *, with_references: bool = False) -> dict[str, Any]:
    messages = [dict(m) for m in session.messages]
    if with_references:
        by_message = references_by_message(session)
        for message in messages:
            if message.get("role") == "assistant":
                chunks = (by_message.get(str(message.get("id"))) or {}).get("chunks", [])
                message["reference"] = [{k: c.get(k) for k in LISTED_REFERENCE_KEYS} for c in chunks]
    return {"id": session.id, "chat_id": session.assistant_id, "name": session.name, "messages": messages,
            "user_id": session.user_id, "create_time": session.created, "create_date": http_date(session.created),
            "update_time": session.updated, "update_date": http_date(session.updated)}


def _new_session(assistant: Assistant, name: str, user_id: str) -> ChatSession:
    return services().meta.create_session(tenant(), assistant.id, name, user_id=user_id,
                                          messages=[{"role": "assistant", "content": _opener(assistant)}])


@blueprint.post("/chats/<chat_id>/sessions")
def create_session(chat_id: str) -> Response:
    assistant = _assistant(chat_id, "You do not own the assistant.")
    body = json_body(required=False)
    name = body.get("name", NEW_SESSION)
    if not isinstance(name, str) or not name.strip():
        raise ApiError(DATA_ERROR, "`name` can not be empty.")
    return ok(session_row(_new_session(assistant, name, str(body.get("user_id") or ""))))


@blueprint.get("/chats/<chat_id>/sessions")
def list_sessions(chat_id: str) -> Response:
    assistant = _assistant(chat_id, f"You don't own the assistant {chat_id}.")
    sessions = services().meta.list_sessions(tenant(), assistant.id)
    for key, attr in (("id", "id"), ("name", "name"), ("user_id", "user_id")):
        wanted = request.args.get(key)
        if wanted:
            sessions = [s for s in sessions if getattr(s, attr) == wanted]
    try:
        page, page_size = max(int(request.args.get("page") or 1), 1), int(request.args.get("page_size") or 30)
    except ValueError:
        raise ApiError(DATA_ERROR, "`page` and `page_size` should be integers") from None
    attr = "updated" if request.args.get("orderby") == "update_time" else "created"
    descending = (request.args.get("desc") or "true").strip().lower() != "false"
    sessions.sort(key=lambda s: (getattr(s, attr), s.id), reverse=descending)
    if page_size <= 0:
        return ok([])
    chosen = sessions[(page - 1) * page_size:page * page_size]
    return ok([session_row(s, with_references=True) for s in chosen])


@blueprint.route("/chats/<chat_id>/sessions/<session_id>", methods=["PUT", "PATCH"])
def update_session(chat_id: str, session_id: str) -> Response:
    svc = services()
    body = json_body(required=False)
    try:
        svc.meta.get_session(tenant(), chat_id, session_id)
    except NotFound:
        if svc.meta.session_of_deleted_assistant(tenant(), chat_id, session_id):
            raise ApiError(DATA_ERROR, "You do not own the session") from None
        raise ApiError(DATA_ERROR, "Session does not exist") from None
    if "message" in body or "messages" in body:
        raise ApiError(DATA_ERROR, "`message` can not be change")
    if "reference" in body:
        raise ApiError(DATA_ERROR, "`reference` can not be change")
    if "name" in body:
        name = body["name"]
        if not isinstance(name, str) or not name.strip():
            raise ApiError(DATA_ERROR, "`name` can not be empty.")
        svc.meta.rename_session(tenant(), chat_id, session_id, name)
    return ok()


@blueprint.delete("/chats/<chat_id>/sessions")
def delete_sessions(chat_id: str) -> Response:
    svc = services()
    assistant = _assistant(chat_id, "You don't own the chat")
    body = json_body(required=False)
    ids = body.get("ids")
    if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
        raise ApiError(DATA_ERROR, "`ids` should be a list of strings")
    unique, dupes = dedupe(ids) if ids else ([s.id for s in svc.meta.list_sessions(tenant(), assistant.id)], [])
    errors: list[str] = []
    done = 0
    for session_id in unique:
        try:
            svc.meta.delete_session(tenant(), assistant.id, session_id)
            done += 1
        except NotFound:
            errors.append(f"The chat doesn't own the session {session_id}")
    if errors and not done:
        raise ApiError(DATA_ERROR, "; ".join(errors))
    errors += [f"Duplicate session ids: {d}" for d in dupes]
    if errors:
        return ok({"success_count": done, "errors": errors})
    return ok()


# -- completions ------------------------------------------------------------------------------------

def _answer_data(conversation: Conversation, session_id: str) -> dict[str, Any]:
    answer = conversation.answer
    assert answer is not None
    return {"answer": answer.text, "reference": answer.reference, "prompt": answer.prompt,
            "created_at": answer.created_at, "audio_binary": None, "id": answer.message_id, "session_id": session_id}


def _failure(exc: Exception) -> dict[str, Any]:
    message = store_failure_message(exc) if isinstance(exc, StoreError) else (str(exc) or type(exc).__name__)
    return {"code": SERVER_ERROR, "message": message, "data": {"answer": f"**ERROR**: {message}", "reference": []}}


def _streamed(conversation: Conversation, question: str, session_id: str) -> Iterator[str]:
    text = ""
    try:
        for event in conversation.ask(question):
            if event.kind == "delta":
                text += event.text
                yield sse({"code": 0, "message": "", "data": {
                    "answer": text, "reference": {"chunks": []}, "audio_binary": None,
                    "id": conversation.message_id, "session_id": session_id}})
            elif event.kind == "done":
                yield sse({"code": 0, "message": "", "data": _answer_data(conversation, session_id)})
    except Exception as exc:  # the stream has started: the error travels inside it, as RAGFlow sends it
        log.exception("completion failed")
        yield sse(_failure(exc))
    yield sse({"code": 0, "message": "", "data": True})


def _greeting(assistant: Assistant, session: ChatSession, stream: bool) -> Response:
    data = {"answer": _opener(assistant), "reference": {}, "audio_binary": None, "id": None,
            "session_id": session.id}
    if not stream:
        return ok(data)

    def events() -> Iterator[str]:
        yield sse({"code": 0, "message": "", "data": data})
        yield sse({"code": 0, "message": "", "data": True})

    return event_stream(events())


def _extra_datasets(body: dict[str, Any]) -> list[str]:
    """``kb_ids``: more of the caller's datasets for this turn (another tenant's are unknown ids)."""
    ids = body.get("kb_ids")
    if not isinstance(ids, list):
        return []
    found = []
    for kb_id in ids:
        try:
            found.append(services().meta.get_kb(tenant(), str(kb_id)).id)
        except NotFound:
            raise ApiError(DATA_ERROR, f"You don't own the dataset {kb_id}") from None
    return found


@blueprint.post("/chats/<chat_id>/completions")
def completions(chat_id: str) -> Response:
    svc = services()
    body = json_body(required=False)
    assistant = _assistant(chat_id, f"You don't own the chat {chat_id}")
    stream = body.get("stream", True)
    stream = stream if isinstance(stream, bool) else str(stream).strip().lower() not in ("false", "0", "")
    session_id = body.get("session_id")
    if not session_id:
        name = body.get("name") if isinstance(body.get("name"), str) and body["name"].strip() else NEW_SESSION
        return _greeting(assistant, _new_session(assistant, name, str(body.get("user_id") or "")), stream)
    try:
        session = svc.meta.get_session(tenant(), assistant.id, str(session_id))
    except NotFound:
        raise ApiError(DATA_ERROR, f"You don't own the session {session_id}") from None
    question = body.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ApiError(DATA_ERROR, "`question` is required.")
    variables = {k: str(v) for k, v in body.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)}
    conversation = Conversation(svc.engine(tenant()), assistant, session, extra_kb_ids=_extra_datasets(body),
                                variables=variables)  # the prompt's own {parameters}, as RAGFlow fills them
    if stream:
        return event_stream(_streamed(conversation, question, session.id))
    try:
        for _ in conversation.ask(question):
            pass
    except Exception as exc:
        log.exception("completion failed")
        return Response(json.dumps(_failure(exc), ensure_ascii=False), mimetype="application/json")
    return ok(_answer_data(conversation, session.id))
