"""Chat: assistants (datasets, prompt, model settings, knowledge graph on/off), their sessions, and
answers streamed token by token with citation markers that open the cited chunk.

Built on the same engine pieces as the REST chat API (kbgraph.chat.Conversation and the metadata
DB's assistants and sessions), so a conversation started here continues over the API and back."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from flask import Response, flash, redirect, render_template, request, stream_with_context, url_for

from kbgraph.chat.assistant import Conversation, references_by_message, work_by_message
from kbgraph.llm.base import LLMError
from kbgraph.meta import Assistant
from kbgraph.store.base import StoreError
from web.chats import DEFAULT_EMPTY_RESPONSE, DEFAULT_OPENER, DEFAULT_SYSTEM
from web.envelope import store_failure_message
from web.services import services
from web.ui.common import PageError, engine, json_body, page_blueprint, tenant
from web.ui.providers import chat_model_choices

log = logging.getLogger(__name__)
blueprint = page_blueprint("ui_chat")
NEW_SESSION = "New conversation"


def _float(name: str, default: float, low: float, high: float) -> float:
    raw = (request.form.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise PageError(f"{name.replace('_', ' ')} must be a number, not {raw!r}") from None
    if not low <= value <= high:
        raise PageError(f"{name.replace('_', ' ')} must lie between {low} and {high}")
    return value


def _int(name: str, default: int, low: int, high: int) -> int:
    value = _float(name, default, low, high)
    if not float(value).is_integer():
        raise PageError(f"{name.replace('_', ' ')} must be a whole number")
    return int(value)


def _assistant_fields(current: Assistant | None) -> dict[str, Any]:
    """The assistant's columns from the form (validated; unknown datasets are refused by the DB)."""
    form = request.form
    own = {kb.id for kb in engine().list_kbs()}
    kb_ids = [k for k in form.getlist("kb_ids") if k in own]
    prompt = dict(current.prompt_config) if current else {"parameters": [{"key": "knowledge", "optional": False}],
                                                         "tts": False, "refine_multiturn": True}
    system = (form.get("system") or "").strip() or DEFAULT_SYSTEM
    if "{knowledge}" not in system:
        # the retrieved excerpts have to go somewhere: appended, as RAGFlow's default prompt has them
        system += "\n\nHere is the knowledge base:\n{knowledge}\nThe above is the knowledge base."
    prompt.update(system=system, prologue=(form.get("prologue") or "").strip(),
                  empty_response=(form.get("empty_response") or "").strip(),
                  use_kg=form.get("use_kg") == "on", quote=form.get("quote") == "on")
    llm: dict[str, Any] = dict(current.llm_setting) if current else {}
    llm["temperature"] = _float("temperature", 0.1, 0.0, 2.0)
    max_tokens = _int("max_tokens", 0, 0, 32768)
    if max_tokens:
        llm["max_tokens"] = max_tokens
    else:
        llm.pop("max_tokens", None)
    return {"kb_ids": kb_ids, "prompt_config": prompt, "llm_setting": llm, "llm_id": _chosen_model(current),
            "top_n": _int("top_n", 6, 1, 50), "similarity_threshold": _float("similarity_threshold", 0.2, 0.0, 1.0),
            "vector_similarity_weight": _float("vector_similarity_weight", 0.3, 0.0, 1.0),
            "description": (form.get("description") or "").strip()}


def _chosen_model(current: Assistant | None) -> str:
    """The form's chat model: "" (the server's default), one of the tenant's providers' models
    (``model@provider``), or, unchanged, the one the assistant had."""
    default = services().settings.llm_model
    if "model" not in request.form:
        return current.llm_id if current else default
    chosen = (request.form.get("model") or "").strip()
    if not chosen:
        return default
    if chosen != (current.llm_id if current else "") and chosen not in chat_model_choices():
        raise PageError(f"No provider of yours offers the model {chosen!r}; add it on the settings page.")
    return chosen


def _own_assistant(assistant_id: str) -> Assistant:
    return services().meta.get_assistant(tenant(), assistant_id)


@blueprint.get("/chat")
def chat_page() -> str:
    svc = services()
    return render_template("chat_list.html", assistants=svc.meta.list_assistants(tenant()), kbs=engine().list_kbs(),
                           models=chat_model_choices(), default_model=svc.settings.llm_model,
                           llm_configured=svc.settings.llm_configured,
                           defaults={"system": DEFAULT_SYSTEM, "prologue": DEFAULT_OPENER,
                                     "empty_response": DEFAULT_EMPTY_RESPONSE})


@blueprint.post("/chat")
def create_assistant() -> Response:
    name = (request.form.get("name") or "").strip()
    if not name:
        raise PageError("Give the assistant a name.")
    svc = services()
    if svc.meta.find_assistant(tenant(), name) is not None:
        raise PageError(f"You have an assistant named {name!r} already.", 409)
    assistant = svc.meta.create_assistant(tenant(), name, **_assistant_fields(None))
    session = svc.meta.create_session(tenant(), assistant.id, NEW_SESSION,
                                      messages=[{"role": "assistant", "content": assistant.prompt_config["prologue"]}])
    return redirect(url_for("ui_chat.assistant_page", assistant_id=assistant.id, session=session.id))


@blueprint.post("/chat/<assistant_id>/edit")
def edit_assistant(assistant_id: str) -> Response:
    current = _own_assistant(assistant_id)
    name = (request.form.get("name") or current.name).strip()
    services().meta.update_assistant(tenant(), current.id, name=name, **_assistant_fields(current))
    flash("Assistant saved.")
    return redirect(url_for("ui_chat.assistant_page", assistant_id=current.id, session=request.form.get("session")))


@blueprint.post("/chat/<assistant_id>/delete")
def delete_assistant(assistant_id: str) -> Response:
    assistant = _own_assistant(assistant_id)
    services().meta.delete_assistant(tenant(), assistant.id)
    flash(f"Assistant {assistant.name!r} deleted.")
    return redirect(url_for("ui_chat.chat_page"))


@blueprint.post("/chat/<assistant_id>/sessions")
def new_session(assistant_id: str) -> Response:
    assistant = _own_assistant(assistant_id)
    session = services().meta.create_session(
        tenant(), assistant.id, NEW_SESSION, messages=[{"role": "assistant",
                                                        "content": str(assistant.prompt_config.get("prologue") or "")}])
    return redirect(url_for("ui_chat.assistant_page", assistant_id=assistant.id, session=session.id))


@blueprint.post("/chat/<assistant_id>/sessions/<session_id>/delete")
def delete_session(assistant_id: str, session_id: str) -> Response:
    assistant = _own_assistant(assistant_id)
    services().meta.delete_session(tenant(), assistant.id, session_id)
    return redirect(url_for("ui_chat.assistant_page", assistant_id=assistant.id))


def _messages(session: Any) -> list[dict[str, Any]]:
    """The session's messages for the page, each answer with the chunks its markers index."""
    by_message = references_by_message(session)
    work = work_by_message(session)
    out = []
    for m in session.messages:
        item = {"role": m.get("role"), "content": m.get("content", "")}
        if m.get("role") == "assistant" and m.get("id"):
            item["reference"] = _reference_chunks(by_message.get(str(m["id"])) or {})
            item.update(work.get(str(m["id"]), {}))
        out.append(item)
    return out


def _reference_chunks(reference: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": c.get("id"), "content": c.get("content", ""), "document_id": c.get("document_id"),
             "document_name": c.get("document_name"), "dataset_id": c.get("dataset_id"),
             "similarity": c.get("similarity")} for c in reference.get("chunks", [])]


@blueprint.get("/chat/<assistant_id>")
def assistant_page(assistant_id: str) -> str:
    svc = services()
    assistant = _own_assistant(assistant_id)
    sessions = list(reversed(svc.meta.list_sessions(tenant(), assistant.id)))
    wanted = request.args.get("session")
    session = next((s for s in sessions if s.id == wanted), sessions[0] if sessions else None)
    kbs = engine().list_kbs()
    names = {kb.id: kb.name for kb in kbs}
    return render_template("chat.html", assistant=assistant, sessions=sessions, session=session, kbs=kbs,
                           models=chat_model_choices(), default_model=svc.settings.llm_model,
                           kb_names=names, messages=_messages(session) if session else [],
                           llm_configured=svc.settings.llm_configured)


def _event(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


@blueprint.post("/ui/api/chat/<assistant_id>/sessions/<session_id>/ask")
def ask(assistant_id: str, session_id: str) -> Response:
    svc = services()
    assistant = _own_assistant(assistant_id)
    session = svc.meta.get_session(tenant(), assistant.id, session_id)
    question = json_body().get("question")
    if not isinstance(question, str) or not question.strip():
        raise PageError("Type a question first.")
    renamed = None
    if len(session.messages) <= 1 and session.name == NEW_SESSION:
        renamed = question.strip()[:80]
        svc.meta.rename_session(tenant(), assistant.id, session.id, renamed)
    conversation = Conversation(svc.engine(tenant()), assistant, session)

    def events() -> Iterator[str]:
        if renamed is not None:  # the list of conversations shows the new name at once
            yield _event({"session": {"id": session.id, "name": renamed}})
        try:
            for event in conversation.ask(question.strip()):
                if event.kind == "delta" and event.text:
                    yield _event({"delta": event.text})
                elif event.kind == "reasoning" and event.text:
                    yield _event({"reasoning": event.text})
                elif event.kind == "done":
                    answer = conversation.answer
                    yield _event({"done": True, "answer": event.text,
                                  "reference": _reference_chunks(answer.reference if answer else {}),
                                  "reasoning": answer.reasoning if answer else "",
                                  "graph": answer.graph if answer else {}})
        except LLMError as exc:
            yield _event({"error": str(exc)})
        except StoreError as exc:
            yield _event({"error": store_failure_message(exc)})
        except Exception as exc:  # the stream has started: the failure travels inside it
            log.exception("chat answer failed")
            yield _event({"error": f"The answer failed on the server ({type(exc).__name__}); the error is logged."})

    return Response(stream_with_context(events()), mimetype="text/event-stream",
                    headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
