"""A stored chat assistant (kbgraph.meta ``Assistant``) in conversation: its knowledge bases, retrieval
knobs and LLM settings bound into a ``Dialog``, the session's earlier turns as history, and each
answer kept in the session with the chunks its ``[ID:n]`` markers index.

The knowledge graph comes in front of chunk retrieval (``mix`` mode) when one of the assistant's
knowledge bases has a graph and its ``use_kg`` prompt setting is not switched off; otherwise the
hybrid chunk search (``naive``) alone. An assistant without knowledge bases is a plain LLM chat.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kbgraph.chat.dialog import AssistantConfig, ChatEvent, Dialog, Turn
from kbgraph.chat.shown_work import graph_context
from kbgraph.config import Settings
from kbgraph.llm.base import CancelCheck, ChatModel, Embedder
from kbgraph.meta import MetaDB
from kbgraph.meta.schemas import Assistant, ChatSession, KnowledgeBase, NotFound
from kbgraph.search.context import RetrievedChunk
from kbgraph.search.retrieve import RetrievalResult
from kbgraph.store.base import DocStore

# RAGFlow's prompt_config keys kbgraph reads
USE_KG = "use_kg"
EMPTY_RESPONSE = "empty_response"
SYSTEM = "system"
QUOTE = "quote"


class AssistantEngine(Protocol):
    """What an assistant needs of the engine that runs it (kbgraph.engine.Engine is one): the chat
    layer sits below the engine, so it names only this."""

    settings: Settings
    meta: MetaDB
    store: DocStore
    tenant: str

    def context(self, kb: KnowledgeBase) -> object:
        """The knowledge base's indexing context; raises when its embedding model cannot run here."""
        ...

    def chat_for(self, kb: KnowledgeBase | None, model: str = "") -> ChatModel | None:
        ...

    def embedder_for(self, kb: KnowledgeBase) -> Embedder:
        ...


def uses_graph(assistant: Assistant, kbs: Sequence[KnowledgeBase]) -> bool:
    return bool(assistant.prompt_config.get(USE_KG, True)) and any(kb.graph.enabled for kb in kbs)


def reference_chunk(chunk: RetrievedChunk) -> dict[str, Any]:
    """A retrieved chunk as an answer's reference lists it (RAGFlow's ``chunks_format``)."""
    return {
        "id": chunk.chunk_id, "content": chunk.content, "document_id": chunk.doc_id,
        "document_name": chunk.doc_name, "dataset_id": chunk.kb_id, "image_id": "", "positions": [], "url": None,
        "similarity": float(chunk.score), "vector_similarity": float(chunk.vector_similarity or 0.0),
        "term_similarity": float(chunk.term_similarity or 0.0), "doc_type": "",
    }


def reference_of(retrieval: RetrievalResult | None) -> dict[str, Any]:
    """Every chunk the answer was given, in citation order (``[ID:n]`` is ``chunks[n]``), and the
    count per document."""
    chunks = [reference_chunk(c) for c in (retrieval.chunks if retrieval else [])]
    counts = Counter((c["document_id"], c["document_name"]) for c in chunks)
    aggs = [{"doc_name": name, "doc_id": doc_id, "count": n}
            for (doc_id, name), n in sorted(counts.items(), key=lambda item: (-item[1], item[0][1]))]
    return {"total": len(chunks), "chunks": chunks, "doc_aggs": aggs}


def references_by_message(session: ChatSession) -> dict[str, dict[str, Any]]:
    """Each stored answer's reference, by the id of its message."""
    return {r["message_id"]: r["reference"] for r in session.references if "message_id" in r}


def work_by_message(session: ChatSession) -> dict[str, dict[str, Any]]:
    """Each stored answer's reasoning and graph context (``{"reasoning", "graph"}``), by message id."""
    return {r["message_id"]: {"reasoning": r.get("reasoning", ""), "graph": r.get("graph") or {}}
            for r in session.references if "message_id" in r}


def history_of(messages: Sequence[Mapping[str, Any]]) -> list[Turn]:
    """The question/answer pairs of stored messages (the opening greeting is no turn)."""
    turns: list[Turn] = []
    question: str | None = None
    for message in messages:
        if message.get("role") == "user":
            question = str(message.get("content", ""))
        elif message.get("role") == "assistant" and question is not None:
            turns.append(Turn(question, str(message.get("content", "")), []))
            question = None
    return turns


def _knowledge_bases(engine: AssistantEngine, assistant: Assistant, extra_kb_ids: Sequence[str]) -> list[KnowledgeBase]:
    kbs = []
    for kb_id in dict.fromkeys([*assistant.kb_ids, *extra_kb_ids]):
        try:
            kbs.append(engine.meta.get_kb(engine.tenant, kb_id))
        except NotFound:  # deleted since: the assistant goes on with the rest
            continue
    return kbs


def system_prompt(assistant: Assistant, variables: Mapping[str, str]) -> str:
    """The assistant's own system prompt with its declared variables filled in (``{name}``; an optional
    one not given is left empty). ``{knowledge}`` stays for the retrieved excerpts."""
    text = str(assistant.prompt_config.get(SYSTEM) or "")
    for parameter in assistant.prompt_config.get("parameters") or []:
        key = parameter.get("key") if isinstance(parameter, dict) else None
        if isinstance(key, str) and key and key != "knowledge":
            text = text.replace("{" + key + "}", str(variables.get(key, "")))
    return text


def assistant_dialog(engine: AssistantEngine, assistant: Assistant, history: Sequence[Turn] = (), *,
                     extra_kb_ids: Sequence[str] = (), variables: Mapping[str, str] | None = None) -> Dialog:
    """The assistant bound to its knowledge bases (raises LLMNotConfigured without a chat model).
    ``variables`` fill the prompt's declared parameters other than ``knowledge``."""
    from kbgraph.graph.extract.nlp.extractor import NLPExtractor
    from kbgraph.search.retrieve import retrieve

    kbs = _knowledge_bases(engine, assistant, extra_kb_ids)
    for kb in kbs:
        engine.context(kb)  # the KB must have been embedded with the configured model
    mode = "mix" if uses_graph(assistant, kbs) else "naive"
    settings = engine.settings.replace(similarity_threshold=assistant.similarity_threshold,
                                       vector_similarity_weight=assistant.vector_similarity_weight,
                                       top_k=assistant.top_k)
    entity_types = list(dict.fromkeys(t for kb in kbs for t in kb.graph.entity_types))
    # the whole name: "model@provider" is one of the tenant's providers, other "@factory" suffixes the engine drops
    chat = engine.chat_for(kbs[0] if kbs else None, assistant.llm_id or "")

    def find(query: str) -> RetrievalResult:
        if not kbs:
            return RetrievalResult(mode="none", question=query)
        return retrieve(engine.store, engine.tenant, [kb.id for kb in kbs], query, mode, embedder=engine.embedder_for(kbs[0]),
                        chat=chat, settings=settings, top_n=assistant.top_n,
                        extractor=NLPExtractor(entity_types=entity_types), entity_types=entity_types)

    prompt = assistant.prompt_config
    llm = assistant.llm_setting
    config = AssistantConfig(
        system_prompt=system_prompt(assistant, variables or {}), empty_response=prompt.get(EMPTY_RESPONSE) or None,
        language=assistant.language or engine.settings.language, knowledge=bool(kbs),
        temperature=_number(llm.get("temperature")), max_tokens=_integer(llm.get("max_tokens")),
        cite=bool(prompt.get(QUOTE, True)) and assistant.do_refer)
    embed = engine.embedder_for(kbs[0]).embed if kbs else None
    return Dialog(find, chat, config, history, embed=embed)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _integer(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass
class Answer:
    """A finished answer, as a session keeps it."""

    message_id: str
    text: str
    reference: dict[str, Any]
    prompt: str
    created_at: float
    reasoning: str = ""
    # the graph context the model was given (entities, relations, reports: shown_work.graph_context)
    graph: dict[str, Any] = field(default_factory=dict)


@dataclass
class Conversation:
    """One question put to an assistant within a session (or, without one, a one-off exchange over
    ``history``). ``ask`` streams the dialog's events; the answer is stored when it is done."""

    engine: AssistantEngine
    assistant: Assistant
    session: ChatSession | None = None
    history: list[Turn] = field(default_factory=list)
    extra_kb_ids: Sequence[str] = ()
    variables: Mapping[str, str] = field(default_factory=dict)
    message_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    answer: Answer | None = None

    def ask(self, question: str, *, cancel: CancelCheck | None = None) -> Iterator[ChatEvent]:
        history = history_of(self.session.messages) if self.session is not None else self.history
        dialog = assistant_dialog(self.engine, self.assistant, history, extra_kb_ids=self.extra_kb_ids,
                                  variables=self.variables)
        for event in dialog.ask(question, cancel=cancel):
            if event.kind == "done":
                quote = bool(self.assistant.prompt_config.get(QUOTE, True)) and self.assistant.do_refer
                reference = reference_of(event.retrieval) if quote and event.retrieval is not None \
                    and event.retrieval.mode != "none" else {}
                turn = dialog.turns[-1]
                self.answer = Answer(self.message_id, event.text, reference, dialog.last_prompt, time.time(),
                                     reasoning=turn.reasoning, graph=graph_context(event.retrieval))
                self._keep(question)
            yield event

    def _keep(self, question: str) -> None:
        if self.session is None or self.answer is None:
            return
        answer = self.answer
        self.session = self.engine.meta.append_turn(
            self.engine.tenant, self.assistant.id, self.session.id,
            [{"role": "user", "content": question, "id": answer.message_id},
             {"role": "assistant", "content": answer.text, "created_at": answer.created_at, "id": answer.message_id}],
            # the reasoning and the graph context beside RAGFlow's reference: the pages show them,
            # the REST API's session rows keep RAGFlow's shape
            reference={"message_id": answer.message_id, "reference": answer.reference,
                       "reasoning": answer.reasoning, "graph": answer.graph})
