"""Files indexed into a knowledge base: folders walked, files registered (their digests say which
changed), and the documents run through one indexing run (kbgraph.index.run), then the graph
refreshed once; one document's bytes for a worker's task; the cost of a run estimated beforehand.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from kbgraph.engine.sync import FolderSync, file_digest, name_files
from kbgraph.llm.base import CancelCheck, Cancelled, UsageLedger
from kbgraph.meta import MAX_CHUNK_TOKENS, DocumentFile, NotFound
from kbgraph.meta.schemas import Document, KnowledgeBase
from kbgraph.parse.readers import SUPPORTED_SUFFIXES
from kbgraph.search.prepare import prepare_search
from kbgraph.utils.progress import Progress, ProgressFn, never, no_progress

if TYPE_CHECKING:
    # the indexing pipeline is imported by the methods that index: a query never loads it
    from kbgraph.index.context import KBContext
    from kbgraph.index.documents import DocOutcome, DocumentInput
    from kbgraph.index.estimate import RunEstimate
    from kbgraph.index.refresh_state import RefreshResult


def _reader(path: Path, readable: bool, within_limit: bool) -> Callable[[], bytes | None]:
    """A file's bytes when the run gets to it: b"" for a type kbgraph cannot read (it then fails with
    that reason), None over the size limit."""
    def read() -> bytes | None:
        if not within_limit:
            return None
        return path.read_bytes() if readable else b""

    return read


def _binary_opener(path: Path) -> Callable[[], BinaryIO]:
    return lambda: path.open("rb")


@dataclass
class IndexReport:
    documents: list[DocOutcome] = field(default_factory=list)
    refresh: RefreshResult | None = None
    ledger: UsageLedger = field(default_factory=UsageLedger)
    # the refresh finished graph phases an earlier run left unfinished (nothing was indexed this time)
    repaired: bool = False
    # documents of the folders indexed whose files are gone: removed with ``sync``, else only counted
    gone: list[str] = field(default_factory=list)
    removed: bool = False
    # folders below the ones given that the walk could not enter: (name under its folder, reason)
    unwalked: list[tuple[str, str]] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for d in self.documents if d.status == status)


class Indexing(FolderSync):
    """The indexing part of ``Engine``."""

    def index_paths(self, kb_name: str, paths: Sequence[Path], *, progress: ProgressFn = no_progress,
                    cancel: CancelCheck = never, force: bool = False, refresh: bool = True,
                    sync: bool = False) -> IndexReport:
        """Index files and folders into a KB; unchanged files are skipped unless ``force``.

        The documents go through one IndexRun (kbgraph.index.run): many of them parsed, extracted
        and merged at once. Then the graph's KB phases are refreshed once, with their own progress.
        Documents of the folders whose files are gone are listed in the report, and with ``sync``
        removed first (chunks and exactly their part of the graph).
        """
        from kbgraph.index.documents import DocOutcome, DocumentInput
        from kbgraph.index.run import IndexRun

        kb = self.kb(kb_name)
        report = IndexReport(ledger=self.ledger)
        named = name_files(paths)
        files = named.files
        report.unwalked = [(name, u.reason) for name, u in named.unwalked]
        gone = self.gone_documents(kb, named)
        report.gone = [d.name for d in gone]
        if sync and gone:
            self.remove_documents(kb, gone)
            report.removed = True
        settled: dict[str, DocOutcome] = {}  # files with nothing to run: unchanged, or unreadable
        names: list[str] = []

        def inputs() -> Iterator[DocumentInput]:
            batch = max(1, self.settings.index_batch_documents)
            for start in range(0, len(files), batch):
                for (name, _), item in zip(files[start:start + batch],
                                           self._register_files(kb, files[start:start + batch], force)):
                    names.append(name)
                    if isinstance(item, DocOutcome):
                        settled[name] = item
                    else:
                        yield item

        progress(Progress("documents", 0, len(files)))
        # summaries wait for the refresh's summary pass only when a refresh follows the run
        ctx = self.context(kb) if refresh else replace(self.context(kb), defer_summaries=False)
        run = IndexRun(ctx, self.meta, kb, self.kb_lock, progress=progress, cancel=cancel,
                       chunking=self._document_chunking)
        indexed = {o.name: o for o in run.run(inputs(), total=len(files))}
        report.documents = [settled.get(n) or indexed[n] for n in names if n in settled or n in indexed]
        progress(Progress("documents", len(files), len(files)))
        if refresh and kb.graph.enabled:
            self._refresh_after_run(kb, report, progress, cancel)  # the refresh prepares the searches
        elif report.count("indexed") or report.removed:
            prepare_search(self.store, self.tenant, [kb.id], graph=False)
        return report

    def _refresh_after_run(self, kb: KnowledgeBase, report: IndexReport, progress: ProgressFn,
                           cancel: CancelCheck) -> None:
        """The graph's phases after a run that indexed something, or that found them left unfinished
        by an earlier failure (kbgraph/index/repair.py): then even a run of unchanged files finishes them."""
        from kbgraph.index.repair import refresh_recorded, repair_owed

        kb = self.meta.get_kb(self.tenant, kb.id)  # its mark as the run left it
        ctx = self.context(kb)
        if not report.count("indexed") and not report.removed:
            if report.count("cancelled") or not repair_owed(ctx, kb):
                return
            report.repaired = True
        try:
            with self.kb_lock(kb.id):
                report.refresh = refresh_recorded(ctx, self.meta, kb, progress=progress, cancel=cancel)
        except Cancelled:
            if not cancel():
                raise
            return  # its mark stays: the next run finishes the phases (kbgraph/index/repair.py)
        self._fail_unsummarized(report)

    def estimate_index(self, kb_name: str, paths: Sequence[Path]) -> RunEstimate:
        """What indexing these files would roughly cost (chunks, LLM calls, seconds), from the sizes of
        those not indexed yet with the same size."""
        from kbgraph.index.estimate import estimate_run

        kb = self.kb(kb_name)
        # a file indexed already with the same size is most likely unchanged (the run compares digests)
        indexed = {d.name: d.size for d in self.meta.list_documents(kb.id, limit=None) if d.status == "done"}
        sizes = []
        for name, path in name_files(paths).files:
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if indexed.get(name) != size:
                sizes.append(size)
        return estimate_run(self.context(kb), sizes)

    def _fail_unsummarized(self, report: IndexReport) -> None:
        """Documents of this run whose descriptions the model could not summarize end failed (the
        descriptions keep their stand-ins), so that the next run indexes them again."""
        failures = report.refresh.summary_failures if report.refresh is not None else {}
        for number, outcome in enumerate(report.documents):
            error = failures.get(outcome.doc_id)
            if outcome.status == "indexed" and error:
                self.meta.set_document_status(outcome.doc_id, "failed", message=f"{outcome.message}; {error}",
                                              error=error)
                report.documents[number] = dataclasses.replace(outcome, status="failed", message=error)

    def _register_files(self, kb: KnowledgeBase, files: Sequence[tuple[str, Path]],
                        force: bool) -> list[DocumentInput | DocOutcome]:
        """The files' document rows, registered or updated in one transaction; an outcome for each
        file with nothing to run (unchanged, or unreadable)."""
        from kbgraph.index.documents import DocOutcome, DocumentInput

        limit = self.settings.max_file_bytes
        out: list[DocumentInput | DocOutcome | None] = [None] * len(files)
        found: list[tuple[int, DocumentFile, bool]] = []
        for number, (name, path) in enumerate(files):
            # an unreadable file is registered unread, to fail with its reason (type, size,
            # permissions, a dangling link)
            try:
                size = path.stat().st_size
                readable = path.suffix.lower() in SUPPORTED_SUFFIXES and size <= limit
                digest = file_digest(path) if readable else hashlib.sha256(b"").hexdigest()
            except OSError as exc:
                doc, _ = self.meta.upsert_document(kb.id, name, location=str(path.absolute()))
                reason = f"{name}: cannot read the file ({exc.strerror or exc})"
                self.meta.set_document_status(doc.id, "failed", message="could not be read", error=reason)
                out[number] = DocOutcome(name, "failed", doc.id, 0, reason)
                continue
            found.append((number, DocumentFile(name, str(path.resolve()), size, digest), readable))
        registered = self.meta.upsert_documents(kb.id, [f for _, f, _ in found])
        for (number, file, readable), (doc, changed) in zip(found, registered):
            if not changed and not force:
                out[number] = DocOutcome(file.name, "skipped", doc.id, doc.chunk_count, "unchanged")
            else:
                within = readable and file.size <= limit
                out[number] = DocumentInput(doc, _reader(Path(file.location), readable, file.size <= limit), file.size,
                                            open=_binary_opener(Path(file.location)) if within else None)
        return [o for o in out if o is not None]

    def _tracked(self, doc_id: str, outer: ProgressFn, run_id: str | None = None) -> ProgressFn:
        """A progress callback that also records the document's progress (at most twice a second per
        phase): every phase says what it is doing, with its detail ("merge 0/1, 5120 mentions..."),
        so a long phase (a merge, the summaries) is never a silent stretch; the phases of the
        pipeline proper also move the percentage, the others (summaries, embeddings) keep it."""
        spans = {"parse": (0.0, 0.3), "extract": (0.3, 0.9), "merge": (0.9, 0.99)}
        last: dict[str, Any] = {"at": 0.0, "phase": "", "progress": 0.0}

        def report(event: Progress) -> None:
            outer(event)
            if not event.total:
                return
            now = time.monotonic()
            if event.phase == last["phase"] and now - last["at"] < 0.5 and event.done < event.total:
                return
            if event.phase in spans:
                low, high = spans[event.phase]
                last["progress"] = max(last["progress"], low + (high - low) * event.done / event.total)
            last.update(at=now, phase=event.phase)
            detail = [event.message] if event.message else []
            if event.llm_calls:
                detail.append(f"{event.llm_calls} LLM calls, {event.tokens} tokens")
            self.meta.set_document_status(doc_id, "running", progress=last["progress"],
                                          message=f"{event.phase} {event.done}/{event.total}"
                                          + (f", {', '.join(detail)}" if detail else ""), run_id=run_id)

        return report

    def index_bytes(self, kb: KnowledgeBase, doc: Document, data: bytes | None, size: int, *,
                    progress: ProgressFn = no_progress, cancel: CancelCheck = never) -> DocOutcome:
        """Run the pipeline for one registered document; failures are recorded on the document."""
        from kbgraph.index.documents import DocumentInput
        from kbgraph.index.run import IndexRun

        ctx = replace(self.context(kb), defer_summaries=False)  # its graph is final when it is done
        run = IndexRun(ctx, self.meta, kb, self.kb_lock, cancel=cancel, document_progress=self._tracked(doc.id, progress, doc.run_id),
                       chunking=self._document_chunking)
        opener = (lambda: io.BytesIO(data)) if data is not None else None
        outcomes = run.run([DocumentInput(doc, lambda: data, size, open=opener)], total=1)
        if doc.id in run.vanished:
            raise NotFound(f"document {doc.id!r} was deleted while it was indexed")
        return outcomes[0]

    @staticmethod
    def _document_chunking(ctx: KBContext, doc: Document) -> KBContext:
        """A document's own chunk size (its ``parser_config.chunk_token_num``, set through the REST API)
        over the knowledge base's."""
        own = (doc.extra.get("parser_config") or {}).get("chunk_token_num")
        if isinstance(own, bool) or not isinstance(own, int) or not 1 <= own <= MAX_CHUNK_TOKENS \
                or own == ctx.chunk_tokens:
            return ctx
        return dataclasses.replace(ctx, chunk_tokens=own, chunk_overlap=min(ctx.chunk_overlap, own // 8))
