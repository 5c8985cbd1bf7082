"""A document's chunks: cut from its text, embedded and stored (the parse step), and read back.

``parse_document`` takes one document's chunks from the chunker as it reads the text and stores them
a few thousand at a time; ``store_chunks`` embeds and stores the chunks of many small documents at
once; ``embed_ahead`` overlaps the embedding of the next batch with the storing of this one.
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from kbgraph.index.context import WRITE_ROWS, KBContext, check_cancel, report_progress
from kbgraph.llm.base import CancelCheck
from kbgraph.parse.readers import ParsedDocument
from kbgraph.parse.tokenize import token_string
from kbgraph.store.base import Condition, any_of, eq, missing
from kbgraph.store.records import Chunk, chunk_id
from kbgraph.utils.gc_scope import bulk_gc
from kbgraph.utils.progress import ProgressFn, never, no_progress


@dataclass
class ParseResult:
    chunks: int
    tokens: int


@bulk_gc()
def parse_document(ctx: KBContext, doc_id: str, parsed: ParsedDocument, *, progress: ProgressFn = no_progress,
                   cancel: CancelCheck = never, batch_size: int = 0) -> ParseResult:
    """Chunk, tokenize, embed and store one document's text, replacing its earlier chunks.

    The chunks are taken from the chunker as it reads the text (a streamed file is never whole in
    memory) and stored a few thousand at a time; progress counts the text's characters, which are
    known before its chunks are."""
    # earlier chunks of this document (an older version, or a killed run) must not survive
    ctx.store.delete(ctx.tenant, [ctx.kb_id], [eq("doc_id", doc_id), missing("knowledge_graph_kwd")])
    title_tokens = token_string(parsed.name)
    now = time.time()
    total_chars = parsed.chars
    chunks = total_tokens = 0
    batch_size = batch_size or _parse_batch_chunks(ctx)
    report_progress(ctx, progress, "parse", 0, total_chars, parsed.name)
    spans = parsed.iter_chunks(ctx.chunk_tokens, ctx.chunk_overlap)
    # the batches being embedded (embed_ahead reads one batch ahead, so two at most)
    batches: collections.deque[list] = collections.deque()

    def texts() -> Iterator[list[str]]:
        while batch := list(itertools.islice(spans, batch_size)):
            batches.append(batch)
            yield [s.text for s in batch]

    waiting: list[dict] = []
    for vectors in embed_ahead(ctx, texts(), cancel):
        batch = batches.popleft()
        waiting += [
            Chunk(id=chunk_id(doc_id, s.position), kb_id=ctx.kb_id, doc_id=doc_id, doc_name=parsed.name,
                  content=s.text, content_tokens=token_string(s.text), title_tokens=title_tokens,
                  position=s.position, start=s.start, end=s.end, token_count=s.token_count,
                  page=parsed.page_at(s.start) or 0, vector=v, created=now).to_doc()
            for s, v in zip(batch, vectors)
        ]
        # written in few large transactions: each commit rewrites the index pages it touched
        if len(waiting) >= WRITE_ROWS:
            ctx.store.upsert(ctx.tenant, ctx.kb_id, waiting, refresh=False)
            waiting = []
        total_tokens += sum(s.token_count for s in batch)
        chunks += len(batch)
        report_progress(ctx, progress, "parse", min(batch[-1].end, total_chars - 1), total_chars, f"{chunks} chunks")
    if waiting:
        ctx.store.upsert(ctx.tenant, ctx.kb_id, waiting, refresh=False)
    ctx.store.refresh(ctx.tenant)
    report_progress(ctx, progress, "parse", total_chars, total_chars, f"{chunks} chunks")
    return ParseResult(chunks=chunks, tokens=total_tokens)


# an in-process embedder works on this process's cores: a batch of its texts is seconds of work
# (the local model: ~0.2 s of a core per chunk of 512 tokens, ~20 ms per entity or relation), so
# its batches are kept small enough that progress moves every few seconds even on a busy machine
_LOCAL_PARSE_CHUNKS = 16


def _parse_batch_chunks(ctx: KBContext) -> int:
    return _LOCAL_PARSE_CHUNKS if ctx.settings.embedding_provider == "local" else 64


def iter_document_chunks(ctx: KBContext, doc_id: str, parsed: ParsedDocument) -> Iterator[Chunk]:
    """A document's chunks, without vectors or search tokens (``store_chunks`` adds them), each as
    soon as the chunker has cut it: what extraction needs, which need not wait for the rest."""
    now = time.time()
    for s in parsed.iter_chunks(ctx.chunk_tokens, ctx.chunk_overlap):
        yield Chunk(id=chunk_id(doc_id, s.position), kb_id=ctx.kb_id, doc_id=doc_id, doc_name=parsed.name,
                    content=s.text, content_tokens="", title_tokens="",
                    position=s.position, start=s.start, end=s.end, token_count=s.token_count,
                    page=parsed.page_at(s.start) or 0, created=now)


@bulk_gc()
def store_chunks(ctx: KBContext, doc_ids: Sequence[str], chunks: Sequence[Sequence[Chunk]], *,
                 cancel: CancelCheck = never) -> list[ParseResult]:
    """``parse_document``'s embedding and writing for many small documents at once: their chunks
    are embedded in one batch and stored in one transaction, which for documents of a chunk or two
    costs a fraction of one embedding call and one commit per document."""
    check_cancel(cancel)
    vectors = iter(ctx.embed([c.content for doc_chunks in chunks for c in doc_chunks]))
    rows: list[dict] = []
    titles: dict[str, str] = {}
    for doc_chunks in chunks:
        for c in doc_chunks:
            c.vector = next(vectors)
            if c.doc_name not in titles:
                titles[c.doc_name] = token_string(c.doc_name)
            rows.append(replace(c, content_tokens=token_string(c.content), title_tokens=titles[c.doc_name]).to_doc())
            c.vector = None  # the store has it; a document in flight keeps only its text
    check_cancel(cancel)
    with ctx.store.batch():
        ids = list(doc_ids)
        for start in range(0, len(ids), 500):
            # earlier chunks of these documents (older versions, or a killed run) must not survive
            ctx.store.delete(ctx.tenant, [ctx.kb_id], [any_of("doc_id", ids[start:start + 500]),
                                                       missing("knowledge_graph_kwd")], refresh=False)
        for start in range(0, len(rows), WRITE_ROWS):
            ctx.store.upsert(ctx.tenant, ctx.kb_id, rows[start:start + WRITE_ROWS], refresh=False)
    ctx.store.refresh(ctx.tenant)
    return [ParseResult(chunks=len(c), tokens=sum(x.token_count for x in c)) for c in chunks]


def embed_ahead(ctx: KBContext, batches: Iterable[Sequence[str]], cancel: CancelCheck = never
                ) -> Iterator[list[np.ndarray]]:
    """The vectors of each batch of texts, in order. The next batch is being embedded while the
    caller stores this one, so the embedding endpoint's time and the store's overlap; batches are
    taken from ``batches`` one ahead of the caller."""
    ahead = iter(batches)
    first = next(ahead, None)
    if first is None:
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        check_cancel(cancel)
        pending: Future | None = pool.submit(ctx.embed, first)
        while pending is not None:
            vectors = pending.result()
            following = next(ahead, None)
            pending = None
            if following is not None:
                check_cancel(cancel)
                pending = pool.submit(ctx.embed, following)
            yield vectors


_CHUNK_FIELDS = ["id", "kb_id", "doc_id", "docnm_kwd", "content_with_weight", "position_int"]


def document_chunks(ctx: KBContext, doc_id: str) -> list[Chunk]:
    docs = ctx.store.scan(ctx.tenant, [ctx.kb_id], [eq("doc_id", doc_id), missing("knowledge_graph_kwd")],
                          fields=_CHUNK_FIELDS)
    return sorted((Chunk.from_doc(d) for d in docs), key=lambda c: c.position)


def document_chunk_pages(ctx: KBContext, doc_id: str, count: int, page: int) -> Iterator[list[Chunk]]:
    """``document_chunks`` of a document of ``count`` chunks, ``page`` chunks at a time by position."""
    for low in range(0, count, page):
        docs = ctx.store.scan(ctx.tenant, [ctx.kb_id], [eq("doc_id", doc_id), missing("knowledge_graph_kwd"),
                                                        Condition("position_int", "gte", low),
                                                        Condition("position_int", "lt", low + page)],
                              fields=_CHUNK_FIELDS)
        yield sorted((Chunk.from_doc(d) for d in docs), key=lambda c: c.position)
