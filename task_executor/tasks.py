"""The worker's tasks: index one document, refresh a knowledge base's graph phases (debounced).

Every outcome lands in the metadata DB: the task row (status, progress, LLM calls, tokens, error)
and the document row. A task whose knowledge base or document was deleted under it stops quietly.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from celery import Task as CeleryTask
from celery import shared_task

from kbgraph.blob import BlobError, BlobStore, document_file
from kbgraph.engine import Engine
from kbgraph.index.delete import delete_document
from kbgraph.index.repair import changing_rows, refresh_recorded, repair_mark
from kbgraph.llm.base import Cancelled, UsageLedger
from kbgraph.meta import FINISHED, Document, KnowledgeBase, MetaDB, NotFound
from kbgraph.store.base import StoreUnavailable
from kbgraph.utils.progress import Progress
from task_executor.celery_app import KBCelery
from task_executor.locks import ClaimedElsewhere, RedisKBLock, task_claim
from task_executor.metrics import task_ended

log = logging.getLogger(__name__)

Spans = dict[str, tuple[float, float]]

# the share of a task's progress each pipeline phase covers: a document's run (as Engine reports it
# on the document), the KB refresh after a batch (summaries, PageRank, communities, reports, vectors:
# the reports and the vectors overlap) and a whole-KB graph build (its documents, then the refresh)
INDEX_SPANS: Spans = {"parse": (0.0, 0.3), "extract": (0.3, 0.9), "merge": (0.9, 0.99)}
REFRESH_SPANS: Spans = {"summaries": (0.0, 0.15), "resolution": (0.15, 0.2), "pagerank": (0.2, 0.25),
                        "communities": (0.25, 0.3), "reports": (0.3, 0.95), "embed": (0.3, 0.95)}
BUILD_SPANS: Spans = {"documents": (0.0, 0.6),
                      **{phase: (0.6 + 0.4 * low, 0.6 + 0.4 * high) for phase, (low, high) in REFRESH_SPANS.items()}}


def refresh_pending_key(prefix: str, kb_id: str) -> str:
    return f"{prefix}refresh:pending:{kb_id}"


def _app(task: CeleryTask) -> KBCelery:
    app = task.app
    if not isinstance(app, KBCelery):
        raise TypeError("kbgraph tasks run on an app made by task_executor.celery_app.make_celery")
    return app


class CancelFlag:
    """The task row's cancel flag as a CancelCheck, read at most every ``every`` seconds."""

    def __init__(self, meta: MetaDB, task_id: str, every: float = 0.5) -> None:
        self.meta, self.task_id, self.every = meta, task_id, every
        self._at, self._set = 0.0, False

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self._set and now - self._at >= self.every:
            self._at = now
            self._set = self.meta.is_cancel_requested(self.task_id)
        return self._set


class TaskProgress:
    """Pipeline progress written to the task row (``spans``: each phase's share of it), at most
    twice a second unless a phase ends; it never goes back (overlapping phases report in turn)."""

    def __init__(self, meta: MetaDB, task_id: str, spans: Spans = INDEX_SPANS) -> None:
        self.meta, self.task_id, self.spans = meta, task_id, spans
        self._at, self._phase, self._progress = 0.0, "", 0.0

    def __call__(self, event: Progress) -> None:
        if event.phase not in self.spans or not event.total:
            return
        now = time.monotonic()
        if now - self._at < 0.5 and event.done < event.total and event.phase == self._phase:
            return
        self._at, self._phase = now, event.phase
        low, high = self.spans[event.phase]
        self._progress = max(self._progress, min(0.99, low + (high - low) * event.done / event.total))
        self.meta.update_task(self.task_id, progress=self._progress,
                              message=f"{event.phase} {event.done}/{event.total}"
                              + (f", {event.llm_calls} LLM calls" if event.llm_calls else ""))


def _llm_usage(ledger: UsageLedger) -> tuple[int, int, int]:
    chat = [u for phase, u in ledger.by_phase.items() if phase != "embed"]
    return (sum(u.calls for u in chat), sum(u.prompt_tokens for u in chat), sum(u.completion_tokens for u in chat))


def _read_upload(engine: Engine, blobs: BlobStore, doc: Document) -> bytes | None:
    """The document's file, from the blob store the web server put it in (on another host, maybe).
    None tells index_bytes the file is over the size limit, which it records as the failure."""
    if doc.size > engine.settings.max_file_bytes:
        return None
    return document_file(blobs, doc.kb_id, doc.id, doc.location).read()


def _record_failure(meta: MetaDB, task_id: str, doc_id: str, error: str) -> None:
    for write in (lambda: meta.update_task(task_id, status="failed", message="failed", error=error),
                  lambda: meta.set_document_status(doc_id, "failed", message="indexing failed", error=error,
                                                   run_id=task_id)):
        try:
            write()
        except NotFound:
            pass
        except Exception:  # the DB itself is failing: the log is all that is left
            log.exception("could not record the failure of task %s (%s)", task_id, error)


def _discard_partial(engine: Engine, kb_id: str, doc_id: str, task_id: str) -> None:
    """A cancelled document keeps nothing: drop the chunks and mentions it got to write."""
    kb = engine.meta.get_kb(engine.tenant, kb_id)
    with engine.kb_lock(kb_id), changing_rows(engine.meta, kb, "a cancelled document's removal"):
        delete_document(engine.context(kb), doc_id)
    engine.meta.set_document_status(doc_id, "cancelled", progress=0.0, message="cancelled", chunk_count=0,
                                    token_count=0, run_id=task_id)


def _drop_orphan_rows(engine: Engine, tenant_id: str, kb_id: str, doc_id: str) -> None:
    """Rows this run wrote after its document was deleted would outlive it: remove them."""
    try:
        kb = engine.meta.get_kb(tenant_id, kb_id)
    except NotFound:
        return  # the whole knowledge base went, rows and all
    if engine.meta.find_document(kb_id, doc_id) is not None:
        return
    with engine.kb_lock(kb_id), changing_rows(engine.meta, kb, "a deleted document's removal"):
        delete_document(engine.context(kb), doc_id)


def _is_latest_run(meta: MetaDB, kb_id: str, doc_id: str, task_id: str) -> bool:
    newest = meta.list_tasks(kb_id, doc_id=doc_id, kind="index", newest_first=True, limit=1)
    return not newest or newest[0].id == task_id


def _claim(app: KBCelery, task_id: str) -> RedisKBLock:
    return task_claim(app.redis, app.settings.redis_prefix, task_id, 3 * app.settings.task_heartbeat)


def _already_finished(meta: MetaDB, kb_id: str, task_id: str) -> bool:
    try:
        return meta.get_task(kb_id, task_id).status in FINISHED
    except NotFound:
        return False  # the run itself finds out and stops quietly


def run_once(app: KBCelery, kb_id: str, task_id: str, run: Callable[[], dict[str, Any]],
             kind: str = "task") -> dict[str, Any]:
    """``run()`` unless this task already ended or runs in a live worker: a message may arrive twice
    (the broker's redelivery after a kill, a sweep's re-queue), the work must not happen twice.
    What ran is counted in the worker's metrics (``kind``: index, refresh, graphrag)."""
    meta = app.engines().meta
    if _already_finished(meta, kb_id, task_id):
        return {"status": "skipped", "reason": "the task has finished already"}
    started, status = time.monotonic(), "error"
    try:
        with _claim(app, task_id):
            if _already_finished(meta, kb_id, task_id):  # ended between the check and the claim
                return {"status": "skipped", "reason": "the task has finished already"}
            result = run()
            status = str(result.get("status", "done"))
            return result
    except ClaimedElsewhere:
        status = "duplicate"
        return {"status": "skipped", "reason": "another worker runs the task"}
    finally:
        task_ended(kind, status, time.monotonic() - started)


def run_index(app: KBCelery, tenant_id: str, kb_id: str, doc_id: str, task_id: str) -> dict[str, Any]:
    engine = app.engines().engine(tenant_id)
    meta = engine.meta
    try:
        if meta.is_cancel_requested(task_id):  # cancelled while queued, or its document is gone
            try:
                meta.update_task(task_id, status="cancelled", message="cancelled before it started")
            except NotFound:
                pass
            return {"status": "cancelled"}
        meta.update_task(task_id, status="running", progress=0.0, message="Task has been received.", add_attempts=1)
        kb = meta.get_kb(tenant_id, kb_id)
        if kb.graph.enabled and repair_mark(kb) is not None:  # phases an earlier failure left unfinished
            schedule_refresh(app, tenant_id, kb_id)
        # every status this run writes names it: once the document is parsed again (a newer run
        # owns the row), whatever this one still reports is ignored
        doc = meta.get_document(kb_id, doc_id).model_copy(update={"run_id": task_id})
        try:
            data = _read_upload(engine, app.engines().blobs, doc)
        except (OSError, BlobError) as exc:
            error = f"the stored upload cannot be read: {exc}"
            _record_failure(meta, task_id, doc_id, error)
            return {"status": "failed", "error": error}
        before = _llm_usage(engine.ledger)
        outcome = engine.index_bytes(kb, doc, data, doc.size, progress=TaskProgress(meta, task_id, INDEX_SPANS),
                                     cancel=CancelFlag(meta, task_id))
        # exact under the prefork pool (one task per process at a time); approximate under threads
        calls, prompt, completion = (a - b for a, b in zip(_llm_usage(engine.ledger), before))
        usage = {"add_llm_calls": max(calls, 0), "add_prompt_tokens": max(prompt, 0),
                 "add_completion_tokens": max(completion, 0)}
        if outcome.status == "indexed":
            if kb.graph.enabled:  # first: a document "done" with no refresh to come reads as an idle graph
                schedule_refresh(app, tenant_id, kb_id)
            meta.update_task(task_id, status="done", message=outcome.message, **usage)
        elif outcome.status == "cancelled":
            if _is_latest_run(meta, kb_id, doc_id, task_id):  # a newer run owns the document's rows now
                _discard_partial(engine, kb_id, doc_id, task_id)
            meta.update_task(task_id, status="cancelled", message="cancelled", **usage)
            _refresh_after_failure(app, tenant_id, kb)  # what it merged before the cancel is gone again
        else:
            meta.update_task(task_id, status="failed", message="failed", error=outcome.message, **usage)
            _refresh_after_failure(app, tenant_id, kb)
        return {"status": outcome.status, "chunks": outcome.chunks, "message": outcome.message}
    except NotFound as exc:  # the knowledge base or document was deleted while we worked
        _drop_orphan_rows(engine, tenant_id, kb_id, doc_id)
        try:
            meta.update_task(task_id, status="cancelled", message=str(exc))
        except NotFound:
            pass
        return {"status": "cancelled", "message": str(exc)}
    except Exception as exc:
        _record_failure(meta, task_id, doc_id, f"{type(exc).__name__}: {exc}")
        try:
            _refresh_after_failure(app, tenant_id, meta.get_kb(tenant_id, kb_id))
        except Exception:
            log.exception("could not schedule the graph refresh after task %s failed", task_id)
        raise


def _refresh_after_failure(app: KBCelery, tenant_id: str, kb: KnowledgeBase) -> None:
    # a run that failed after merging part of its document changed the graph: the KB phases
    # (PageRank, communities, reports) must catch up instead of waiting for the next document
    if kb.graph.enabled:
        schedule_refresh(app, tenant_id, kb.id)


@shared_task(bind=True, name="kbgraph.index_document")
def index_document(self: CeleryTask, tenant_id: str, kb_id: str, doc_id: str, task_id: str) -> dict[str, Any]:
    """Parse, embed and (graph on) extract and merge one uploaded document."""
    app = _app(self)
    return run_once(app, kb_id, task_id, lambda: run_index(app, tenant_id, kb_id, doc_id, task_id), "index")


def schedule_refresh(app: KBCelery, tenant_id: str, kb_id: str, *, delay: float | None = None) -> bool:
    """Queue one refresh of the KB's graph phases unless one is already waiting; True if queued.
    ``delay``: seconds before it runs (default: the app's refresh delay).

    The pending key expires on its own, so a lost refresh task cannot block later ones for long.
    """
    countdown = app.refresh_delay if delay is None else delay
    key = refresh_pending_key(app.settings.redis_prefix, kb_id)
    if not app.redis.set(key, "1", nx=True, ex=max(60, int(app.refresh_delay * 10), int(countdown * 2))):
        return False
    # through the given app's registry: the current app of this thread may be another one
    app.tasks["kbgraph.refresh_graph"].apply_async((tenant_id, kb_id), countdown=countdown)
    return True


def store_retry_delay(app: KBCelery) -> float:
    """Seconds before a refresh the store failed tries again: six beats (30 s by default), so a store
    that is down for long costs a failed attempt per knowledge base and half minute, nothing more."""
    return max(app.refresh_delay, 6 * app.settings.task_heartbeat)


# the documents page shows the last refresh; a few more say how the recent ones went
REFRESH_TASKS_KEPT = 20


@shared_task(bind=True, name="kbgraph.refresh_graph")
def refresh_graph(self: CeleryTask, tenant_id: str, kb_id: str, task_id: str | None = None) -> dict[str, Any]:
    """Recompute the KB's stale PageRank/communities/reports, under the KB lock, with its progress
    on a task row of kind "refresh" (``task_id``: the row of a run whose worker was lost)."""
    app = _app(self)
    pending = refresh_pending_key(app.settings.redis_prefix, kb_id)
    engine = app.engines().engine(tenant_id)
    try:
        kb = engine.meta.get_kb(tenant_id, kb_id)
    except NotFound:
        app.redis.delete(pending)
        return {"status": "skipped", "reason": "knowledge base deleted"}
    if not kb.graph.enabled:
        app.redis.delete(pending)
        return {"status": "skipped", "reason": "knowledge graph off"}
    if task_id is None:
        task_id = engine.meta.create_task(kb_id, "refresh").id
        engine.meta.prune_finished_tasks(kb_id, "refresh", keep=REFRESH_TASKS_KEPT)
    # cleared before the work, so a document finishing during it schedules another refresh; and
    # after the row exists, so "no key, no unfinished refresh row" means the graph is refreshed
    app.redis.delete(pending)
    return run_once(app, kb_id, task_id, lambda: run_refresh(app, engine, kb, task_id), "refresh")


def run_refresh(app: KBCelery, engine: Engine, kb: KnowledgeBase, task_id: str) -> dict[str, Any]:
    meta = engine.meta
    started = time.monotonic()
    try:
        meta.update_task(task_id, status="running", progress=0.0, message="graph refresh", add_attempts=1)
        before = _llm_usage(engine.ledger)
        with engine.kb_lock(kb.id):
            kb = meta.get_kb(kb.tenant_id, kb.id)  # its settings and repair mark as they are now
            result = refresh_recorded(engine.context(kb), meta, kb,
                                      progress=TaskProgress(meta, task_id, REFRESH_SPANS))
        calls, prompt, completion = (a - b for a, b in zip(_llm_usage(engine.ledger), before))
        meta.update_task(task_id, status="done", add_llm_calls=max(calls, 0), add_prompt_tokens=max(prompt, 0),
                         add_completion_tokens=max(completion, 0),
                         message=f"graph refreshed to version {result.version}: {result.communities} communities, "
                                 f"{result.reports_generated} reports written ({time.monotonic() - started:.2f}s)")
    except NotFound as exc:  # the knowledge base went meanwhile
        with contextlib.suppress(NotFound):
            meta.update_task(task_id, status="cancelled", message=str(exc))
        return {"status": "skipped", "reason": str(exc)}
    except StoreUnavailable as exc:  # the mark stays (kbgraph/index/repair.py); try again when it may answer
        delay = store_retry_delay(app)
        error = f"{exc}. This refresh is tried again in {delay:g} s"
        with contextlib.suppress(Exception):
            meta.update_task(task_id, status="failed", message="failed: the document store is unavailable",
                             error=error)
        log.warning("graph refresh of knowledge base %s failed: %s", kb.id, error)
        with contextlib.suppress(Exception):
            schedule_refresh(app, kb.tenant_id, kb.id, delay=delay)
        return {"status": "failed", "error": error, "task_id": task_id}
    except Exception as exc:
        with contextlib.suppress(Exception):
            meta.update_task(task_id, status="failed", message="failed", error=f"{type(exc).__name__}: {exc}")
        raise
    return {"status": "done", "version": result.version, "skipped": result.skipped,
            "pagerank_updated": result.pagerank_updated, "communities": result.communities, "task_id": task_id}


@shared_task(bind=True, name="kbgraph.build_graph")
def build_graph(self: CeleryTask, tenant_id: str, kb_id: str, task_id: str) -> dict[str, Any]:
    """Bring every parsed document of a KB into its graph (extract + merge), then refresh the KB
    phases: what RAGFlow's run_graphrag does, for documents parsed while the graph was off."""
    app = _app(self)
    return run_once(app, kb_id, task_id, lambda: run_build_graph(app, tenant_id, kb_id, task_id), "graphrag")


def run_build_graph(app: KBCelery, tenant_id: str, kb_id: str, task_id: str) -> dict[str, Any]:
    """Engine.build_graph (the same bounded pipeline as ``kbgraph index`` and every document task),
    its progress on the task row: documents extracted, then each phase of the refresh."""
    engine = app.engines().engine(tenant_id)
    meta = engine.meta
    started = time.monotonic()
    try:
        meta.update_task(task_id, status="running", progress=0.0, message="created task graphrag", add_attempts=1)
        kb = meta.get_kb(tenant_id, kb_id)
        before = _llm_usage(engine.ledger)
        report = engine.build_graph(kb.name, progress=TaskProgress(meta, task_id, BUILD_SPANS),
                                    cancel=CancelFlag(meta, task_id))
        calls, prompt, completion = (a - b for a, b in zip(_llm_usage(engine.ledger), before))
        usage = {"add_llm_calls": max(calls, 0), "add_prompt_tokens": max(prompt, 0),
                 "add_completion_tokens": max(completion, 0)}
        if report.count("cancelled"):
            meta.update_task(task_id, status="cancelled", message="cancelled", **usage)
            return {"status": "cancelled"}
        failed = [o for o in report.documents if o.status == "failed"]
        message = (f"{report.count('indexed')} document(s) extracted"
                   + (f", {len(failed)} failed ({failed[0].name}: {failed[0].message})" if failed else "")
                   + f". Knowledge Graph done ({time.monotonic() - started:.2f}s)")
        meta.update_task(task_id, status="failed" if failed else "done", message=message,
                         error=message if failed else None, **usage)
        return {"status": "failed" if failed else "done", "documents": len(report.documents)}
    except Cancelled:
        meta.update_task(task_id, status="cancelled", message="cancelled")
        return {"status": "cancelled"}
    except NotFound as exc:
        return {"status": "cancelled", "message": str(exc)}
    except Exception as exc:
        try:
            meta.update_task(task_id, status="failed", message="failed", error=f"{type(exc).__name__}: {exc}")
        except Exception:
            log.exception("could not record the failure of graph task %s", task_id)
        raise
