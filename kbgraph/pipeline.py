"""The indexing steps as plain functions: parse, extract, merge, delete, refresh.

Each step is idempotent (deterministic ids; a rerun rewrites the same rows), resumable after a
crash (a rerun picks up from what is stored), reports progress through a callback and honours
a cancel check between units of work. The Celery tasks and the CLI both call these.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace

import numpy as np
import orjson

from kbgraph.config import Settings
from kbgraph.utils.gc_scope import bulk_gc
from kbgraph.graph.derive.aliases import AliasMap, load_aliases
from kbgraph.graph.derive.entities import entity_description_inputs
from kbgraph.graph.derive.mentions import MENTION_FORMAT, pairs_touching, touched_keys, touched_pairs, upgrade_mentions
from kbgraph.graph.derive.recompute import DeriveResult, recompute
from kbgraph.graph.derive.relations import relation_description_inputs
from kbgraph.graph.describe import Describer, SummaryError
from kbgraph.graph.extract.base import ChunkExtraction, ExtractionError, Extractor
from kbgraph.graph.extract.factory import build_extractor
from kbgraph.llm.base import CancelCheck, Cancelled, ChatModel, Embedder, LLMError, UsageLedger
from kbgraph.meta.schemas import GraphConfig
from kbgraph.parse.readers import ParsedDocument
from kbgraph.parse.tokenize import token_string
from kbgraph.utils.progress import Progress, ProgressFn, never, no_progress  # noqa: F401 (re-exported)
from kbgraph.store.base import Condition, DocStore, any_of, eq, exists, missing, vector_field
from kbgraph.store.records import (
    Chunk, CommunityReport, Entity, EntityMention, GraphMeta, Relation, RelationMention, ResolutionDecision, chunk_id,
    graph_meta_id,
)


# rows gathered before one store write: each write is a transaction, whose commit rewrites every
# index page it touched, so fewer and larger ones write less (a few MB of documents at most)
_WRITE_ROWS = 2048


@dataclass
class KBContext:
    """What every step needs to know about one knowledge base."""

    store: DocStore
    tenant: str
    kb_id: str
    settings: Settings
    embedder: Embedder
    chat: ChatModel | None = None
    graph: GraphConfig = field(default_factory=GraphConfig)
    chunk_tokens: int = 512
    chunk_overlap: int = 64
    ledger: UsageLedger = field(default_factory=UsageLedger)
    # merges leave descriptions over the budget to the refresh's summary pass (a run of many
    # documents: one summary per entity per run); False: merges summarize them at once (a worker's
    # single document, whose graph should be final when its task ends)
    defer_summaries: bool = True

    def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One float32 vector per text, as rows of one array: the stores take arrays as they take
        lists, and a round trip through Python floats would cost ~0.1 s per 3k vectors."""
        if not texts:
            return []
        vectors = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        return list(vectors)

    @property
    def vector_name(self) -> str:
        return vector_field(self.embedder.dim)

    def describer(self) -> Describer:
        """Descriptions as the graph holds them once the summary pass has run (what a rebuild gives)."""
        return Describer(self.chat, self.settings.summary_max_tokens, self.settings.language,
                         concurrency=self.settings.llm_concurrency, prompt_tokens=self.settings.summary_prompt_tokens)

    def merge_describer(self) -> Describer:
        """Descriptions as merges write them: over the budget, a stand-in left for the summary pass."""
        if not self.defer_summaries:
            return self.describer()
        return Describer(self.chat, self.settings.summary_max_tokens, self.settings.language,
                         prompt_tokens=self.settings.summary_prompt_tokens, deferred=True)


def _report(ctx: KBContext, progress: ProgressFn, phase: str, done: int, total: int, message: str = "") -> None:
    chat = [u for name, u in ctx.ledger.by_phase.items() if name != "embed"]
    progress(Progress(phase, done, total, message, llm_calls=sum(u.calls for u in chat),
                      tokens=sum(u.prompt_tokens + u.completion_tokens for u in chat)))


def _check(cancel: CancelCheck) -> None:
    if cancel():
        raise Cancelled("cancelled by request")


# ---------------------------------------------------------------------------------------- parse

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
    _report(ctx, progress, "parse", 0, total_chars, parsed.name)
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
        if len(waiting) >= _WRITE_ROWS:
            ctx.store.upsert(ctx.tenant, ctx.kb_id, waiting, refresh=False)
            waiting = []
        total_tokens += sum(s.token_count for s in batch)
        chunks += len(batch)
        _report(ctx, progress, "parse", min(batch[-1].end, total_chars - 1), total_chars, f"{chunks} chunks")
    if waiting:
        ctx.store.upsert(ctx.tenant, ctx.kb_id, waiting, refresh=False)
    ctx.store.refresh(ctx.tenant)
    _report(ctx, progress, "parse", total_chars, total_chars, f"{chunks} chunks")
    return ParseResult(chunks=chunks, tokens=total_tokens)


# an in-process embedder works on this process's cores: a batch of its texts is seconds of work
# (the local model: ~0.2 s of a core per chunk of 512 tokens, ~20 ms per entity or relation), so
# its batches are kept small enough that progress moves every few seconds even on a busy machine
_LOCAL_PARSE_CHUNKS = 16


def _parse_batch_chunks(ctx: KBContext) -> int:
    return _LOCAL_PARSE_CHUNKS if ctx.settings.embedding_provider == "local" else 64


def chunk_documents(ctx: KBContext, docs: Sequence[tuple[str, ParsedDocument]]) -> list[list[Chunk]]:
    """Each document's chunks, without vectors or search tokens (store_chunks adds them): what
    extraction needs, which need not wait for the rest."""
    return [list(iter_document_chunks(ctx, doc_id, parsed)) for doc_id, parsed in docs]


def iter_document_chunks(ctx: KBContext, doc_id: str, parsed: ParsedDocument) -> Iterator[Chunk]:
    """``chunk_documents`` for one document, a chunk as soon as the chunker has cut it."""
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
    _check(cancel)
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
    _check(cancel)
    with ctx.store.batch():
        ids = list(doc_ids)
        for start in range(0, len(ids), 500):
            # earlier chunks of these documents (older versions, or a killed run) must not survive
            ctx.store.delete(ctx.tenant, [ctx.kb_id], [any_of("doc_id", ids[start:start + 500]),
                                                       missing("knowledge_graph_kwd")], refresh=False)
        for start in range(0, len(rows), _WRITE_ROWS):
            ctx.store.upsert(ctx.tenant, ctx.kb_id, rows[start:start + _WRITE_ROWS], refresh=False)
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
        _check(cancel)
        pending: Future | None = pool.submit(ctx.embed, first)
        while pending is not None:
            vectors = pending.result()
            following = next(ahead, None)
            pending = None
            if following is not None:
                _check(cancel)
                pending = pool.submit(ctx.embed, following)
            yield vectors


# -------------------------------------------------------------------------------------- extract

@dataclass
class ExtractResult:
    chunks: int = 0
    failed_chunks: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    entity_mentions: int = 0
    relation_mentions: int = 0
    dropped_records: int = 0
    llm_calls: int = 0


def document_chunks(ctx: KBContext, doc_id: str) -> list[Chunk]:
    docs = ctx.store.scan(ctx.tenant, [ctx.kb_id], [eq("doc_id", doc_id), missing("knowledge_graph_kwd")],
                          fields=["id", "kb_id", "doc_id", "docnm_kwd", "content_with_weight", "position_int"])
    return sorted((Chunk.from_doc(d) for d in docs), key=lambda c: c.position)


def document_chunk_pages(ctx: KBContext, doc_id: str, count: int, page: int) -> Iterator[list[Chunk]]:
    """``document_chunks`` of a document of ``count`` chunks, ``page`` chunks at a time by position."""
    for low in range(0, count, page):
        docs = ctx.store.scan(ctx.tenant, [ctx.kb_id], [eq("doc_id", doc_id), missing("knowledge_graph_kwd"),
                                                        Condition("position_int", "gte", low),
                                                        Condition("position_int", "lt", low + page)],
                              fields=["id", "kb_id", "doc_id", "docnm_kwd", "content_with_weight", "position_int"])
        yield sorted((Chunk.from_doc(d) for d in docs), key=lambda c: c.position)


def build_document_extractor(ctx: KBContext) -> Extractor:
    return build_extractor(ctx.graph.method, ctx.chat, list(ctx.graph.entity_types), language=ctx.settings.language,
                           max_gleanings=ctx.graph.max_gleanings, glean_min_tokens=ctx.settings.glean_min_tokens,
                           glean_policy=ctx.settings.glean_policy, glean_missed_names=ctx.settings.glean_missed_names,
                           ledger=ctx.ledger)


def extract_chunk(ctx: KBContext, extractor: Extractor, chunk: Chunk, cancel: CancelCheck = never
                  ) -> tuple[ChunkExtraction | None, str]:
    """One chunk's extraction, or None and why the extractor gave up on it (after its retries)."""
    _check(cancel)
    try:
        return extractor.extract(chunk.content, cancel=cancel), ""
    except Cancelled:
        raise
    except (LLMError, ExtractionError) as exc:
        return None, str(exc)


@bulk_gc()
def extract_document(ctx: KBContext, doc_id: str, *, progress: ProgressFn = no_progress,
                     cancel: CancelCheck = never, extractor: Extractor | None = None) -> ExtractResult:
    """Extract entity and relation mentions from every chunk of a document and store them.

    The document's earlier mentions are replaced. A chunk whose extraction fails (after the
    extractor's own retries) is reported in ``failed_chunks`` and the others go on.
    """
    extractor = extractor or build_document_extractor(ctx)
    chunks = document_chunks(ctx, doc_id)
    result = ExtractResult(chunks=len(chunks))
    ctx.store.delete(ctx.tenant, [ctx.kb_id], [eq("doc_id", doc_id), eq("knowledge_graph_kwd", EntityMention.KIND)])
    ctx.store.delete(ctx.tenant, [ctx.kb_id], [eq("doc_id", doc_id), eq("knowledge_graph_kwd", RelationMention.KIND)])
    _report(ctx, progress, "extract", 0, len(chunks))

    def run(chunk: Chunk) -> tuple[Chunk, ChunkExtraction | None, str]:
        _check(cancel)
        try:
            return chunk, extractor.extract(chunk.content, cancel=cancel), ""
        except Cancelled:
            raise
        except (LLMError, ExtractionError) as exc:  # the extractor gave up on this chunk
            return chunk, None, str(exc)

    workers = 1 if ctx.graph.method == "nlp" else max(1, ctx.settings.llm_concurrency)
    pending: list[dict] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for done, (chunk, extraction, error) in enumerate(pool.map(run, chunks), start=1):
            if extraction is None:
                result.failed_chunks.append(chunk.id)
                result.errors.append(error)
            else:
                result.llm_calls += extraction.llm_calls
                result.dropped_records += extraction.dropped
                entities, relations = extraction.to_mentions(ctx.kb_id, chunk.doc_id, chunk.id)
                pending += [m.to_doc() for m in entities] + [m.to_doc() for m in relations]
                result.entity_mentions += len(entities)
                result.relation_mentions += len(relations)
            if len(pending) >= _WRITE_ROWS:
                ctx.store.upsert(ctx.tenant, ctx.kb_id, pending, refresh=False)
                pending = []
            _report(ctx, progress, "extract", done, len(chunks))
    if pending:
        ctx.store.upsert(ctx.tenant, ctx.kb_id, pending, refresh=False)
    ctx.store.refresh(ctx.tenant)
    return result


# ---------------------------------------------------------------------------------------- merge

def load_graph_meta(ctx: KBContext) -> GraphMeta:
    found = ctx.store.get(ctx.tenant, [ctx.kb_id], [graph_meta_id(ctx.kb_id)])
    return GraphMeta.from_doc(found[0]) if found else GraphMeta(kb_id=ctx.kb_id)


def save_graph_meta(ctx: KBContext, meta: GraphMeta) -> None:
    ctx.store.upsert(ctx.tenant, ctx.kb_id, [meta.to_doc()])


def _count_kind(ctx: KBContext, kind: str) -> int:
    return ctx.store.count(ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", kind)])


def _bump_version(ctx: KBContext, change: DeriveResult, meta: GraphMeta | None = None) -> GraphMeta:
    """A new graph version when rows changed; counts kept by difference (a recount of every row
    per merge would grow with the knowledge base; refresh_kb recounts exactly). ``meta``: the row
    as this write transaction already read it."""
    meta = meta or load_graph_meta(ctx)
    if not change.changed:
        return meta
    meta.version += 1
    meta.entity_count += change.entities_created - change.entities_removed
    meta.relation_count += change.relations_created - change.relations_removed
    save_graph_meta(ctx, meta)
    return meta


def _ensure_mention_format(ctx: KBContext) -> GraphMeta:
    """Upgrade mentions an earlier kbgraph stored, once per KB, before anything derives from them;
    returns the KB's graph_meta row."""
    meta = load_graph_meta(ctx)
    if meta.mention_format < MENTION_FORMAT:
        upgrade_mentions(ctx.store, ctx.tenant, ctx.kb_id)
        meta.mention_format = MENTION_FORMAT
        save_graph_meta(ctx, meta)
    return meta


def _rows_citing(ctx: KBContext, doc_ids: Sequence[str]) -> tuple[set[str], set[tuple[str, str]]]:
    """Keys of derived rows that cite the documents (they may come from mentions since replaced)."""
    keys: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    for start in range(0, len(doc_ids), 500):
        cites = any_of("doc_ids_kwd", list(doc_ids[start:start + 500]))
        keys |= {d["entity_key_kwd"] for d in ctx.store.scan(
            ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", Entity.KIND), cites], fields=["entity_key_kwd"])}
        pairs |= {(d["src_key_kwd"], d["tgt_key_kwd"]) for d in ctx.store.scan(
            ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", Relation.KIND), cites],
            fields=["src_key_kwd", "tgt_key_kwd"])}
    return keys, pairs


@bulk_gc()
def merge_document(ctx: KBContext, doc_id: str) -> DeriveResult:
    """Bring the KB's entity and relation rows up to date with one document's mentions.

    Touches only the keys the document's mentions name, plus the keys of rows that still cite
    the document (an earlier extraction of it may have named keys the new one does not).
    """
    return merge_documents(ctx, [doc_id])


@bulk_gc()
def merge_documents(ctx: KBContext, doc_ids: Sequence[str], mentions: Sequence[dict] = (), *,
                    progress: Callable[[int, int], None] | None = None) -> DeriveResult:
    """``merge_document`` for several documents at once, in one transaction: a row touched by many
    of them is derived (and written) once. The graph is a function of the mentions, so this equals
    merging them one by one. ``mentions``: rows of these documents to store first, replacing the
    ones they had (in the same transaction: mentions and the rows derived from them agree).
    ``progress(done, total)``: entity and relation rows derived so far."""
    with ctx.store.batch():
        if mentions:
            replace_mentions(ctx, doc_ids, mentions)
        return _merge(ctx, list(doc_ids), progress)


def replace_mentions(ctx: KBContext, doc_ids: Sequence[str], mentions: Sequence[dict]) -> None:
    for start in range(0, len(doc_ids), 500):
        ids = list(doc_ids[start:start + 500])
        ctx.store.delete(ctx.tenant, [ctx.kb_id], [any_of("doc_id", ids),
                                                   any_of("knowledge_graph_kwd", [EntityMention.KIND,
                                                                                  RelationMention.KIND])],
                         refresh=False)
    for start in range(0, len(mentions), _WRITE_ROWS):
        ctx.store.upsert(ctx.tenant, ctx.kb_id, list(mentions[start:start + _WRITE_ROWS]), refresh=False)


# a merge whose documents hold more entity mentions than this does not keep them all to extend
# stored rows with (``recompute``'s ``added``): each row is derived from its mentions instead, a
# batch of rows at a time, so a 50 MB file's merge holds a batch's mentions, not the file's
_ADDED_MENTIONS = 50_000
# ... and derives its rows in batches of at most this many mentions (counted first: a query more)
_DERIVE_MENTIONS = 20_000


def _merge(ctx: KBContext, doc_ids: list[str], progress: Callable[[int, int], None] | None = None) -> DeriveResult:
    meta = _ensure_mention_format(ctx)
    added: dict[str, list[EntityMention]] | None = {}
    keys: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    for start in range(0, len(doc_ids), 500):
        ids = doc_ids[start:start + 500]
        where = [eq("knowledge_graph_kwd", EntityMention.KIND), any_of("doc_id", ids)]
        if added is not None and ctx.store.count(ctx.tenant, [ctx.kb_id], where) > _ADDED_MENTIONS:
            keys |= set(added)
            added = None
        if added is None:
            keys |= {d["entity_key_kwd"] for d in ctx.store.scan(ctx.tenant, [ctx.kb_id], where,
                                                                  fields=["entity_key_kwd"])}
        else:
            for doc in ctx.store.scan(ctx.tenant, [ctx.kb_id], where):
                mention = EntityMention.from_doc(doc)
                added.setdefault(mention.key, []).append(mention)
        pairs |= touched_pairs(ctx.store, ctx.tenant, ctx.kb_id, [any_of("doc_id", ids)])
    cited_keys, cited_pairs = _rows_citing(ctx, doc_ids)
    keys |= set(added or ())
    change = recompute(ctx.store, ctx.tenant, ctx.kb_id, keys | cited_keys, pairs | cited_pairs,
                       ctx.merge_describer(), None, load_aliases(ctx.store, ctx.tenant, ctx.kb_id),
                       ctx.vector_name, added=added, progress=progress,
                       mention_budget=_DERIVE_MENTIONS if added is None else None)
    _bump_version(ctx, change, meta)  # nothing else writes the row while the merge holds the KB
    return change


@bulk_gc()
def delete_document(ctx: KBContext, doc_id: str) -> DeriveResult:
    """Remove a document's chunks and mentions and re-derive exactly the rows it touched."""
    with ctx.store.batch():  # all of it or nothing
        _ensure_mention_format(ctx)
        keys, pairs = touched_keys(ctx.store, ctx.tenant, ctx.kb_id, [eq("doc_id", doc_id)])
        cited_keys, cited_pairs = _rows_citing(ctx, [doc_id])
        ctx.store.delete(ctx.tenant, [ctx.kb_id], [eq("doc_id", doc_id)])
        change = DeriveResult()
        if keys or pairs or cited_keys or cited_pairs:
            change = recompute(ctx.store, ctx.tenant, ctx.kb_id, keys | cited_keys, pairs | cited_pairs,
                               ctx.merge_describer(), None, load_aliases(ctx.store, ctx.tenant, ctx.kb_id),
                               ctx.vector_name)
            _bump_version(ctx, change)
        return change


def drop_graph(ctx: KBContext) -> None:
    """Remove the knowledge base's whole graph (mentions, entities, relations, communities, reports,
    resolution decisions); its chunks stay. The version moves on, so no cache serves the old graph."""
    with ctx.store.batch():
        version = load_graph_meta(ctx).version
        ctx.store.delete(ctx.tenant, [ctx.kb_id], [exists("knowledge_graph_kwd")])
        save_graph_meta(ctx, GraphMeta(kb_id=ctx.kb_id, version=version + 1, mention_format=MENTION_FORMAT))
    ctx.store.refresh(ctx.tenant)


# ------------------------------------------------------------------------------------ KB phases

@dataclass
class RefreshResult:
    version: int
    pagerank_updated: int = 0
    communities: int = 0
    reports_generated: int = 0
    reports_reused: int = 0
    reports_removed: int = 0
    report_fallbacks: int = 0
    embedded: int = 0
    summarized: int = 0
    # document id -> why a description it contributes to could not be summarized (left pending)
    summary_failures: dict[str, str] = field(default_factory=dict)
    resolution_asked: int = 0
    resolution_merged: int = 0
    skipped: list[str] = field(default_factory=list)


@dataclass
class GraphRows:
    """Every entity and relation row of a KB, read once per refresh phase that needs them all."""

    entities: list[Entity]
    relations: list[Relation]
    # rows whose text changed since their last vector (``embedded_int`` 0)
    unembedded: set[str] = field(default_factory=set)
    # rows whose description waits for the summary pass (``summary_pending_int`` 1)
    pending: set[str] = field(default_factory=set)


def _graph_rows(ctx: KBContext) -> GraphRows:
    rows = GraphRows([], [])
    for kind, into in ((Entity, rows.entities), (Relation, rows.relations)):
        for doc in ctx.store.scan(ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", kind.KIND)]):
            into.append(kind.from_doc(doc))
            if not doc.get("embedded_int"):
                rows.unembedded.add(doc["id"])
            if doc.get("summary_pending_int"):
                rows.pending.add(doc["id"])
    return rows


def summarize_pending(ctx: KBContext, rows: GraphRows, *, progress: ProgressFn = no_progress,
                      cancel: CancelCheck = never, failures: dict[str, str] | None = None,
                      on_row: Callable[[str], None] | None = None) -> int:
    """Give every row of ``rows`` whose description waits for a summary (merges leave summaries to
    this pass, kbgraph.graph.describe) the summary of all its fragments, several at a time; the
    rows are then due for a new vector. Returns how many rows were summarized.

    An entity touched by many documents of a batch is summarized once, from its fragments as the
    batch left them: the same description a rebuild from the mentions would ask for. A summary the
    model botched twice (describe.SummaryError) leaves its row pending; ``failures`` then gets the
    error for each document the row cites. ``on_row(row_id)``: a row's summary is in (or failed), in
    the order the answers come.
    """
    failures = failures if failures is not None else {}
    entities = [e for e in rows.entities if e.id in rows.pending]
    relations = [r for r in rows.relations if r.id in rows.pending]
    total = len(entities) + len(relations)
    if not total:
        return 0
    _report(ctx, progress, "summaries", 0, total)
    describer = ctx.describer()
    aliases = load_aliases(ctx.store, ctx.tenant, ctx.kb_id)
    entity_inputs = entity_description_inputs(ctx.store, ctx.tenant, ctx.kb_id, [e.key for e in entities], aliases)
    relation_inputs = relation_description_inputs(ctx.store, ctx.tenant, ctx.kb_id, relations, aliases)
    work: list[tuple[Entity | Relation, tuple[str, str, list[str]]]] = (
        [(e, entity_inputs[e.key]) for e in entities if e.key in entity_inputs]
        + [(r, relation_inputs[(r.src_key, r.tgt_key)]) for r in relations if (r.src_key, r.tgt_key) in relation_inputs])

    def describe(item: tuple[Entity | Relation, tuple[str, str, list[str]]]) -> tuple[Entity | Relation, str | None]:
        _check(cancel)
        row, (kind, name, fragments) = item
        try:
            return row, describer.summary(kind, name, fragments)
        except SummaryError as exc:  # the row keeps its stand-in and stays pending: never garbage
            for doc_id in row.doc_ids:
                failures.setdefault(doc_id, str(exc))
            return row, None

    waiting: list[dict] = []
    workers = max(1, min(ctx.settings.llm_concurrency, len(work))) if ctx.chat is not None else 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        answers = as_completed([pool.submit(describe, item) for item in work])
        for done, (row, description) in enumerate((answer.result() for answer in answers), start=1):
            if description is None:
                if on_row is not None:
                    on_row(row.id)
                continue
            row.description, row.summary_pending, row.vector = description, False, None
            if isinstance(row, Entity):
                row.derivation = None  # the description is no longer its first fragments
                row.description_tokens = token_string(description)
            else:
                row.description_tokens = token_string(" ".join([row.src_name, row.tgt_name, description,
                                                                *row.keywords]))
            rows.unembedded.add(row.id)
            waiting.append(row.to_doc())
            if on_row is not None:
                on_row(row.id)
            if len(waiting) >= _WRITE_ROWS:
                ctx.store.upsert(ctx.tenant, ctx.kb_id, waiting, refresh=False)
                waiting = []
            _report(ctx, progress, "summaries", done, total)
    if waiting:
        ctx.store.upsert(ctx.tenant, ctx.kb_id, waiting, refresh=False)
    rows.pending.clear()
    ctx.store.refresh(ctx.tenant)
    return len(work)


def _refresh_pagerank(ctx: KBContext, entities: list[Entity], relations: list[Relation], changes: RowChanges) -> int:
    from kbgraph.graph.pagerank import weighted_pagerank

    ranks = weighted_pagerank([(r.src_key, r.tgt_key, r.weight) for r in relations], [e.key for e in entities])
    updated = 0
    for entity in entities:
        rank = round(float(ranks.get(entity.key, 0.0)), 9)
        if rank != round(entity.pagerank, 9):
            changes.add(entity.id, {"pagerank_flt": rank})
            entity.pagerank = rank
            updated += 1
    return updated


def _existing_reports(ctx: KBContext) -> dict[str, str]:
    """Report id -> the hash of the input it was written from ("" for none or a fallback)."""
    return {d["id"]: d.get("input_hash_kwd", "") for d in ctx.store.scan(
        ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", CommunityReport.KIND)], fields=["id", "input_hash_kwd"])}


def _report_input_hash(members: Sequence[Entity], relations: Sequence[Relation], by_llm: bool,
                       order: tuple[list[str], list[tuple[str, str]]] | None = None) -> str:
    """What a report is written from, as one hash: its members' names, types and descriptions and the
    relations among them. A report is reused only while this stays the same, so it never describes
    an earlier graph (members alone are not enough: a description or relation may have changed).
    A put-together report also tells its members and relations in an ``order`` (by PageRank and
    mentions) that a deletion elsewhere can change while its rows stay the same: the order is part
    of its hash (a model's report is not asked again for that)."""
    digest = hashlib.sha256(b"llm" if by_llm else b"extractive")
    for e in sorted(members, key=lambda e: e.key):
        digest.update(orjson.dumps([e.key, e.name, e.type, e.description]))
    for r in sorted(relations, key=lambda r: (r.src_key, r.tgt_key)):
        digest.update(orjson.dumps([r.src_key, r.tgt_key, r.description, r.weight]))
    if not by_llm and order is not None:
        digest.update(orjson.dumps(order))
    return digest.hexdigest()


_BY_MODEL = "by the model"


def _report_author(ctx: KBContext, entities: int, component: str, largest: str) -> str:
    """Who writes a community's report: the model (``_BY_MODEL``), else its rows, for the reason given.
    A single entity has nothing to summarize beyond its own description, and a community under
    ``report_min_entities`` (a pair and its one relation) little beyond its rows. Under
    ``report_scope = "largest"`` only the largest component's communities are written by the model:
    the islands outside it are what one or two documents say on their own, which their rows and
    chunks already hold, and they cost half the report calls or more (100 MuSiQue passages: 62 of
    122; a book five times over, names renamed per copy: 116 of 144)."""
    if ctx.chat is None:
        return "from rows: no model"
    if entities < max(2, ctx.settings.report_min_entities):
        return "from rows: small community"
    if ctx.settings.report_scope != "all" and component != largest:
        return "from rows: outside the largest component"
    return _BY_MODEL


def _refresh_communities(ctx: KBContext, meta: GraphMeta, entities: list[Entity], relations: list[Relation],
                         result: RefreshResult, changes: RowChanges, progress: ProgressFn, cancel: CancelCheck, *,
                         summaries: _SummaryWatch | None = None) -> None:
    """Detect communities and write the reports whose inputs changed. ``summaries``: the summary
    pass running meanwhile; a community with a member (or relation) it is summarizing is reported
    once those rows are summarized, from their new descriptions, the others at once."""
    from kbgraph.graph.communities import detect_communities, largest_component
    from kbgraph.graph.reports import extractive_order, extractive_report, llm_report, report_text
    from kbgraph.store.records import report_id

    _report(ctx, progress, "communities", 0, 1)
    communities = detect_communities([e.key for e in entities], [(r.src_key, r.tgt_key, r.weight) for r in relations],
                                     max_cluster_size=ctx.settings.max_cluster_size)
    _report(ctx, progress, "communities", 1, 1, f"{len(communities)} communities")
    result.communities = len(communities)
    largest = largest_component(communities)
    by_key = {e.key: e for e in entities}
    touching: dict[str, list[int]] = {}
    for number, r in enumerate(relations):
        touching.setdefault(r.src_key, []).append(number)

    def member_relations(members: set[str]) -> list[Relation]:
        # through an index by source key, not a scan of every relation per community; in the
        # relations' own order, as the scan gave them
        found = sorted(n for key in members for n in touching.get(key, ()) if relations[n].tgt_key in members)
        return [relations[n] for n in found]

    existing = _existing_reports(ctx)
    wanted = {report_id(ctx.kb_id, c.level, c.member_keys): c for c in communities}
    authors = {rid: _report_author(ctx, sum(1 for k in c.member_keys if k in by_key), c.component, largest)
               for rid, c in wanted.items()}

    def summarized_rows(community: object) -> frozenset[str]:
        """The rows of ``community`` the running summary pass rewrites (none without one)."""
        if summaries is None or not summaries.pending:
            return frozenset()
        members = set(community.member_keys)
        return summaries.waits([by_key[k].id for k in members if k in by_key]
                               + [r.id for r in member_relations(members)])

    # the model's reports go out first: the put-together ones cost no call and fill the wait
    by_model_first = sorted(wanted, key=lambda rid: (authors[rid] != _BY_MODEL, rid))
    waits = {rid: summarized_rows(wanted[rid]) for rid in by_model_first}
    inputs: dict[str, str] = {}

    def changed(rid: str) -> bool:
        c = wanted[rid]
        members = [by_key[k] for k in c.member_keys if k in by_key]
        inner = member_relations(set(c.member_keys))
        by_model = authors[rid] == _BY_MODEL
        inputs[rid] = _report_input_hash(members, inner, by_model,
                                         None if by_model else extractive_order(c, members, inner))
        return not existing.get(rid) or existing[rid] != inputs[rid]

    def write(rid: str) -> CommunityReport:
        _check(cancel)
        community = wanted[rid]
        members = set(community.member_keys)
        member_entities = [by_key[k] for k in community.member_keys if k in by_key]
        if authors[rid] == _BY_MODEL:
            with gate:
                content = llm_report(ctx.chat, community, member_entities, member_relations(members),
                                     language=ctx.settings.language)
        else:
            content = extractive_report(community, member_entities, member_relations(members))
        if getattr(content, "fallback", False):
            result.report_fallbacks += 1
        return CommunityReport(
            kb_id=ctx.kb_id, level=community.level, community=community.label, parent=community.parent,
            member_keys=sorted(community.member_keys), title=content.title, summary=content.summary,
            findings=list(content.findings), rating=float(content.rating),
            rating_explanation=content.rating_explanation, graph_version=meta.version,
            content_tokens=token_string(report_text(content)),
            # a fallback is written again at the next refresh, when the model may answer
            input_hash="" if getattr(content, "fallback", False) else inputs[rid],
        )

    workers = max(1, ctx.settings.llm_concurrency) if ctx.chat is not None else 1
    # twice the calls allowed in flight: a thread writing a prompt or reading an answer would
    # otherwise hold a model slot idle
    threads = 2 * workers if ctx.chat is not None else 1
    gate = _SummariesFirst(workers, threads, summaries)
    todo: list[str] = []
    # what the report threads hand back, as it comes: a written report's future, None for a report
    # kept as it was, or the summary pass's failure
    events: queue.SimpleQueue = queue.SimpleQueue()
    batch: list[CommunityReport] = []
    waiting: list[dict] = []
    total = len(wanted)
    _report(ctx, progress, "reports", 0, total)
    # the reports' vectors are fetched beside the reports still being written, several batches at once
    embedding: list[tuple[list[CommunityReport], Future]] = []
    # the put-together reports on a thread of their own: hundreds of them queued in the model's
    # pool held the model's reports that waited for a summary behind them
    with ThreadPoolExecutor(max_workers=threads) as pool, ThreadPoolExecutor(max_workers=1) as rows_pool, \
            ThreadPoolExecutor(max_workers=max(1, ctx.settings.embedding_concurrency),
                               thread_name_prefix="kbgraph-report-vectors") as vector_pool:

        def start(rid: str) -> None:
            # run by the summary thread for a report that waited: anything going wrong is handed on
            try:
                failure = summaries.failure() if summaries is not None else None
                if failure is not None:
                    events.put(failure)
                elif changed(rid):
                    todo.append(rid)
                    (pool if authors[rid] == _BY_MODEL else rows_pool).submit(write, rid).add_done_callback(events.put)
                else:
                    events.put(None)
            except BaseException as exc:  # the pool closed after a failure: nobody waits any more
                events.put(exc)

        for rid in by_model_first:
            if summaries is not None and waits[rid]:
                summaries.when_done(waits[rid], functools.partial(start, rid))
            else:
                start(rid)
        # as they are written, not in their order: a batch of vectors goes out once 64 are in (the
        # order held the put-together reports behind the slowest LLM one, and with them their vectors)
        for done in range(1, total + 1):
            event = events.get()
            if isinstance(event, BaseException):
                raise event
            last = done == total
            if event is not None:
                batch.append(event.result())
            if batch and (len(batch) >= 64 or last):
                embedding.append((batch, vector_pool.submit(ctx.embed, [f"{r.title}\n{r.summary}" for r in batch])))
                batch = []
            while embedding and (embedding[0][1].done() or last):
                embedded, vectors = embedding.pop(0)
                for r, v in zip(embedded, vectors.result()):
                    r.vector = v
                waiting += [r.to_doc() for r in embedded]
            if len(waiting) >= _WRITE_ROWS or (waiting and last):
                ctx.store.upsert(ctx.tenant, ctx.kb_id, waiting, refresh=False)
                waiting = []
            _report(ctx, progress, "reports", done, total)
    result.reports_reused = len(wanted) - len(todo)
    result.reports_generated = len(todo)
    for rid in todo:
        ctx.ledger.count(f"report: {authors[rid]}")
    stale = sorted(existing.keys() - wanted.keys())
    if stale:
        ctx.store.delete(ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", CommunityReport.KIND),
                                                   Condition("id", "in", stale)])
    result.reports_removed = len(stale)

    labels: dict[str, set[str]] = {e.key: set() for e in entities}
    for community in communities:
        for key in community.member_keys:
            labels.setdefault(key, set()).add(community.label)
    for e in entities:
        if sorted(labels.get(e.key, ())) != sorted(e.community_ids):
            changes.add(e.id, {"community_ids_kwd": sorted(labels.get(e.key, ()))})
    meta.report_count = len(wanted)


class _SummariesFirst:
    """While the summary pass runs, the reports leave it the calls it still needs (one per row it has
    yet to summarize, up to all but one of the model's calls): a report waiting for a summary then
    starts sooner. Without this the report calls, queued first at the model's limit, delayed the
    summaries by a wave or two, and every report waiting for them with them. Each summary that comes
    in hands its call to the reports, and the end of the pass hands them the rest."""

    def __init__(self, calls: int, threads: int, summaries: _SummaryWatch | None) -> None:
        self._lock = threading.Lock()
        self._held = self._spare = self._left = 0
        if summaries is None or not summaries.pending:
            self._slots = threading.Semaphore(threads)
            return
        with self._lock:  # a summary may come in while this is set up
            self._left = summaries.on_each_row(self._summary_in)
            self._held = min(calls - 1, self._left)
            self._spare = threads - calls  # the report threads beyond the model's calls
            self._slots = threading.Semaphore(threads - self._held - self._spare)
        summaries.when_done(summaries.pending, self._pass_over)

    def _summary_in(self) -> None:
        with self._lock:
            self._left -= 1
            freed = max(0, self._held - self._left)
            self._held -= freed
        if freed:
            self._slots.release(freed)

    def _pass_over(self) -> None:
        with self._lock:
            freed, self._held, self._spare = self._held + self._spare, 0, 0
        if freed:
            self._slots.release(freed)

    def __enter__(self) -> None:
        self._slots.acquire()

    def __exit__(self, *exc: object) -> None:
        self._slots.release()


def _regroup(ctx: KBContext, before: AliasMap, after: AliasMap) -> DeriveResult:
    """Re-derive every key whose alias group changed between two alias maps."""
    changed = {k for k in before.canonical.keys() ^ after.canonical.keys()}
    changed |= {k for k in before.canonical.keys() & after.canonical.keys() if before.canon(k) != after.canon(k)}
    keys = {k for key in changed for k in (key, before.canon(key), after.canon(key))}
    keys = {m for k in keys for m in after.members(k) | before.members(k)}
    if not keys:
        return DeriveResult()
    _ensure_mention_format(ctx)
    pairs = pairs_touching(ctx.store, ctx.tenant, ctx.kb_id, keys)
    raw_pairs = {(d["src_key_kwd"], d["tgt_key_kwd"]) for d in ctx.store.scan(
        ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", RelationMention.KIND), any_of("src_key_kwd", sorted(keys))],
        fields=["src_key_kwd", "tgt_key_kwd"])}
    raw_pairs |= {(d["src_key_kwd"], d["tgt_key_kwd"]) for d in ctx.store.scan(
        ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", RelationMention.KIND), any_of("tgt_key_kwd", sorted(keys))],
        fields=["src_key_kwd", "tgt_key_kwd"])}
    change = recompute(ctx.store, ctx.tenant, ctx.kb_id, keys, pairs | raw_pairs, ctx.merge_describer(), None,
                       after, ctx.vector_name)
    _bump_version(ctx, change)
    return change


def record_decisions(ctx: KBContext, decisions: Sequence[ResolutionDecision]) -> DeriveResult:
    """Store resolution decisions (new or revised) and re-derive the entities whose merges changed."""
    before = load_aliases(ctx.store, ctx.tenant, ctx.kb_id)
    if decisions:
        ctx.store.upsert(ctx.tenant, ctx.kb_id, [d.to_doc() for d in decisions])
    return _regroup(ctx, before, load_aliases(ctx.store, ctx.tenant, ctx.kb_id))


def _refresh_resolution(ctx: KBContext, entities: list[Entity], result: "RefreshResult",
                        cancel: CancelCheck, max_pairs: int = 2000) -> None:
    from kbgraph.graph.resolution import candidate_pairs, judge_pairs

    decided = {(d["key_a_kwd"], d["key_b_kwd"]) for d in ctx.store.scan(
        ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", ResolutionDecision.KIND)], fields=["key_a_kwd", "key_b_kwd"])}
    pairs = candidate_pairs(entities, None, max_pairs=max_pairs, skip=decided)
    by_key = {e.key: e for e in entities}
    judged = judge_pairs(ctx.chat, pairs, by_key, cancel=cancel) if pairs else []
    result.resolution_asked = len(pairs)
    result.resolution_merged = sum(1 for d in judged if d.same)
    record_decisions(ctx, [ResolutionDecision(ctx.kb_id, d.a, d.b, d.same) for d in judged])


class RowChanges:
    """Field changes to existing rows, gathered across refresh phases and written as one patch per
    row: an entity's new vector, PageRank and communities cost one rewrite of its row, not three.
    Written when ``limit`` rows are waiting (bounding memory on a large refresh) and by ``write``."""

    def __init__(self, ctx: KBContext, limit: int = 4096) -> None:
        self.ctx = ctx
        self.limit = limit
        self.rows: dict[str, dict] = {}
        self._lock = threading.RLock()  # the embedding pass may add from its own thread

    def add(self, row_id: str, fields: dict) -> None:
        with self._lock:
            self.rows.setdefault(row_id, {}).update(fields)
            if len(self.rows) >= self.limit:
                self.write()

    def write(self) -> None:
        with self._lock:
            if self.rows:
                self.ctx.store.patch(self.ctx.tenant, self.ctx.kb_id, self.rows, refresh=False)
                self.rows = {}


def embed_pending(ctx: KBContext, rows: GraphRows, *, progress: ProgressFn = no_progress,
                  cancel: CancelCheck = never, batch_size: int = 0, into: RowChanges | None = None) -> int:
    """Give every entity and relation row of ``rows`` whose text changed since its last vector a
    new one.

    Merges leave this to one pass per refresh, so a row touched by many documents of one indexing
    run is embedded once, in large batches, instead of once per document. With ``into`` the new
    vectors join those changes instead of being written at once.
    """
    from kbgraph.graph.derive.vectors import entity_name_text, entity_text, entity_vector_from_chunk, relation_text

    # a batch fills every request the embedder may have in flight (a remote one waits on the
    # network per request: 2,212 rows took nine serial 0.8 s round trips at 256 a batch)
    batch_size = batch_size or max(256, ctx.settings.embedding_batch_size * ctx.settings.embedding_concurrency)
    relations = [r for r in rows.relations if r.id in rows.unembedded]
    from_chunks = 0
    if relations and ctx.settings.relation_vectors_from_chunks:
        relations, from_chunks = _relation_vectors_from_chunks(ctx, relations, into)
    entities = [e for e in rows.entities if e.id in rows.unembedded]
    # an entity of one chunk embeds its name only, its vector made with the chunk's (entity_vectors)
    single = ({e.id for e in entities if len(e.chunk_ids) == 1}
              if ctx.settings.entity_vectors_from_chunk else set())
    # entities and relations in the same batches: one round trip less when both are few
    pending: list[tuple[Entity | Relation, Callable[..., str]]] = (
        [(e, entity_name_text if e.id in single else entity_text) for e in entities]
        + [(r, relation_text) for r in relations])
    if ctx.settings.embedding_provider == "local":
        # no round trips to save: a batch per request, so progress moves every second or two; the
        # rows sorted by length first, so a small batch pads as little as the embedder's own sort
        batch_size = min(batch_size, ctx.settings.embedding_batch_size)
        pending.sort(key=lambda item: len(item[1](item[0])))
    total = from_chunks + len(pending)
    done = from_chunks
    _report(ctx, progress, "embed", done, total)
    batches = [pending[start:start + batch_size] for start in range(0, len(pending), batch_size)]
    texts = [[text_of(row) for row, text_of in batch] for batch in batches]
    chunkless: list[Entity] = []
    for vectors, batch in zip(embed_ahead(ctx, texts, cancel), batches):
        changes = into or RowChanges(ctx)
        chunks = _single_chunk_vectors(ctx, [row for row, _ in batch if row.id in single])
        for (row, _), vector in zip(batch, vectors):
            if row.id not in single:
                changes.add(row.id, {ctx.vector_name: vector, "embedded_int": 1})
            elif row.chunk_ids[0] in chunks:
                row.vector = entity_vector_from_chunk(chunks[row.chunk_ids[0]], vector)
                row.vector_from_chunks = True
                changes.add(row.id, {ctx.vector_name: row.vector, "embedded_int": 2})
            else:  # its chunk has no vector of this size: the text's, as without the setting
                chunkless.append(row)
        if into is None:
            changes.write()
        done += len(batch)
        _report(ctx, progress, "embed", done, total)
    if chunkless:
        changes = into or RowChanges(ctx)
        for vectors in embed_ahead(ctx, [[entity_text(e) for e in chunkless]], cancel):
            for entity, vector in zip(chunkless, vectors):
                changes.add(entity.id, {ctx.vector_name: vector, "embedded_int": 1})
        if into is None:
            changes.write()
    rows.unembedded.clear()
    ctx.store.refresh(ctx.tenant)
    return done


def _single_chunk_vectors(ctx: KBContext, entities: list[Entity]) -> dict[str, np.ndarray]:
    """The stored vectors of these single-chunk entities' chunks, by chunk id."""
    from kbgraph.graph.derive.vectors import chunk_vectors

    if not entities:
        return {}
    return chunk_vectors(ctx.store, ctx.tenant, ctx.kb_id, sorted({e.chunk_ids[0] for e in entities}),
                         ctx.vector_name)


def _relation_vectors_from_chunks(ctx: KBContext, relations: list[Relation], into: RowChanges | None
                                  ) -> tuple[list[Relation], int]:
    """Give these relations their chunks' mean vector (``relation_vectors``); returns those left
    to embed by their text (none of their chunks has a vector of this size) and how many got one."""
    from kbgraph.graph.derive.vectors import relation_vectors_from_chunks

    changes = into or RowChanges(ctx)
    left: list[Relation] = []
    done = 0
    for relation, vector in relation_vectors_from_chunks(ctx.store, ctx.tenant, ctx.kb_id, relations,
                                                         ctx.vector_name):
        if vector is None:
            left.append(relation)
            continue
        relation.vector, relation.vector_from_chunks = vector, True
        changes.add(relation.id, {ctx.vector_name: vector, "embedded_int": 2})
        done += 1
    if into is None:
        changes.write()
    return left, done


def _refresh_phases(ctx: KBContext, result: RefreshResult, changes: RowChanges, force: bool,
                    progress: ProgressFn, cancel: CancelCheck) -> GraphMeta:
    rows = _graph_rows(ctx)
    # with a remote model the summaries and then the vectors are fetched while the reports are
    # written (all wait on the network): the reports of communities with a member waiting for its
    # summary are written once it has it, the others at once. Resolution re-derives rows, so with
    # it on the summaries and the vectors come first
    if ctx.chat is not None and not ctx.graph.resolution:
        return _refresh_overlapped(ctx, rows, result, changes, force, progress, cancel)
    result.summarized = summarize_pending(ctx, rows, progress=progress, cancel=cancel,
                                          failures=result.summary_failures)
    result.embedded = embed_pending(ctx, rows, progress=progress, cancel=cancel, into=changes)
    meta = load_graph_meta(ctx)
    if ctx.graph.resolution and (force or meta.is_stale("resolution")):
        if ctx.chat is None:
            meta.phase_status["resolution"] = "skipped: needs an LLM"
        else:
            _report(ctx, progress, "resolution", 0, 1)
            changes.write()  # merges re-derive rows: a vector waiting here could be stale after them
            _refresh_resolution(ctx, rows.entities, result, cancel)
            rows = _graph_rows(ctx)
            result.summarized += summarize_pending(ctx, rows, progress=progress, cancel=cancel,
                                                   failures=result.summary_failures)
            result.embedded += embed_pending(ctx, rows, progress=progress, cancel=cancel,
                                             into=changes)  # merged rows
            meta = load_graph_meta(ctx)  # merges bump the graph version
            meta.phase_versions["resolution"], meta.phase_status["resolution"] = meta.version, "done"
            _report(ctx, progress, "resolution", 1, 1)
    return _ranked_and_reported(ctx, meta, rows, result, changes, force, progress, cancel)


def _refresh_overlapped(ctx: KBContext, rows: GraphRows, result: RefreshResult, changes: RowChanges, force: bool,
                        progress: ProgressFn, cancel: CancelCheck) -> GraphMeta:
    watch = _SummaryWatch(frozenset(rows.pending))  # summarize_pending empties rows.pending
    started: list[Future] = []
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="kbgraph-summaries") as pool:

        def start_summaries() -> _SummaryWatch:
            # rows no summary rewrites are embedded at once, beside the summaries and reports
            ready = set(rows.unembedded) - watch.pending
            summaries = pool.submit(summarize_pending, ctx, rows, progress=progress, cancel=cancel,
                                    failures=result.summary_failures, on_row=watch.row_done)
            watch.future = summaries
            summaries.add_done_callback(watch.close)
            started.extend([summaries, pool.submit(_embed_after, summaries, ready, ctx, rows, progress, cancel,
                                                   changes)])
            return watch

        try:
            meta = _ranked_and_reported(ctx, load_graph_meta(ctx), rows, result, changes, force, progress, cancel,
                                        start_summaries=start_summaries)
        finally:
            if started:
                result.summarized, result.embedded = started[0].result(), started[1].result()
    return meta


class _SummaryWatch:
    """The rows a running summary pass has yet to finish, and the work waiting on some of them: a
    community's report goes to the model as soon as its own members are summarized, not once the
    whole pass is over (on a book, most reports need only the first wave of summaries)."""

    def __init__(self, pending: frozenset[str]) -> None:
        self.pending = pending
        self.future: Future | None = None
        self._left = set(pending)
        self._waiting: list[tuple[frozenset[str], Callable[[], None]]] = []
        self._each: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def waits(self, row_ids: Iterable[str]) -> frozenset[str]:
        """Those of ``row_ids`` the pass has to summarize."""
        return frozenset(row_ids) & self.pending

    def when_done(self, row_ids: frozenset[str], then: Callable[[], None]) -> None:
        """Call ``then`` once the pass is done with every row of ``row_ids`` (now, if it is)."""
        with self._lock:
            if row_ids & self._left:
                self._waiting.append((row_ids, then))
                return
        then()

    def on_each_row(self, then: Callable[[], None]) -> int:
        """Call ``then`` as each row still left is done; returns how many are left."""
        with self._lock:
            self._each.append(then)
            return len(self._left)

    def row_done(self, row_id: str) -> None:
        with self._lock:
            if row_id not in self._left:
                return
            self._left.discard(row_id)
            ready = self._take_ready()
            each = list(self._each)
        for then in each + ready:
            then()

    def close(self, _future: object = None) -> None:
        """The pass is over: rows it could not summarize keep their stand-ins, and nothing waits."""
        with self._lock:
            self._left.clear()
            ready = self._take_ready()
        for then in ready:
            then()

    def failure(self) -> BaseException | None:
        future = self.future
        return future.exception() if future is not None and future.done() else None

    def _take_ready(self) -> list[Callable[[], None]]:
        ready = [then for row_ids, then in self._waiting if not row_ids & self._left]
        self._waiting = [(row_ids, then) for row_ids, then in self._waiting if row_ids & self._left]
        return ready


def _embed_after(summaries: Future, ready: set[str], ctx: KBContext, rows: GraphRows, progress: ProgressFn,
                 cancel: CancelCheck, changes: RowChanges) -> int:
    """The vectors of ``ready`` (rows no summary rewrites) now, and beside them, once the summaries
    are in, those of the summarized rows (behind the others, they had waited for every one of them)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbgraph-vectors") as pool:
        first = pool.submit(embed_pending, ctx, GraphRows(rows.entities, rows.relations, unembedded=set(ready)),
                            progress=progress, cancel=cancel, into=changes)
        summaries.result()  # a summarized row needs its new vector
        rest = GraphRows(rows.entities, rows.relations, unembedded=set(rows.unembedded) - ready)
        done = embed_pending(ctx, rest, progress=progress, cancel=cancel, into=changes)
        done += first.result()
    rows.unembedded.clear()
    return done


def _ranked_and_reported(ctx: KBContext, meta: GraphMeta, rows: GraphRows, result: RefreshResult,
                         changes: RowChanges, force: bool, progress: ProgressFn, cancel: CancelCheck, *,
                         start_summaries: Callable[[], _SummaryWatch] | None = None) -> GraphMeta:
    """PageRank, then communities and reports; ``start_summaries`` (summaries running beside the
    reports) is called after PageRank, whose values the rows they rewrite then carry."""
    entities, relations = rows.entities, rows.relations
    if force or meta.is_stale("pagerank"):
        _report(ctx, progress, "pagerank", 0, 1)
        result.pagerank_updated = _refresh_pagerank(ctx, entities, relations, changes)
        meta.phase_versions["pagerank"], meta.phase_status["pagerank"] = meta.version, "done"
        _report(ctx, progress, "pagerank", 1, 1)
    else:
        result.skipped.append("pagerank")
    summaries = start_summaries() if start_summaries is not None else None
    if ctx.graph.community and (force or meta.is_stale("communities")):
        meta.phase_status["communities"] = "running"
        _refresh_communities(ctx, meta, entities, relations, result, changes, progress, cancel, summaries=summaries)
        meta.phase_versions["communities"], meta.phase_status["communities"] = meta.version, "done"
    elif ctx.graph.community:
        result.skipped.append("communities")
    return meta


@bulk_gc()
def refresh_kb(ctx: KBContext, *, force: bool = False, progress: ProgressFn = no_progress,
               cancel: CancelCheck = never) -> RefreshResult:
    """Recompute the stale KB phases: PageRank, then communities and their reports (if enabled).

    Each phase is stamped with the graph version it saw; a phase that is current is skipped
    unless ``force``. Reports whose community membership did not change are kept as they are.
    """
    result = RefreshResult(version=0)
    changes = RowChanges(ctx)
    try:
        meta = _refresh_phases(ctx, result, changes, force, progress, cancel)
    except BaseException:
        # what the finished phases computed (vectors, PageRank) stays valid: keep it, visible at once
        # (a store that refreshes on its own schedule, Elasticsearch, would show it only later)
        with contextlib.suppress(Exception):
            changes.write()
            ctx.store.refresh(ctx.tenant)
        raise
    changes.write()
    meta.entity_count = _count_kind(ctx, Entity.KIND)
    meta.relation_count = _count_kind(ctx, Relation.KIND)
    ctx.store.refresh(ctx.tenant)
    save_graph_meta(ctx, meta)
    result.version = meta.version
    return result


# ------------------------------------------------------------------------------- chunk edits

def extract_chunks(ctx: KBContext, chunks: Sequence[Chunk], extractor: Extractor | None = None,
                   cancel: CancelCheck = never) -> list[dict]:
    """The mention rows of these chunks (nothing is written). Runs before any write lock is taken:
    an LLM extraction may take seconds."""
    extractor = extractor or build_document_extractor(ctx)
    rows: list[dict] = []
    for chunk in chunks:
        _check(cancel)
        extraction = extractor.extract(chunk.content, cancel=cancel)
        entities, relations = extraction.to_mentions(ctx.kb_id, chunk.doc_id, chunk.id)
        rows += [m.to_doc() for m in entities] + [m.to_doc() for m in relations]
    return rows


@bulk_gc()
def replace_chunk_mentions(ctx: KBContext, chunk_ids: Sequence[str], mentions: Sequence[dict]) -> DeriveResult:
    """Swap the mentions of the given chunks for ``mentions`` (those of their new text; empty when the
    chunks are gone) and re-derive exactly the entity and relation rows either side names."""
    with ctx.store.batch():  # all of it or nothing
        _ensure_mention_format(ctx)
        where = [any_of("chunk_id_kwd", list(chunk_ids))]
        keys, pairs = touched_keys(ctx.store, ctx.tenant, ctx.kb_id, where)
        ctx.store.delete(ctx.tenant, [ctx.kb_id], [*where, any_of("knowledge_graph_kwd", [
            EntityMention.KIND, RelationMention.KIND])], refresh=False)
        for row in mentions:
            if row["knowledge_graph_kwd"] == EntityMention.KIND:
                keys.add(row["entity_key_kwd"])
            else:
                pairs.add((row["src_key_kwd"], row["tgt_key_kwd"]))
        if mentions:
            ctx.store.upsert(ctx.tenant, ctx.kb_id, list(mentions), refresh=False)
        change = DeriveResult()
        if keys or pairs:
            change = recompute(ctx.store, ctx.tenant, ctx.kb_id, keys, pairs, ctx.describer(), None,
                               load_aliases(ctx.store, ctx.tenant, ctx.kb_id), ctx.vector_name)
            _bump_version(ctx, change)
    ctx.store.refresh(ctx.tenant)
    return change
