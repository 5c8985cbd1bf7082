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
recording, a large document is chunked and stored in batches (kbgraph.index.chunks.parse_document),
and its mentions are written as they come instead of being held until its merge.

The merge of the extracted documents and the recording of their outcomes are in run_merge.py.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager

from kbgraph.graph.extract.base import Extractor
from kbgraph.index.chunks import document_chunk_pages, document_chunks, iter_document_chunks, parse_document, store_chunks
from kbgraph.index.context import WRITE_ROWS, KBContext, report_progress
from kbgraph.index.documents import DocOutcome, DocumentInput, InFlight
from kbgraph.index.extraction import build_document_extractor, extract_chunk
from kbgraph.index.merge import replace_mentions
from kbgraph.index.run_merge import MergeAndRecord
from kbgraph.index.summaries_ahead import SummariesAhead, can_ask_ahead
from kbgraph.llm.base import CancelCheck, Cancelled
from kbgraph.meta import DocumentStatus, MetaDB
from kbgraph.meta.schemas import Document, KnowledgeBase
from kbgraph.parse.readers import ParseError, ParsedDocument, read_bytes
from kbgraph.parse.text_stream import stream_text
from kbgraph.store.records import Chunk
from kbgraph.utils.progress import Progress, ProgressFn, never, no_progress

# a document with more text than this is chunked, embedded and stored on its own, in batches
_LARGE_CHARS = 1_000_000
# a parse batch holds at most this much text
_BATCH_CHARS = 4_000_000
# seconds between two progress events of the same phase (the last one always goes out)
_PROGRESS_EVERY = 0.2
# a large document's chunks are read back for extraction this many at a time, and at most
# _CHUNKS_WAITING of them are submitted and not yet extracted
_PAGE_CHUNKS = 1024
_CHUNKS_WAITING = 2048


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


class IndexRun(MergeAndRecord):
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
        self._merge_queue: queue.Queue[InFlight | None] = queue.Queue()
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
            self._extractor = build_document_extractor(self.ctx)
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
                batch: list[tuple[InFlight, ParsedDocument]] = []
                chars = 0
                for item in inputs:
                    order.append(item.doc.id)
                    if self._stopped():
                        # the files not reached yet are not read (their rows, if registered, wait
                        # as they were for the next run)
                        self._finish(InFlight(item.doc), "cancelled")
                        break
                    if not self._slots.acquire(blocking=False):
                        self._parse_batch(batch, pool)  # what waits here holds slots: send it on first
                        batch, chars = [], 0
                        self._acquire_slot()
                    with self._lock:
                        self._in_flight += 1
                    self._report_documents()
                    flight = InFlight(item.doc, has_slot=True)
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

    def _read(self, flight: InFlight, item: DocumentInput) -> ParsedDocument | None:
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

    def _parse_batch(self, batch: list[tuple[InFlight, ParsedDocument]], pool: ThreadPoolExecutor) -> None:
        """Chunk the batch's documents, set their extraction going, then embed and store their
        chunks meanwhile (extraction needs only their text)."""
        if not batch:
            return
        self._mark_running([flight for flight, _ in batch])
        try:
            store_chunks(self.ctx, [f.doc.id for f, _ in batch], [f.chunk_rows for f, _ in batch],
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
            report_progress(self.ctx, self.progress, "parse", self._parsed, self._total, "documents")
        for flight, _ in batch:
            if self.document_progress is not None:  # a run of one document: in its chunks
                report_progress(self.ctx, self._doc_progress, "parse", flight.chunks, flight.chunks, flight.doc.name)
            flight.chunk_rows = []
            self._step_done(flight)  # the stored chunks were the flight's last step but its extraction

    def _start_extraction(self, flight: InFlight, parsed: ParsedDocument, pool: ThreadPoolExecutor) -> None:
        """Chunk the document, each chunk going to extraction as soon as it is cut: a book's first
        model calls go out while the rest of it is still being chunked (a 1 MB text takes ~0.7 s)."""
        # two steps besides the chunks' extractions: the chunking itself, and storing the chunks
        flight.remaining = 2
        for chunk in iter_document_chunks(self.chunking(self.ctx, flight.doc), flight.doc.id, parsed):
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

    def _parse_large(self, flight: InFlight, parsed: ParsedDocument, pool: ThreadPoolExecutor) -> None:
        self._mark_running([flight])
        try:
            result = parse_document(self.chunking(self.ctx, flight.doc), flight.doc.id, parsed,
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

    def _extract_pages(self, flight: InFlight, pool: ThreadPoolExecutor) -> None:
        """A large document's stored chunks to extraction, read back a page at a time, with at most
        _CHUNKS_WAITING of them submitted and not yet extracted: its chunks are never all in memory."""
        flight.remaining = flight.chunks
        flight.extraction.chunks = flight.chunks
        with self._lock:
            self._chunks_submitted += flight.chunks
        room = threading.BoundedSemaphore(_CHUNKS_WAITING)
        sent = 0
        try:
            for page in document_chunk_pages(self.ctx, flight.doc.id, flight.chunks, _PAGE_CHUNKS):
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

    def _extract_stored(self, flight: InFlight, pool: ThreadPoolExecutor) -> None:
        flight.graph_only = True
        flight.chunks, flight.tokens = flight.doc.chunk_count, flight.doc.token_count
        try:
            chunks = document_chunks(self.ctx, flight.doc.id)
        except Exception as exc:
            self._finish(flight, "failed", message="its chunks could not be read", error=f"{type(exc).__name__}: {exc}")
            return
        self._extract(flight, chunks, pool)

    def _mark_running(self, flights: list[InFlight]) -> None:
        self._record([DocumentStatus(f.doc.id, "running", progress=0.0, message="indexing",
                                         run_id=f.doc.run_id)
                                         for f in flights])

    def _doc_progress(self, event: Progress) -> None:
        self.progress(event)
        if self.document_progress is not None:
            self.document_progress(event)

    # -- extract ------------------------------------------------------------------------------

    def _extract(self, flight: InFlight, chunks: list[Chunk], pool: ThreadPoolExecutor, *,
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

    def _step_done(self, flight: InFlight) -> None:
        with flight.lock:
            flight.remaining -= 1
            last = flight.remaining == 0
        if last:
            self._merge_queue.put(flight)

    def _submit_chunk(self, pool: ThreadPoolExecutor, flight: InFlight, chunk: Chunk,
                      room: threading.BoundedSemaphore | None = None) -> None:
        if self._ahead is not None:
            self._ahead.chunk_submitted(chunk)
        pool.submit(self._extract_chunk, flight, chunk, room)

    def _extract_chunk(self, flight: InFlight, chunk: Chunk, room: threading.BoundedSemaphore | None = None) -> None:
        try:
            self._extract_one(flight, chunk)
        finally:
            if room is not None:
                room.release()

    def _extract_one(self, flight: InFlight, chunk: Chunk) -> None:
        extraction, error = None, ""
        try:
            if not self._stopped() and not flight.failure:
                extraction, error = extract_chunk(self.ctx, self._extractor, chunk, self._stopped)
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
            if len(flight.mentions) >= WRITE_ROWS and not self._cancelled.is_set():
                self._store_mentions(flight)  # a large document: not all of its mentions in memory
        if self._ahead is not None:
            self._ahead.chunk_done(chunk, entities, relations)
        with self._lock:
            self._chunks_done += 1
            done, submitted = self._chunks_done, self._chunks_submitted
        report_progress(self.ctx, self._doc_progress, "extract", done, submitted)
        self._step_done(flight)

    def _store_mentions(self, flight: InFlight) -> None:
        rows, flight.mentions = flight.mentions, []
        if not flight.stored_mentions:
            with self.ctx.store.batch():
                replace_mentions(self.ctx, [flight.doc.id], rows)
            flight.stored_mentions = True
        else:
            self.ctx.store.upsert(self.ctx.tenant, self.ctx.kb_id, rows, refresh=False)
