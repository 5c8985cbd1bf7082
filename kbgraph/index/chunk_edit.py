"""A document's chunks edited by hand: list, add, update, delete.

Added chunks get a deterministic id from their content and document (adding the same text twice
rewrites one chunk), are embedded and searchable at once, and carry their important keywords and
questions as searchable tokens. With the knowledge base's graph on, every change reaches the graph
exactly: the chunk's entity and relation mentions are extracted again (or dropped with it) and only
the entity and relation rows they name are re-derived.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace

from kbgraph.graph.derive.recompute import DeriveResult
from kbgraph.index.context import KBContext
from kbgraph.index.extraction import extract_chunks
from kbgraph.index.merge import replace_chunk_mentions
from kbgraph.parse.token_count import count_tokens
from kbgraph.parse.tokenize import token_string, tokenize_query
from kbgraph.search.chunks import CHUNK_TEXT_FIELDS
from kbgraph.store.base import Condition, Doc, DocStore, SearchRequest, TextQuery, any_of, eq, missing, none_of
from kbgraph.store.records import Chunk

# what a chunk listing searches: content, the document's name, keywords and questions (as retrieval does)
LIST_TEXT_FIELDS = CHUNK_TEXT_FIELDS
_FIELDS = ["id", "kb_id", "doc_id", "docnm_kwd", "content_with_weight", "important_kwd", "question_kwd",
           "available_int", "create_timestamp_flt", "position_int", "page_num_int", "token_count_int"]
# manual chunks sort after the parsed ones (RAGFlow: parsed by page and position, then newest first)
MANUAL_POSITION = -1


class ChunkEditError(ValueError):
    """A chunk edit cannot be done as asked; the message says why."""


@dataclass(frozen=True)
class ChunkRecord:
    id: str
    kb_id: str
    doc_id: str
    doc_name: str
    content: str
    important_keywords: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    available: bool = True
    created: float = 0.0
    position: int = 0
    page: int = 0
    token_count: int = 0

    @classmethod
    def from_doc(cls, doc: Doc) -> "ChunkRecord":
        return cls(id=doc["id"], kb_id=doc.get("kb_id", ""), doc_id=doc.get("doc_id", ""),
                   doc_name=doc.get("docnm_kwd", ""), content=doc.get("content_with_weight", ""),
                   important_keywords=_as_list(doc.get("important_kwd")), questions=_as_list(doc.get("question_kwd")),
                   available=int(doc.get("available_int", 1)) == 1, created=float(doc.get("create_timestamp_flt", 0.0)),
                   position=int(doc.get("position_int", 0)), page=int(doc.get("page_num_int", 0)),
                   token_count=int(doc.get("token_count_int", 0)))

    @property
    def manual(self) -> bool:
        return self.position == MANUAL_POSITION


@dataclass
class ChunkPage:
    total: int
    chunks: list[ChunkRecord]


@dataclass
class ChunkChange:
    """What an edit did: the chunk (None after a delete), how the document's counters move, and
    whether graph rows changed (the caller then schedules a refresh of PageRank and communities)."""

    chunk: ChunkRecord | None = None
    chunks_delta: int = 0
    tokens_delta: int = 0
    deleted: int = 0
    graph: DeriveResult = field(default_factory=DeriveResult)


def _as_list(value: object) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def manual_chunk_id(content: str, doc_id: str) -> str:
    """16 hex digits from the content and the document, as RAGFlow's added chunks have."""
    return hashlib.blake2b((content + doc_id).encode("utf-8"), digest_size=8).hexdigest()


def _chunk_where(doc_id: str) -> list[Condition]:
    return [eq("doc_id", doc_id), missing("knowledge_graph_kwd")]


def clean_strings(values: Sequence[str]) -> list[str]:
    """Stripped, non-empty, in order."""
    return [v.strip() for v in values if v.strip()]


def list_chunks(ctx: KBContext, doc_id: str, *, keywords: str = "", offset: int = 0,
                limit: int | None = 30) -> ChunkPage:
    """The document's chunks (disabled ones too). Without keywords: parsed chunks in document order,
    then added ones newest first; with keywords: full-text matches, best first."""
    tokens = tokenize_query(keywords) if keywords.strip() else []
    if keywords.strip():
        if not tokens:
            return ChunkPage(0, [])
        request = SearchRequest(kb_ids=[ctx.kb_id], where=_chunk_where(doc_id),
                                text=TextQuery(tokens=tokens, fields=LIST_TEXT_FIELDS), candidates=10_000,
                                offset=offset, limit=limit if limit is not None else 10_000, fields=_FIELDS)
        found = ctx.store.search(ctx.tenant, request)
        return ChunkPage(found.total, [ChunkRecord.from_doc({**h.doc, "id": h.id}) for h in found.hits])
    rows = [ChunkRecord.from_doc(d) for d in ctx.store.scan(ctx.tenant, [ctx.kb_id], _chunk_where(doc_id),
                                                            fields=_FIELDS)]
    rows.sort(key=lambda c: (c.manual, c.page, c.position, -c.created, c.id))
    end = None if limit is None else offset + limit
    return ChunkPage(len(rows), rows[offset:end])


def get_chunk(ctx: KBContext, chunk_id: str) -> ChunkRecord | None:
    return find_chunk(ctx.store, ctx.tenant, [ctx.kb_id], chunk_id)


def find_chunk(store: DocStore, tenant: str, kb_ids: Sequence[str], chunk_id: str) -> ChunkRecord | None:
    """The chunk with this id in any of these knowledge bases (None for an unknown id or a graph row)."""
    if not kb_ids:
        return None
    found = store.get(tenant, list(kb_ids), [chunk_id], fields=[*_FIELDS, "knowledge_graph_kwd"])
    if not found or found[0].get("knowledge_graph_kwd"):
        return None
    return ChunkRecord.from_doc(found[0])


def _embedding_text(content: str, questions: Sequence[str]) -> str:
    return content if content.strip() else "\n".join(questions)


def _title_tokens(record: ChunkRecord) -> str:
    """Parsed chunks are searchable by their file's name; added ones by what was written into them only
    (as in RAGFlow: a keyword from the file name finds the parsed text, not every added note)."""
    return "" if record.manual else token_string(record.doc_name)


def _chunk_doc(ctx: KBContext, record: ChunkRecord, title_tokens: str) -> Doc:
    text = _embedding_text(record.content, record.questions)
    chunk = Chunk(id=record.id, kb_id=ctx.kb_id, doc_id=record.doc_id, doc_name=record.doc_name,
                  content=record.content, content_tokens=token_string(record.content), title_tokens=title_tokens,
                  position=record.position, start=0, end=len(record.content), token_count=record.token_count,
                  page=record.page, vector=ctx.embed([text])[0], created=record.created)
    doc = chunk.to_doc()
    doc.update({
        "important_kwd": list(record.important_keywords), "question_kwd": list(record.questions),
        "important_tks": token_string(" ".join(record.important_keywords)),
        "question_tks": token_string("\n".join(record.questions)),
        "available_int": 1 if record.available else 0,
    })
    return doc


GraphLock = Callable[[], AbstractContextManager]


def _graph_change(ctx: KBContext, chunk_ids: Sequence[str], new: Sequence[Chunk], lock: GraphLock) -> DeriveResult:
    if not ctx.graph.enabled:
        return DeriveResult()
    mentions = extract_chunks(ctx, new)  # may call an LLM: outside the knowledge base's lock
    with lock():
        return replace_chunk_mentions(ctx, chunk_ids, mentions)


def add_chunk(ctx: KBContext, doc_id: str, doc_name: str, content: str, *,
              important_keywords: Sequence[str] = (), questions: Sequence[str] = (),
              lock: GraphLock = nullcontext) -> ChunkChange:
    """Add (or, for the same content, rewrite) a chunk of the document."""
    if not content.strip():
        raise ChunkEditError("`content` is required")
    record = ChunkRecord(id=manual_chunk_id(content, doc_id), kb_id=ctx.kb_id, doc_id=doc_id, doc_name=doc_name,
                         content=content, important_keywords=list(important_keywords),
                         questions=clean_strings(questions), created=time.time(), position=MANUAL_POSITION,
                         token_count=count_tokens(content))
    doc = _chunk_doc(ctx, record, _title_tokens(record))
    ctx.store.upsert(ctx.tenant, ctx.kb_id, [doc])
    graph = _graph_change(ctx, [record.id], [Chunk.from_doc(doc)], lock)
    return ChunkChange(chunk=record, chunks_delta=1, tokens_delta=record.token_count, graph=graph)


def update_chunk(ctx: KBContext, chunk: ChunkRecord, *, content: str | None = None,
                 important_keywords: Sequence[str] | None = None, questions: Sequence[str] | None = None,
                 available: bool | None = None, lock: GraphLock = nullcontext) -> ChunkChange:
    """Change a chunk in place (its id stays); new text is embedded again and re-extracted."""
    if content is None and important_keywords is None and questions is None:
        if available is not None and available != chunk.available:  # no text changed: nothing to embed
            ctx.store.patch(ctx.tenant, ctx.kb_id, {chunk.id: {"available_int": 1 if available else 0}})
        return ChunkChange(chunk=replace(chunk, available=chunk.available if available is None else available))
    changed = ChunkRecord(
        id=chunk.id, kb_id=chunk.kb_id, doc_id=chunk.doc_id, doc_name=chunk.doc_name,
        content=chunk.content if content is None else content,
        important_keywords=chunk.important_keywords if important_keywords is None else list(important_keywords),
        questions=chunk.questions if questions is None else clean_strings(questions),
        available=chunk.available if available is None else available, created=chunk.created,
        position=chunk.position, page=chunk.page,
        token_count=chunk.token_count if content is None else count_tokens(content))
    doc = _chunk_doc(ctx, changed, _title_tokens(changed))
    ctx.store.upsert(ctx.tenant, ctx.kb_id, [doc])
    graph = DeriveResult()
    if content is not None and content != chunk.content:
        graph = _graph_change(ctx, [chunk.id], [Chunk.from_doc(doc)], lock)
    return ChunkChange(chunk=changed, tokens_delta=changed.token_count - chunk.token_count, graph=graph)


def delete_chunks(ctx: KBContext, doc_id: str, chunk_ids: Sequence[str] | None, *,
                  lock: GraphLock = nullcontext) -> ChunkChange:
    """Delete these chunks of the document (None or empty: all of them) and their mentions."""
    where = _chunk_where(doc_id)
    if chunk_ids:
        where.append(any_of("id", list(dict.fromkeys(chunk_ids))))
    doomed = [ChunkRecord.from_doc(d) for d in ctx.store.scan(ctx.tenant, [ctx.kb_id], where,
                                                              fields=["id", "token_count_int"])]
    if not doomed:
        return ChunkChange()
    ids = [c.id for c in doomed]
    ctx.store.delete(ctx.tenant, [ctx.kb_id], [*_chunk_where(doc_id), any_of("id", ids)])
    graph = _graph_change(ctx, ids, [], lock)
    return ChunkChange(chunks_delta=-len(ids), tokens_delta=-sum(c.token_count for c in doomed), deleted=len(ids),
                       graph=graph)


def document_totals(ctx: KBContext, doc_id: str) -> tuple[int, int]:
    """(chunks, tokens) the document really has in the store."""
    rows = list(ctx.store.scan(ctx.tenant, [ctx.kb_id], _chunk_where(doc_id), fields=["id", "token_count_int"]))
    return len(rows), sum(int(r.get("token_count_int", 0)) for r in rows)


def set_document_availability(ctx: KBContext, doc_id: str, available: bool) -> int:
    """Show or hide every chunk of a document from retrieval (a disabled document)."""
    return ctx.store.update(ctx.tenant, [ctx.kb_id], _chunk_where(doc_id), {"available_int": 1 if available else 0})


def rename_document_chunks(ctx: KBContext, doc_id: str, name: str) -> int:
    """Chunks carry their document's name (shown, and searched as title tokens)."""
    renamed = ctx.store.update(ctx.tenant, [ctx.kb_id], _chunk_where(doc_id), {"docnm_kwd": name})
    ctx.store.update(ctx.tenant, [ctx.kb_id], [*_chunk_where(doc_id), none_of("position_int", [MANUAL_POSITION])],
                     {"title_tks": token_string(name)})
    return renamed
