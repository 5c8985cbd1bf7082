"""What the MCP server's tools do, over an engine that acts for one tenant: the knowledge bases and
assistants listed, retrieval in every mode (chunks with their citation markers, the graph's entities,
relations and community reports, and the context an LLM would get), an entity with its neighbours,
and a question answered by a model (a stored assistant, or the knowledge bases named).

Plain functions returning JSON-able dicts, so that the transport (kbgraph/mcp_server/server.py)
only names and describes them; a ``ToolProblem`` is a request the caller can fix (an unknown
knowledge base, an empty question), reported to the agent as the tool's error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kbgraph.engine import Engine, KBGraphError, did_you_mean
from kbgraph.llm.base import LLMError, LLMNotConfigured
from kbgraph.meta.schemas import MetaError

MODES = ("naive", "kg", "ppr", "global", "mix")
# a chunk's text in a retrieval answer: enough to quote, bounded so that a page of results stays small
_CHUNK_CHARS = 2000


class ToolProblem(Exception):
    """A tool call that cannot be answered as asked; the message says what to change."""


def _chunk(marker: int | None, chunk: Any) -> dict[str, Any]:
    return {"citation": marker, "chunk_id": chunk.chunk_id, "document": chunk.doc_name, "doc_id": chunk.doc_id,
            "knowledge_base_id": chunk.kb_id, "position": chunk.position, "score": round(chunk.score, 4),
            "content": chunk.content[:_CHUNK_CHARS]}


def list_knowledge_bases(engine: Engine) -> dict[str, Any]:
    rows = []
    for kb in engine.list_kbs():
        counts = engine.meta.kb_counts(kb.id)
        rows.append({"name": kb.name, "id": kb.id, "description": kb.description, "documents": counts.documents,
                     "chunks": counts.chunks, "graph": kb.graph.method if kb.graph.enabled else "off",
                     "default_mode": engine.default_mode([kb])})
    assistants = [{"name": a.name, "description": a.description,
                   "knowledge_bases": [kb.name for kb in engine.list_kbs() if kb.id in a.kb_ids]}
                  for a in engine.meta.list_assistants(engine.tenant)]
    return {"knowledge_bases": rows, "assistants": assistants}


def _names(engine: Engine, knowledge_bases: Sequence[str]) -> list[str]:
    """The knowledge bases named (by name or id); none named: every one of the tenant's."""
    kbs = engine.list_kbs()
    if not knowledge_bases:
        if not kbs:
            raise ToolProblem(f"there are no knowledge bases yet ({engine.location})")
        return [kb.name for kb in kbs]
    by_id = {kb.id: kb.name for kb in kbs}
    return [by_id.get(name, name) for name in knowledge_bases]


def retrieve(engine: Engine, question: str, knowledge_bases: Sequence[str] = (), mode: str = "",
             top_k: int = 8) -> dict[str, Any]:
    if mode and mode not in MODES:
        raise ToolProblem(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    if not 1 <= top_k <= 100:
        raise ToolProblem("top_k is 1 to 100")
    result = engine.query(_names(engine, knowledge_bases), question, mode=mode or None, top_n=top_k)
    markers = {chunk_id: int(n) for n, chunk_id in result.citations.items()}
    return {
        "mode": result.mode,
        "answer": result.answer,  # the global mode's map-reduce answer over community reports
        "chunks": [_chunk(markers.get(c.chunk_id), c) for c in result.chunks],
        "entities": [{"name": e.name, "type": e.type, "description": e.description, "score": round(e.score, 4),
                      "pagerank": e.pagerank} for e in result.entities],
        "relations": [{"source": r.src_name, "target": r.tgt_name, "description": r.description,
                       "weight": r.weight, "score": round(r.score, 4)} for r in result.relations],
        "reports": [{"title": r.title, "content": r.content, "level": r.level} for r in result.reports],
        # what an LLM would be given: the graph's entities, relations and reports, then the chunks
        # numbered as their citation markers ([ID:n])
        "context": result.context,
    }


def lookup_entity(engine: Engine, name: str, knowledge_base: str) -> dict[str, Any]:
    from kbgraph.graph.inspect import entity_names, entity_view, find_entity

    kb = engine.kb(_names(engine, [knowledge_base])[0])
    found = find_entity(engine.store, engine.tenant, kb.id, name)
    if found is None:
        hint = did_you_mean(name, entity_names(engine.store, engine.tenant, kb.id))
        raise ToolProblem(f"no entity like {name!r} in knowledge base {kb.name!r}{hint}")
    documents = {d.id: d.name for d in engine.meta.list_documents(kb.id, limit=None)}
    view = entity_view(engine.store, engine.tenant, kb.id, found, documents)
    e = view.entity
    return {"name": e.name, "type": e.type, "aliases": e.aliases, "description": e.description,
            "pagerank": e.pagerank, "mentions": e.mention_count, "documents": sorted(view.doc_names.values()),
            "neighbours": [{"name": other, "relation": r.description, "weight": r.weight}
                           for r, other in view.neighbours]}


def ask(engine: Engine, question: str, knowledge_bases: Sequence[str] = (), assistant: str = "",
        mode: str = "") -> dict[str, Any]:
    """The model's answer, citing chunks as [ID:n], and the chunks those markers stand for."""
    if assistant:
        from kbgraph.chat.assistant import assistant_dialog

        stored = engine.meta.find_assistant(engine.tenant, assistant)
        if stored is None:
            names = [a.name for a in engine.meta.list_assistants(engine.tenant)]
            raise ToolProblem(f"no assistant named {assistant!r}{did_you_mean(assistant, names)} "
                              f"(known: {', '.join(names) or 'none'})")
        dialog = assistant_dialog(engine, stored)
    else:
        if mode and mode not in MODES:
            raise ToolProblem(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
        dialog = engine.dialog(_names(engine, knowledge_bases), mode=mode or None)
    answer: list[str] = []
    references: list[dict[str, Any]] = []
    for event in dialog.ask(question):
        if event.kind == "delta":
            answer.append(event.text)
        elif event.kind == "done":
            references = [{"citation": r.marker, "document": r.doc_name, "chunk_id": r.chunk_id,
                           "content": r.content[:_CHUNK_CHARS]} for r in event.references]
    return {"answer": "".join(answer).strip(), "references": references}


# what a tool's caller can fix, and what the model or the data says: both go back as the tool's error
PROBLEMS = (ToolProblem, KBGraphError, MetaError, LLMNotConfigured, LLMError, ValueError)
