"""The OpenAI-compatible chat endpoint (RAGFLOW_API.md §11): ``POST /chats_openai/{chat_id}/chat/completions``.

The official ``openai`` client, pointed at ``{host}/api/v1/chats_openai/{chat_id}``, gets the chat
assistant's answers (its own prompt, datasets and LLM; the request's ``model`` is ignored), whole or
streamed with incremental deltas. With ``"reference": true`` the retrieved chunks come along
(``message.reference``; in a stream, on the final chunk with ``final_content``). The conversation is the
request's ``messages`` (system messages and leading assistant messages dropped); nothing is stored.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from flask import Response, jsonify

from kbgraph.chat import Conversation, Turn
from kbgraph.meta import NotFound
from kbgraph.store.base import StoreError
from web.api import blueprint, tenant
from web.envelope import ARGUMENT_ERROR, DATA_ERROR, ApiError, json_body, store_failure_message
from web.services import services
from web.sessions import event_stream, sse


def _history(messages: list[dict[str, Any]]) -> list[Turn]:
    turns: list[Turn] = []
    question: str | None = None
    for message in messages:
        if message["role"] == "user":
            question = message["content"]
        elif message["role"] == "assistant" and question is not None:
            turns.append(Turn(question, message["content"], []))
            question = None
    return turns


def _conversation_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    missing = [k for k in ("model", "messages") if k not in body]
    if missing:
        raise ApiError(ARGUMENT_ERROR, f"required argument are missing: {','.join(missing)}; ", with_data=True)
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise ApiError(DATA_ERROR, "You have to provide messages.")
    if not all(isinstance(m, dict) and isinstance(m.get("content", ""), str) for m in messages):
        raise ApiError(DATA_ERROR, "Each message needs a role and a text content.")
    if messages[-1].get("role") != "user":
        raise ApiError(DATA_ERROR, "The last content of this conversation is not from user.")
    kept = [m for m in messages if m.get("role") != "system"]
    while kept and kept[0].get("role") == "assistant":
        kept.pop(0)
    return kept


def _usage(question: str, answer: str) -> dict[str, int]:
    # counted in characters, as RAGFlow counts them here
    return {"prompt_tokens": len(question), "completion_tokens": len(answer),
            "total_tokens": len(question) + len(answer)}


def _chunk(chat_id: str, delta: dict[str, Any], finish: str | None, usage: dict[str, int] | None) -> dict[str, Any]:
    return {"id": f"chatcmpl-{chat_id}", "choices": [{
        "delta": {"content": None, "role": "assistant", "function_call": None, "tool_calls": None,
                  "reasoning_content": None, **delta},
        "finish_reason": finish, "index": 0, "logprobs": None}],
        "created": int(time.time()), "model": "model", "object": "chat.completion.chunk",
        "system_fingerprint": "", "usage": usage}


def _streamed(conversation: Conversation, chat_id: str, question: str, with_reference: bool) -> Iterator[str]:
    answer = ""
    final: dict[str, Any] = {}
    try:
        for event in conversation.ask(question):
            if event.kind == "delta" and event.text:
                answer += event.text
                yield sse(_chunk(chat_id, {"content": event.text}, None, None))
            elif event.kind == "reasoning" and event.text:  # as RAGFlow splits <think> out of the content
                yield sse(_chunk(chat_id, {"reasoning_content": event.text}, None, None))
    except Exception as exc:  # inside the stream, as RAGFlow reports it
        message = store_failure_message(exc) if isinstance(exc, StoreError) else str(exc)
        yield sse(_chunk(chat_id, {"content": f"**ERROR**: {message}"}, None, None))
    if conversation.answer is not None:
        answer = conversation.answer.text
        if with_reference:
            final = {"reference": conversation.answer.reference.get("chunks", []), "final_content": answer}
    yield sse(_chunk(chat_id, final, "stop", _usage(question, answer)))
    yield "data:[DONE]\n\n"


@blueprint.post("/chats_openai/<chat_id>/chat/completions")
def openai_chat(chat_id: str) -> Response:
    svc = services()
    body = json_body()
    messages = _conversation_messages(body)
    try:
        assistant = svc.meta.get_assistant(tenant(), chat_id)
    except NotFound:
        raise ApiError(DATA_ERROR, f"You don't own the chat {chat_id}") from None
    question = messages[-1]["content"]
    conversation = Conversation(svc.engine(tenant()), assistant, history=_history(messages[:-1]))
    with_reference = bool(body.get("reference", False))
    if body.get("stream", True):
        return event_stream(_streamed(conversation, chat_id, question, with_reference))
    for _ in conversation.ask(question):
        pass
    answer = conversation.answer
    assert answer is not None
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.reasoning:
        message["reasoning_content"] = answer.reasoning
    if with_reference:
        message["reference"] = answer.reference.get("chunks", [])
    usage = _usage(question, answer.text)
    total_chars = sum(len(m.get("content", "")) for m in messages)
    usage["completion_tokens_details"] = {"reasoning_tokens": total_chars, "accepted_prediction_tokens": len(answer.text),
                                          "rejected_prediction_tokens": 0}
    return jsonify({"id": f"chatcmpl-{chat_id}", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model"), "usage": usage,
                    "choices": [{"message": message, "logprobs": None, "finish_reason": "stop", "index": 0}]})
