"""A chat assistant bound to knowledge bases: retrieval, prompt assembly, streamed answers, citations.

Each turn retrieves with the question folded together with the previous user turns (so "what is
its emblem?" still finds the guild the conversation is about), answers from that context with
``[ID:n]`` citation markers, and maps the markers back to chunk ids. When retrieval finds nothing
the configured empty response is returned without calling the LLM.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from kbgraph.chat.shown_work import Embed, insert_citations
from kbgraph.llm.base import CancelCheck, ChatModel, LLMNotConfigured, Message, Reasoning
from kbgraph.prompts import render
from kbgraph.search.retrieve import RetrievalResult

CITATION = re.compile(r"\[ID:(\d+)\]")

Retrieve = Callable[[str], RetrievalResult]


# where an assistant's own system prompt wants the retrieved excerpts (RAGFlow's prompt variable)
KNOWLEDGE_SLOT = "{knowledge}"


@dataclass(frozen=True)
class AssistantConfig:
    system_prompt: str = ""
    # None: with nothing retrieved the LLM still answers (from the conversation alone)
    empty_response: str | None = "I cannot find this in the knowledge base."
    language: str = "English"
    # False: a plain chat with no knowledge base; the system prompt is the assistant's own alone
    knowledge: bool = True
    temperature: float | None = None
    # earlier user turns folded into the retrieval query
    history_turns: int = 2
    # turns (user + assistant pairs) of history sent to the LLM
    memory_turns: int = 6
    max_tokens: int | None = None
    # an answer without a citation of its own gets citations by similarity (shown_work.insert_citations)
    cite: bool = True


@dataclass
class Reference:
    marker: int
    chunk_id: str
    doc_id: str
    doc_name: str
    content: str
    score: float


@dataclass
class ChatEvent:
    kind: Literal["retrieved", "reasoning", "delta", "done"]
    text: str = ""
    references: list[Reference] = field(default_factory=list)
    retrieval: RetrievalResult | None = None


@dataclass
class Turn:
    question: str
    answer: str
    references: list[Reference]
    reasoning: str = ""


def cited_references(answer: str, retrieval: RetrievalResult) -> list[Reference]:
    """The chunks the answer cites, in order of first citation; unknown markers are ignored."""
    by_id = {c.chunk_id: c for c in retrieval.chunks}
    seen: list[int] = []
    for match in CITATION.finditer(answer):
        marker = int(match.group(1))
        if marker in retrieval.citations and marker not in seen:
            seen.append(marker)
    refs = []
    for marker in seen:
        chunk = by_id[retrieval.citations[marker]]
        refs.append(Reference(marker, chunk.chunk_id, chunk.doc_id, chunk.doc_name, chunk.content, chunk.score))
    return refs


def strip_unknown_citations(answer: str, retrieval: RetrievalResult) -> str:
    return CITATION.sub(lambda m: m.group(0) if int(m.group(1)) in retrieval.citations else "", answer)


class Dialog:
    """One conversation. ``retrieve`` maps a query to a RetrievalResult (the engine binds the KBs)."""

    def __init__(self, retrieve: Retrieve, chat: ChatModel | None, config: AssistantConfig | None = None,
                 history: Sequence[Turn] = (), embed: Embed | None = None) -> None:
        if chat is None:
            raise LLMNotConfigured(
                "chat needs a language model and none is configured: set KBGRAPH_LLM_BASE_URL, "
                "KBGRAPH_LLM_MODEL (and KBGRAPH_LLM_API_KEY if the endpoint needs one); "
                "`kbgraph query` retrieves without one")
        self.retrieve = retrieve
        self.chat = chat
        self.config = config or AssistantConfig()
        self.embed = embed  # vectors for citations by similarity (None: by shared words alone)
        self.turns: list[Turn] = list(history)  # earlier turns of a conversation kept elsewhere
        self.last_prompt = ""  # the system message of the latest answer

    def retrieval_query(self, question: str) -> str:
        earlier = [t.question for t in self.turns[-self.config.history_turns:]] if self.config.history_turns else []
        return "\n".join([*earlier, question])

    def system_message(self, retrieval: RetrievalResult) -> str:
        instructions = self.config.system_prompt
        if not self.config.knowledge:
            return instructions.replace(KNOWLEDGE_SLOT, "").strip()
        inline = KNOWLEDGE_SLOT in instructions
        if inline:
            instructions = instructions.replace(KNOWLEDGE_SLOT, retrieval.context)
        return render("chat_system", instructions=instructions, knowledge=retrieval.context,
                      language=self.config.language, knowledge_inline=inline)

    def messages(self, question: str, retrieval: RetrievalResult) -> list[Message]:
        system = self.system_message(retrieval)
        self.last_prompt = system
        history: list[Message] = []
        for turn in self.turns[-self.config.memory_turns:]:
            history += [Message("user", turn.question), Message("assistant", turn.answer)]
        head = [Message("system", system)] if system else []
        return [*head, *history, Message("user", question)]

    def ask(self, question: str, *, cancel: CancelCheck | None = None) -> Iterator[ChatEvent]:
        """Events: one "retrieved", then "delta" pieces of the answer (and "reasoning" pieces of the
        model's reasoning, when it shows any), then "done" with references."""
        question = question.strip()
        if not question:
            raise ValueError("the question is empty")
        retrieval = self.retrieve(self.retrieval_query(question))
        yield ChatEvent("retrieved", retrieval=retrieval)
        if not retrieval.chunks and self.config.knowledge and self.config.empty_response is not None:
            answer = self.config.empty_response
            self.turns.append(Turn(question, answer, []))
            yield ChatEvent("delta", text=answer)
            yield ChatEvent("done", text=answer, retrieval=retrieval)
            return
        pieces: list[str] = []
        thought: list[str] = []
        for piece in self.chat.stream(self.messages(question, retrieval), phase="chat",
                                      temperature=self.config.temperature, max_tokens=self.config.max_tokens,
                                      cancel=cancel):
            if isinstance(piece, Reasoning):
                thought.append(piece)
                yield ChatEvent("reasoning", text=str(piece))
                continue
            pieces.append(piece)
            yield ChatEvent("delta", text=piece)
        answer = strip_unknown_citations("".join(pieces).strip(), retrieval)
        if self.config.cite and self.config.knowledge and not CITATION.search(answer):
            answer = insert_citations(answer, retrieval, self.embed)  # only when the model cited nothing
        references = cited_references(answer, retrieval)
        self.turns.append(Turn(question, answer, references, "".join(thought).strip()))
        yield ChatEvent("done", text=answer, references=references, retrieval=retrieval)

    def answer(self, question: str) -> Turn:
        """Ask and wait for the whole answer."""
        for _ in self.ask(question):
            pass
        return self.turns[-1]
