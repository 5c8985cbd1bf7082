"""An indexing run: many documents of one knowledge base through one bounded pipeline.

    read -> parse (batches: one embedding batch, one store transaction) -> extract (the chunks of
    every document in flight at once, within the chat model's limits) -> merge (the documents
    extracted meanwhile, together, under the KB lock) -> record (their statuses, one transaction)

With a model that takes L seconds per call and C calls allowed in flight, a folder of small
documents then takes about calls x L / C rather than documents x the latency of one document's
calls one after another, and offline the per-document bookkeeping (commits, embedding calls,
status writes) is paid once per batch. The CLI (Engine.index_paths) and the worker
(Engine.index_bytes, one document per task) both run documents through this class, and so does a
graph build over documents parsed while the graph was off (Engine.build_graph, the worker's
build_graph task): their chunks are stored already, so they go straight to extraction.

Memory stays bounded: at most ``index_documents_in_flight`` documents are between reading and
recording, a large document is chunked and stored in batches (kbgraph.pipeline.parse_document),
and its mentions are written as they come instead of being held until its merge.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import BinaryIO

from kbgraph import pipeline
from kbgraph.graph.extract.base import Extractor
from kbgraph.llm.base import CancelCheck, Cancelled
from kbgraph.meta import DocumentStatus, MetaDB
from kbgraph.meta.schemas import Document, KnowledgeBase, NotFound as MetaNotFound
from kbgraph.parse.readers import ParseError, ParsedDocument, read_bytes
from kbgraph.parse.text_stream import stream_text
from kbgraph.pipeline import KBContext, Progress, ProgressFn, never, no_progress
from kbgraph.store.records import Chunk
from kbgraph.summaries_ahead import SummariesAhead, can_ask_ahead

# a document with more text than this is chunked, embedded and stored on its own, in batches
_LARGE_CHARS = 1_000_000
# a parse batch holds at most this much text
_BATCH_CHARS = 4_000_000
# documents merged in one transaction at most
_MERGE_DOCUMENTS = 512
# seconds between two progress events of the same phase (the last one always goes out)
_PROGRESS_EVERY = 0.2
# a large document's chunks are read back for extraction this many at a time, and at most
# _CHUNKS_WAITING of them are submitted and not yet extracted
_PAGE_CHUNKS = 1024
_CHUNKS_WAITING = 2048


@dataclass
class RunEstimate:
    """What an indexing run will roughly cost, before it starts (for a warning on long work)."""

    documents: int
    bytes: int
    chunks: int
    llm_calls: int
    seconds: float


# rough figures for the estimate, measured on one core (bench/README.md, "A 50 MB text file" and
# "1,890 MuSiQue files"): a token is ~4 bytes of text; offline work (parsing, nlp extraction, merges,
# the store) takes ~15 us per token and ~7 ms per document with a graph, ~3 us per token without;
# the local embedder ~0.4 ms of one of its threads per token it embeds (chunks overlap: a little
# more than the text's; 0.28-0.36 ms measured, rounded up so the warning errs long) and, with a
# graph, ~0.15 s per document for the entities' vectors when they embed their text (~0.05 s when
# single-chunk entities embed their name only, ``entity_vectors``) and ~0.28 s for the relations'
# when they embed their text (``relation_vectors``; from their chunks: nothing);
# a hosted model answers in ~2 s
_BYTES_PER_TOKEN = 4
_GRAPH_SECONDS_PER_TOKEN = 15e-6
_GRAPH_SECONDS_PER_DOCUMENT = 0.007
_PARSE_SECONDS_PER_TOKEN = 3e-6
_LOCAL_EMBED_SECONDS_PER_TOKEN = 0.4e-3
_LOCAL_ENTITY_EMBED_SECONDS_PER_DOCUMENT = 0.15
_LOCAL_ENTITY_FROM_CHUNK_SECONDS_PER_DOCUMENT = 0.05
_LOCAL_RELATION_EMBED_SECONDS_PER_DOCUMENT = 0.28
_MODEL_SECONDS_PER_CALL = 2.0


def estimate_run(ctx: KBContext, sizes: Iterable[int]) -> RunEstimate:
    """Chunks, LLM calls and seconds a run over files of these sizes will take, roughly: chunk
    count from the bytes; the offline work and the local embedder's from the tokens and documents;
    two calls per chunk with gleaning, one report call per ~4 chunks, at a hosted model's ~2 s per
    call with ``llm_concurrency`` in flight."""
    files = list(sizes)
    sizes = [size for size in files if size]
    total = sum(sizes)
    tokens = total / _BYTES_PER_TOKEN
    step = max(1, ctx.chunk_tokens - ctx.chunk_overlap)
    chunks = sum(max(1, -(-size // _BYTES_PER_TOKEN) // step + 1) for size in sizes)
    graph = ctx.graph.enabled
    if graph:
        seconds = tokens * _GRAPH_SECONDS_PER_TOKEN + len(sizes) * _GRAPH_SECONDS_PER_DOCUMENT
    else:
        seconds = tokens * _PARSE_SECONDS_PER_TOKEN
    if ctx.settings.embedding_provider == "local":
        embedded = tokens * ctx.chunk_tokens / step
        per_document = (
            _LOCAL_ENTITY_FROM_CHUNK_SECONDS_PER_DOCUMENT if ctx.settings.entity_vectors_from_chunk
            else _LOCAL_ENTITY_EMBED_SECONDS_PER_DOCUMENT) + (
            0.0 if ctx.settings.relation_vectors_from_chunks else _LOCAL_RELATION_EMBED_SECONDS_PER_DOCUMENT)
        rows = len(sizes) * per_document if graph else 0.0
        seconds += (embedded * _LOCAL_EMBED_SECONDS_PER_TOKEN + rows) / ctx.settings.local_embedding_threads
    calls = 0
    if graph and ctx.graph.method != "nlp":
        per_chunk = 1 + (ctx.graph.max_gleanings if ctx.chunk_tokens >= ctx.settings.glean_min_tokens else 0)
        calls = chunks * per_chunk + chunks // 4
        seconds += calls * _MODEL_SECONDS_PER_CALL / max(1, ctx.settings.llm_concurrency)
    return RunEstimate(len(files), total, chunks, calls, seconds)


@dataclass
class DocumentInput:
    """One registered document to index; ``read`` gives its bytes, or None when it is over the
    size limit (recorded as its failure), and is called only when the run gets to it."""

    doc: Document
    read: Callable[[], bytes | None]
    size: int
    # its chunks are in the store already (a graph build): extract and merge, nothing else; its
    # status stays as it is, only its ``extracted`` mark is set once it is in the graph
    stored: bool = False
    # the file's bytes as a binary file, for a long plain-text file read while it is chunked
    # (kbgraph.parse.text_stream); None: ``read`` is the only way
    open: Callable[[], BinaryIO] | None = None

    @classmethod
    def parsed(cls, doc: Document) -> "DocumentInput":
        return cls(doc, lambda: None, doc.size, stored=True)


@dataclass
class DocOutcome:
    name: str
    status: str  # "indexed" | "skipped" | "failed" | "cancelled"
    doc_id: str = ""
    chunks: int = 0
    message: str = ""


@dataclass
class _InFlight:
    doc: Document
    chunks: int = 0
    tokens: int = 0
    remaining: int = 0
    mentions: list[dict] = field(default_factory=list)
    stored_mentions: bool = False  # some were written already (a large document)
    has_slot: bool = False
    chunk_rows: list[Chunk] = field(default_factory=list)  # chunked, not stored yet
    extraction: pipeline.ExtractResult = field(default_factory=pipeline.ExtractResult)
    failure: str = ""
    graph_only: bool = False  # a parsed document brought into the graph (DocumentInput.stored)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Throttle:
    def __init__(self, progress: ProgressFn) -> None:
        self.progress = progress
        self._at: dict[str, float] = {}
        self._lock = threading.Lock()

    def __call__(self, event: Progress) -> None:
        now = time.monotonic()
        with self._lock:
            if event.done < event.total and now - self._at.get(event.phase, 0.0) < _PROGRESS_EVERY:
                return
            self._at[event.phase] = now
        self.progress(event)


class IndexRun:
    """Index documents of one knowledge base; ``run`` returns one outcome per input, in order."""

    def __init__(self, ctx: KBContext, meta: MetaDB, kb: KnowledgeBase, kb_lock: Callable[[str], AbstractContextManager],
                 *, progress: ProgressFn = no_progress, cancel: CancelCheck = never,
                 document_progress: ProgressFn | None = None,
                 chunking: Callable[[KBContext, Document], KBContext] | None = None) -> None:
        self.ctx, self.meta, self.kb, self.kb_lock = ctx, meta, kb, kb_lock
        # a document's own chunk size over the knowledge base's (set through the REST API)
        self.chunking = chunking or (lambda context, _doc: context)
        self.progress = _Throttle(progress)
        # a run of one document (a worker's task) reports that document's own steps too
        self.document_progress = document_progress
        self.cancel = cancel
        self.settings = ctx.settings
        self.graph = kb.graph.enabled
        self._outcomes: dict[str, DocOutcome] = {}
        self._slots = threading.BoundedSemaphore(self.settings.index_documents_in_flight)
        self._merge_queue: queue.Queue[_InFlight | None] = queue.Queue()
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self._total = 0
        self._recorded = 0
        self._in_flight = 0
        self._chunks_submitted = 0
        self._parsed = 0
        self._chunks_done = 0
        self._extractor: Extractor | None = None
        self._ahead: SummariesAhead | None = None
        self.vanished: set[str] = set()  # documents deleted while they were indexed

    # -- the run ------------------------------------------------------------------------------

    def run(self, inputs: Iterable[DocumentInput], total: int) -> list[DocOutcome]:
        self._total = total
        order: list[str] = []
        if self.graph:
            self._extractor = pipeline.build_document_extractor(self.ctx)
            if can_ask_ahead(self.ctx):
                self._ahead = SummariesAhead(self.ctx, self._calls_in_flight())
        merger = threading.Thread(target=self._merge_loop, name="kbgraph-merge", daemon=True)
        merger.start()
        # twice the calls allowed in flight: a thread busy between its calls (reading an answer,
        # deciding on gleaning, storing mentions) would otherwise hold a model slot idle; the
        # chat model's own limits still keep the calls in flight to llm_(kb_)concurrency
        workers = 1 if self.kb.graph.method == "nlp" or not self.graph else 2 * self._calls_in_flight()
        try:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kbgraph-extract") as pool:
                batch: list[tuple[_InFlight, ParsedDocument]] = []
                chars = 0
                for item in inputs:
                    order.append(item.doc.id)
                    if self._stopped():
                        self._finish(_InFlight(item.doc), "cancelled")
                        continue
                    if not self._slots.acquire(blocking=False):
                        self._parse_batch(batch, pool)  # what waits here holds slots: send it on first
                        batch, chars = [], 0
                        self._acquire_slot()
                    with self._lock:
                        self._in_flight += 1
                    self._report_documents()
                    flight = _InFlight(item.doc, has_slot=True)
                    if item.stored:
                        self._extract_stored(flight, pool)
                        continue
                    parsed = self._read(flight, item)
                    if parsed is None:
                        continue
                    if parsed.stream is not None or parsed.chars > _LARGE_CHARS:
                        self._parse_large(flight, parsed, pool)
                        continue
                    # its extraction starts now; its chunks are embedded and stored with the batch's
                    self._start_extraction(flight, parsed, pool)
                    batch.append((flight, parsed))
                    chars += parsed.chars
                    if len(batch) >= self.settings.index_batch_documents or chars >= _BATCH_CHARS:
                        self._parse_batch(batch, pool)
                        batch, chars = [], 0
                if self._ahead is not None:
                    self._ahead.all_submitted()
                self._parse_batch(batch, pool)
        except Cancelled:
            self._cancelled.set()
        finally:
            self._merge_queue.put(None)
            merger.join()
            if self._ahead is not None:
                self._ahead.close()
        self._report_documents()
        return [self._outcomes[doc_id] for doc_id in order if doc_id in self._outcomes]

    def _calls_in_flight(self) -> int:
        return max(1, min(self.settings.llm_concurrency, self.settings.llm_kb_concurrency or self.settings.llm_concurrency))

    def _stopped(self) -> bool:
        if not self._cancelled.is_set() and self.cancel():
            self._cancelled.set()
        return self._cancelled.is_set()

    def _acquire_slot(self) -> None:
        while not self._slots.acquire(timeout=0.1):
            if self._stopped():
                raise Cancelled("cancelled by request")

    # -- parse --------------------------------------------------------------------------------

    def _read(self, flight: _InFlight, item: DocumentInput) -> ParsedDocument | None:
        try:
            if item.open is not None and item.size > _LARGE_CHARS:
                # a long plain-text file is read while it is chunked, never whole
                streamed = stream_text(item.doc.name, item.open, item.size, self.settings.max_file_bytes)
                if streamed is not None:
                    return streamed
            data = item.read()
            if data is None:
                raise ParseError(item.doc.name, f"{item.size} bytes is over the limit of "
                                                f"{self.settings.max_file_bytes} (KBGRAPH_MAX_FILE_BYTES)")
            return read_bytes(item.doc.name, data, max_bytes=self.settings.max_file_bytes)
        except ParseError as exc:
            flight.failure = str(exc)
            self._finish(flight, "failed", message="could not be parsed", error=str(exc))
        except OSError as exc:
            flight.failure = f"cannot be read: {exc}"
            self._finish(flight, "failed", message="could not be read", error=flight.failure)
        return None

    def _parse_batch(self, batch: list[tuple[_InFlight, ParsedDocument]], pool: ThreadPoolExecutor) -> None:
        """Chunk the batch's documents, set their extraction going, then embed and store their
        chunks meanwhile (extraction needs only their text)."""
        if not batch:
            return
        self._mark_running([flight for flight, _ in batch])
        try:
            pipeline.store_chunks(self.ctx, [f.doc.id for f, _ in batch], [f.chunk_rows for f, _ in batch],
                                  cancel=self._stopped)
        except Cancelled:
            self._cancelled.set()
            for flight, _ in batch:
                self._step_done(flight)  # the merge loop records them cancelled
            raise
        except Exception as exc:  # the batch's store write failed: its documents fail, the run goes on
            for flight, _ in batch:
                flight.failure = flight.failure or f"{type(exc).__name__}: {exc}"
        with self._lock:
            self._parsed += len(batch)
        if self.document_progress is None:
            pipeline._report(self.ctx, self.progress, "parse", self._parsed, self._total, "documents")
        for flight, _ in batch:
            if self.document_progress is not None:  # a run of one document: in its chunks
                pipeline._report(self.ctx, self._doc_progress, "parse", flight.chunks, flight.chunks, flight.doc.name)
            flight.chunk_rows = []
            self._step_done(flight)  # the stored chunks were the flight's last step but its extraction

    def _start_extraction(self, flight: _InFlight, parsed: ParsedDocument, pool: ThreadPoolExecutor) -> None:
        """Chunk the document, each chunk going to extraction as soon as it is cut: a book's first
        model calls go out while the rest of it is still being chunked (a 1 MB text takes ~0.7 s)."""
        # two steps besides the chunks' extractions: the chunking itself, and storing the chunks
        flight.remaining = 2
        for chunk in pipeline.iter_document_chunks(self.chunking(self.ctx, flight.doc), flight.doc.id, parsed):
            flight.chunk_rows.append(chunk)
            if self.graph:
                with flight.lock:
                    flight.remaining += 1
                with self._lock:
                    self._chunks_submitted += 1
                self._submit_chunk(pool, flight, chunk)
        flight.chunks, flight.tokens = len(flight.chunk_rows), sum(c.token_count for c in flight.chunk_rows)
        flight.extraction.chunks = flight.chunks if self.graph else 0
        self._step_done(flight)  # the chunking

    def _parse_large(self, flight: _InFlight, parsed: ParsedDocument, pool: ThreadPoolExecutor) -> None:
        self._mark_running([flight])
        try:
            result = pipeline.parse_document(self.chunking(self.ctx, flight.doc), flight.doc.id, parsed,
                                             progress=self._doc_progress,
                                             cancel=self._stopped)
            del parsed  # the chunks are stored: the text is not needed any more
            flight.chunks, flight.tokens = result.chunks, result.tokens
        except Cancelled:
            self._finish(flight, "cancelled")
            raise
        except Exception as exc:
            self._finish(flight, "failed", message="indexing failed", error=f"{type(exc).__name__}: {exc}")
            return
        if not self.graph or not flight.chunks:
            self._extract(flight, [], pool)
            return
        self._extract_pages(flight, pool)

    def _extract_pages(self, flight: _InFlight, pool: ThreadPoolExecutor) -> None:
        """A large document's stored chunks to extraction, read back a page at a time, with at most
        _CHUNKS_WAITING of them submitted and not yet extracted: its chunks are never all in memory."""
        flight.remaining = flight.chunks
        flight.extraction.chunks = flight.chunks
        with self._lock:
            self._chunks_submitted += flight.chunks
        room = threading.BoundedSemaphore(_CHUNKS_WAITING)
        sent = 0
        try:
            for page in pipeline.document_chunk_pages(self.ctx, flight.doc.id, flight.chunks, _PAGE_CHUNKS):
                for chunk in page:
                    while not room.acquire(timeout=0.1):
                        if self._stopped():
                            return
                    self._submit_chunk(pool, flight, chunk, room)
                    sent += 1
        except Exception as exc:  # its chunks could not be read back: the document fails
            flight.failure = flight.failure or f"{type(exc).__name__}: {exc}"
        finally:
            if sent < flight.chunks:  # cancelled, failed, or chunks missing: the merge must not wait for them
                with flight.lock:
                    flight.remaining -= flight.chunks - sent
                    last = flight.remaining == 0
                if last:
                    self._merge_queue.put(flight)

    def _extract_stored(self, flight: _InFlight, pool: ThreadPoolExecutor) -> None:
        flight.graph_only = True
        flight.chunks, flight.tokens = flight.doc.chunk_count, flight.doc.token_count
        try:
            chunks = pipeline.document_chunks(self.ctx, flight.doc.id)
        except Exception as exc:
            self._finish(flight, "failed", message="its chunks could not be read", error=f"{type(exc).__name__}: {exc}")
            return
        self._extract(flight, chunks, pool)

    def _mark_running(self, flights: list[_InFlight]) -> None:
        self._record([DocumentStatus(f.doc.id, "running", progress=0.0, message="indexing")
                                         for f in flights])

    def _doc_progress(self, event: Progress) -> None:
        self.progress(event)
        if self.document_progress is not None:
            self.document_progress(event)

    # -- extract ------------------------------------------------------------------------------

    def _extract(self, flight: _InFlight, chunks: list[Chunk], pool: ThreadPoolExecutor, *,
                 storing: bool = False) -> None:
        """Set the document's extraction going; it goes on to the merge once every chunk is
        extracted (and, ``storing``, once its chunks are stored: see _step_done)."""
        chunks = chunks if self.graph else []
        flight.remaining = len(chunks) + (1 if storing else 0)
        flight.extraction.chunks = len(chunks)
        if not flight.remaining:
            self._merge_queue.put(flight)
            return
        with self._lock:
            self._chunks_submitted += len(chunks)
        for chunk in chunks:
            self._submit_chunk(pool, flight, chunk)

    def _step_done(self, flight: _InFlight) -> None:
        with flight.lock:
            flight.remaining -= 1
            last = flight.remaining == 0
        if last:
            self._merge_queue.put(flight)

    def _submit_chunk(self, pool: ThreadPoolExecutor, flight: _InFlight, chunk: Chunk,
                      room: threading.BoundedSemaphore | None = None) -> None:
        if self._ahead is not None:
            self._ahead.chunk_submitted(chunk)
        pool.submit(self._extract_chunk, flight, chunk, room)

    def _extract_chunk(self, flight: _InFlight, chunk: Chunk, room: threading.BoundedSemaphore | None = None) -> None:
        try:
            self._extract_one(flight, chunk)
        finally:
            if room is not None:
                room.release()

    def _extract_one(self, flight: _InFlight, chunk: Chunk) -> None:
        extraction, error = None, ""
        try:
            if not self._stopped() and not flight.failure:
                extraction, error = pipeline.extract_chunk(self.ctx, self._extractor, chunk, self._stopped)
        except Cancelled:
            self._cancelled.set()
        except Exception as exc:  # a fault of this document's, not of the run
            flight.failure = flight.failure or f"{type(exc).__name__}: {exc}"
        entities, relations = [], []
        with flight.lock:
            result = flight.extraction
            if extraction is not None:
                result.llm_calls += extraction.llm_calls
                result.dropped_records += extraction.dropped
                entities, relations = extraction.to_mentions(self.ctx.kb_id, chunk.doc_id, chunk.id)
                flight.mentions += [m.to_doc() for m in entities] + [m.to_doc() for m in relations]
                result.entity_mentions += len(entities)
                result.relation_mentions += len(relations)
            elif error:
                result.failed_chunks.append(chunk.id)
                result.errors.append(error)
            if len(flight.mentions) >= pipeline._WRITE_ROWS and not self._cancelled.is_set():
                self._store_mentions(flight)  # a large document: not all of its mentions in memory
        if self._ahead is not None:
            self._ahead.chunk_done(chunk, entities, relations)
        with self._lock:
            self._chunks_done += 1
            done, submitted = self._chunks_done, self._chunks_submitted
        pipeline._report(self.ctx, self._doc_progress, "extract", done, submitted)
        self._step_done(flight)

    def _store_mentions(self, flight: _InFlight) -> None:
        rows, flight.mentions = flight.mentions, []
        if not flight.stored_mentions:
            with self.ctx.store.batch():
                pipeline.replace_mentions(self.ctx, [flight.doc.id], rows)
            flight.stored_mentions = True
        else:
            self.ctx.store.upsert(self.ctx.tenant, self.ctx.kb_id, rows, refresh=False)

    # -- merge and record ---------------------------------------------------------------------

    def _merge_loop(self) -> None:
        ended = False
        while not ended:
            first = self._merge_queue.get()
            if first is None:
                return
            flights = [first]
            while len(flights) < _MERGE_DOCUMENTS:
                try:
                    item = self._merge_queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    ended = True
                    break
                flights.append(item)
            try:
                self._merge(flights)
            except Exception as exc:  # the merge's transaction failed as a whole: so do its documents
                for flight in flights:
                    if flight.doc.id not in self._outcomes:
                        self._finish(flight, "failed", message="indexing failed",
                                     error=f"{type(exc).__name__}: {exc}")

    def _merge(self, flights: list[_InFlight]) -> None:
        if self._stopped():
            for flight in flights:
                self._finish(flight, "cancelled")
            return
        failed = [f for f in flights if f.failure]
        for flight in failed:
            self._finish(flight, "failed", message="indexing failed", error=flight.failure)
        good = [f for f in flights if not f.failure]
        summary = ""
        if self.graph and good:
            # documents whose mentions were partly stored already replaced their old ones then
            fresh = [f for f in good if not f.stored_mentions]
            # a large document's merge takes minutes: say it is under way, with its size
            mentions = sum(f.extraction.entity_mentions + f.extraction.relation_mentions for f in good)
            pipeline._report(self.ctx, self._doc_progress, "merge", 0, len(good),
                             f"{mentions} mentions of {len(good)} document(s)")
            with self.kb_lock(self.kb.id):  # merges of one KB never interleave
                for flight in good:
                    if flight.stored_mentions and flight.mentions:
                        self.ctx.store.upsert(self.ctx.tenant, self.ctx.kb_id, flight.mentions, refresh=False)
                if fresh:
                    with self.ctx.store.batch():
                        pipeline.replace_mentions(self.ctx, [f.doc.id for f in fresh],
                                                  [row for f in fresh for row in f.mentions])
                for flight in good:
                    flight.mentions = []
                def rows_derived(done: int, total: int) -> None:
                    pipeline._report(self.ctx, self._doc_progress, "merge", done, total,
                                     f"rows of {mentions} mentions")

                merged = pipeline.merge_documents(self.ctx, [f.doc.id for f in good], progress=rows_derived)
            pipeline._report(self.ctx, self._doc_progress, "merge", len(good), len(good),
                             f"{merged.entities_written} entities updated")
            summary = f"{merged.entities_written} entities updated" + (
                f" with {len(good) - 1} other document(s)" if len(good) > 1 else "")
        updates: list[DocumentStatus] = []
        for flight in good:
            if flight.graph_only:
                self._graph_recorded(flight, summary)
                continue
            message = f"{flight.chunks} chunks"
            extracted = True if self.graph else None
            if self.graph:
                ex = flight.extraction
                message += (f"; {ex.entity_mentions} entity and {ex.relation_mentions} relation mentions; {summary}")
                if ex.failed_chunks:
                    updates.append(self._partial(flight, message))
                    continue
            updates.append(DocumentStatus(flight.doc.id, "done", message=message, chunk_count=flight.chunks,
                                          token_count=flight.tokens, extracted=extracted))
            self._outcomes[flight.doc.id] = DocOutcome(flight.doc.name, "indexed", flight.doc.id, flight.chunks, message)
        self._record(updates)
        self._recorded_some(good)

    def _graph_recorded(self, flight: _InFlight, summary: str) -> None:
        """A parsed document brought into the graph: marked extracted unless some of its chunks
        failed (then the next build extracts it again, only those chunks costing model calls)."""
        ex = flight.extraction
        message = f"{ex.entity_mentions} entity and {ex.relation_mentions} relation mentions; {summary}"
        if ex.failed_chunks:
            error = f"graph extraction failed for {len(ex.failed_chunks)} of {flight.chunks} chunk(s): {ex.errors[0]}"
            self._outcomes[flight.doc.id] = DocOutcome(flight.doc.name, "failed", flight.doc.id, flight.chunks,
                                                       f"{message}; {error}")
            return
        try:
            self.meta.set_document_graph_state(flight.doc.id, extracted=True)
        except MetaNotFound:
            self.vanished.add(flight.doc.id)
        self._outcomes[flight.doc.id] = DocOutcome(flight.doc.name, "indexed", flight.doc.id, flight.chunks, message)

    def _partial(self, flight: _InFlight, message: str) -> DocumentStatus:
        """A document whose graph extraction failed for some chunks: searchable, but not done. It
        ends "failed" with the count, so it is indexed again on the next run, where only those
        chunks cost model calls (the others' answers parsed, so they come from the cache)."""
        ex = flight.extraction
        error = (f"partial: graph extraction failed for {len(ex.failed_chunks)} of {flight.chunks} chunk(s) "
                 f"({ex.errors[0]}); the other chunks are indexed; parse the document again to retry "
                 f"only the failed ones")
        self._outcomes[flight.doc.id] = DocOutcome(flight.doc.name, "failed", flight.doc.id, flight.chunks, error)
        return DocumentStatus(flight.doc.id, "failed", message=f"{message}; {error}", error=error,
                              chunk_count=flight.chunks, token_count=flight.tokens)

    def _finish(self, flight: _InFlight, status: str, *, message: str = "", error: str | None = None) -> None:
        """Record one document that ends without a merge (failed, cancelled)."""
        message = message or status
        if not flight.graph_only:  # a parsed document keeps its status when its graph fails
            self._record([DocumentStatus(flight.doc.id, status, message=message, error=error)])
        self._outcomes[flight.doc.id] = DocOutcome(flight.doc.name, status, flight.doc.id, 0, error or message)
        self._recorded_some([flight])

    def _record(self, updates: list[DocumentStatus]) -> None:
        written = self.meta.set_document_statuses(updates)
        self.vanished |= {u.doc_id for u in updates} - written

    def _recorded_some(self, flights: list[_InFlight]) -> None:
        holding = [f for f in flights if f.has_slot]
        with self._lock:
            self._recorded += len(flights)
            self._in_flight -= len(holding)
        for flight in holding:
            flight.has_slot = False
            self._slots.release()
        self._report_documents()

    def _report_documents(self) -> None:
        with self._lock:
            done, in_flight = self._recorded, self._in_flight
        self.progress(Progress("documents", done, self._total, f"{in_flight} in flight" if in_flight else ""))
