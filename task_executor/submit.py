"""What the web app calls to start and stop work: plain functions, no Celery knowledge needed.

A document's run is one metadata task row plus one Celery message whose task id is the row's id,
so a Celery log line, a task row and a document point at each other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from kbgraph.config import Settings
from kbgraph.meta import MetaDB, Task
import task_executor.tasks  # noqa: F401  (registers the shared tasks this module sends by name)
from task_executor.celery_app import KBCelery, make_celery
from task_executor.locks import task_claim_key

# a queued document's progress message until a worker takes its task
QUEUED_MESSAGE = "Task is queued..."
# ... and what it says instead while no worker is running (task_executor/heartbeat.py)
NO_WORKER_MESSAGE = ("No worker is running: the task waits in the queue until one starts "
                     "(start `kbgraph-worker` next to the web server)")

_apps: dict[tuple[str, str], KBCelery] = {}
_guard = threading.Lock()


def celery_for(settings: Settings) -> KBCelery:
    """One Celery app per (Redis URL, prefix) in this process, for sending tasks."""
    key = (settings.redis_url, settings.redis_prefix)
    with _guard:
        if key not in _apps:
            _apps[key] = make_celery(settings)
        return _apps[key]


def enqueue_documents(settings: Settings, tenant: str, kb_id: str, doc_ids: Sequence[str], *,
                      meta: MetaDB | None = None, app: KBCelery | None = None) -> list[Task]:
    """Queue (re)indexing of documents of one KB; returns their new task rows.

    An earlier unfinished run of the same document is asked to stop first: the newest upload wins.
    Raises NotFound for an unknown knowledge base (of this tenant) or document.
    """
    app = app or celery_for(settings)
    meta = meta or app.meta_db()
    meta.get_kb(tenant, kb_id)  # tenant check
    tasks: list[Task] = []
    for doc_id in doc_ids:
        meta.get_document(kb_id, doc_id)
        meta.request_cancel_document(kb_id, doc_id)
        task = meta.create_task(kb_id, "index", doc_id)
        # clears the last run's times and error; from now on only this run's writes land on the row
        meta.set_document_status(doc_id, "pending", run_id=task.id)
        meta.set_document_status(doc_id, "running", progress=0.0, message=QUEUED_MESSAGE, chunk_count=0,
                                 token_count=0, run_id=task.id)
        app.tasks["kbgraph.index_document"].apply_async((tenant, kb_id, doc_id, task.id), task_id=task.id)
        tasks.append(task)
    return tasks


def cancel_documents(settings: Settings, tenant: str, kb_id: str, doc_ids: Sequence[str], *,
                     meta: MetaDB | None = None, app: KBCelery | None = None) -> int:
    """Ask every unfinished run of these documents to stop; returns how many runs were asked.

    A queued run is cancelled at once; a running one stops at its next cancel check and then
    removes the chunks and mentions it wrote. The documents show "cancelled" from now on.
    """
    meta = meta or (app or celery_for(settings)).meta_db()
    meta.get_kb(tenant, kb_id)
    asked = 0
    for doc_id in doc_ids:
        meta.get_document(kb_id, doc_id)
        asked += meta.request_cancel_document(kb_id, doc_id)
        meta.set_document_status(doc_id, "cancelled", progress=0.0, message="cancelled by request")
    return asked


def enqueue_graph(settings: Settings, tenant: str, kb_id: str, *, meta: MetaDB | None = None,
                  app: KBCelery | None = None) -> Task:
    """Queue a whole-KB graph build: extract parsed documents not yet in the graph, then refresh."""
    app = app or celery_for(settings)
    meta = meta or app.meta_db()
    meta.get_kb(tenant, kb_id)
    task = meta.create_task(kb_id, "graphrag")
    app.tasks["kbgraph.build_graph"].apply_async((tenant, kb_id, task.id), task_id=task.id)
    return task


def run_in_progress(app: KBCelery, meta: MetaDB, kb_id: str, doc_id: str) -> bool:
    """Whether the document's newest run is queued or held by a live worker. A run marked running
    whose worker was killed (no claim, no write for three beats) is not: it may be started again."""
    newest = meta.list_tasks(kb_id, doc_id=doc_id, kind="index", newest_first=True, limit=1)
    if not newest or newest[0].status not in ("pending", "running"):
        return False
    task = newest[0]
    if task.status == "pending" or app.redis.exists(task_claim_key(app.settings.redis_prefix, task.id)):
        return True
    return time.time() * 1000 - task.updated < 3 * app.settings.task_heartbeat * 1000
