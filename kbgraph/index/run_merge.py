"""The end of an indexing run's documents (kbgraph/index/run.py): the documents extracted meanwhile
merged together under the knowledge base's lock, and every document's outcome recorded (its status
in the metadata database, its slot in the run given back, the run's progress reported).

``MergeAndRecord`` is mixed into ``IndexRun``, whose state it shares: what it reads of the run is
declared below.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from kbgraph.index.context import KBContext, report_progress
from kbgraph.index.documents import DocOutcome, InFlight
from kbgraph.index.merge import merge_documents, replace_mentions
from kbgraph.index.repair import rows_changing, rows_written
from kbgraph.meta import DocumentStatus, MetaDB
from kbgraph.meta.schemas import KnowledgeBase, NotFound as MetaNotFound
from kbgraph.utils.progress import Progress, ProgressFn

# documents merged in one transaction at most
_MERGE_DOCUMENTS = 512


class MergeAndRecord:
    """The merge loop of an indexing run and the recording of its documents' outcomes."""

    ctx: KBContext
    meta: MetaDB
    kb: KnowledgeBase
    kb_lock: Callable[[str], AbstractContextManager]
    graph: bool
    progress: ProgressFn
    vanished: set[str]
    _outcomes: dict[str, DocOutcome]
    _merge_queue: queue.Queue[InFlight | None]
    _slots: threading.BoundedSemaphore
    _lock: threading.Lock
    _total: int
    _recorded: int
    _in_flight: int

    def _stopped(self) -> bool:
        raise NotImplementedError  # the run's: whether it was cancelled

    def _doc_progress(self, event: Progress) -> None:
        raise NotImplementedError  # the run's: progress of its documents' own steps

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

    def _merge(self, flights: list[InFlight]) -> None:
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
            report_progress(self.ctx, self._doc_progress, "merge", 0, len(good),
                             f"{mentions} mentions of {len(good)} document(s)")
            with self.kb_lock(self.kb.id):  # merges of one KB never interleave
                # a failure from here on may leave rows the graph version does not count: the mark
                # in the metadata database says so (kbgraph/index/repair.py)
                owed = rows_changing(self.meta, self.kb.id, "a merge")
                for flight in good:
                    if flight.stored_mentions and flight.mentions:
                        self.ctx.store.upsert(self.ctx.tenant, self.ctx.kb_id, flight.mentions, refresh=False)
                if fresh:
                    with self.ctx.store.batch():
                        replace_mentions(self.ctx, [f.doc.id for f in fresh],
                                                  [row for f in fresh for row in f.mentions])
                for flight in good:
                    flight.mentions = []
                def rows_derived(done: int, total: int) -> None:
                    report_progress(self.ctx, self._doc_progress, "merge", done, total,
                                     f"rows of {mentions} mentions")

                merged = merge_documents(self.ctx, [f.doc.id for f in good], progress=rows_derived)
                rows_written(self.meta, self.kb.id, owed, "a merge")
            report_progress(self.ctx, self._doc_progress, "merge", len(good), len(good),
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
                                          token_count=flight.tokens, extracted=extracted, run_id=flight.doc.run_id))
            self._outcomes[flight.doc.id] = DocOutcome(flight.doc.name, "indexed", flight.doc.id, flight.chunks, message)
        self._record(updates)
        self._recorded_some(good)

    def _graph_recorded(self, flight: InFlight, summary: str) -> None:
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

    def _partial(self, flight: InFlight, message: str) -> DocumentStatus:
        """A document whose graph extraction failed for some chunks: searchable, but not done. It
        ends "failed" with the count, so it is indexed again on the next run, where only those
        chunks cost model calls (the others' answers parsed, so they come from the cache)."""
        ex = flight.extraction
        error = (f"partial: graph extraction failed for {len(ex.failed_chunks)} of {flight.chunks} chunk(s) "
                 f"({ex.errors[0]}); the other chunks are indexed; parse the document again to retry "
                 f"only the failed ones")
        self._outcomes[flight.doc.id] = DocOutcome(flight.doc.name, "failed", flight.doc.id, flight.chunks, error)
        return DocumentStatus(flight.doc.id, "failed", message=f"{message}; {error}", error=error,
                              chunk_count=flight.chunks, token_count=flight.tokens, run_id=flight.doc.run_id)

    def _finish(self, flight: InFlight, status: str, *, message: str = "", error: str | None = None) -> None:
        """Record one document that ends without a merge (failed, cancelled)."""
        message = message or status
        if not flight.graph_only:  # a parsed document keeps its status when its graph fails
            self._record([DocumentStatus(flight.doc.id, status, message=message, error=error, run_id=flight.doc.run_id)])
        self._outcomes[flight.doc.id] = DocOutcome(flight.doc.name, status, flight.doc.id, 0, error or message)
        self._recorded_some([flight])

    def _record(self, updates: list[DocumentStatus]) -> None:
        written = self.meta.set_document_statuses(updates)
        self.vanished |= {u.doc_id for u in updates} - written

    def _recorded_some(self, flights: list[InFlight]) -> None:
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
