"""Tasks whose worker died are re-queued: each worker's main process sweeps for them.

A task row says "running" from the moment a worker claimed it (a Redis key the worker keeps alive
every ``task_heartbeat`` seconds) until it records how it ended. A running row without a live claim
means its worker was killed between the two: its message may be gone (acknowledged as a duplicate
while the first delivery still ran) or waiting out the broker's visibility timeout, so the sweep
sends it again. A second copy is harmless: whichever starts second finds the task claimed or
finished and drops itself.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from celery.signals import worker_ready, worker_shutdown

from kbgraph.meta import Task
from task_executor.celery_app import KBCelery
from task_executor.locks import task_claim_key
from task_executor.repair import schedule_at_start

log = logging.getLogger(__name__)


def requeue_key(prefix: str, task_id: str) -> str:
    return f"{prefix}requeued:task:{task_id}"


def _is_orphan(app: KBCelery, task: Task, now_ms: int) -> bool:
    settings = app.settings
    grace_ms = 3 * settings.task_heartbeat * 1000
    if now_ms - task.updated < grace_ms:  # written moments ago: its worker may be about to claim
        return False
    return not app.redis.exists(task_claim_key(settings.redis_prefix, task.id))


def _send_again(app: KBCelery, tenant_id: str, task: Task) -> bool:
    if task.kind == "index" and task.doc_id:
        app.tasks["kbgraph.index_document"].apply_async((tenant_id, task.kb_id, task.doc_id, task.id), task_id=task.id)
        return True
    if task.kind == "graphrag":
        app.tasks["kbgraph.build_graph"].apply_async((tenant_id, task.kb_id, task.id), task_id=task.id)
        return True
    if task.kind == "refresh":
        app.tasks["kbgraph.refresh_graph"].apply_async((tenant_id, task.kb_id), {"task_id": task.id})
        return True
    return False


def requeue_orphaned_tasks(app: KBCelery) -> list[str]:
    """Send again every running task whose worker is gone; returns their ids."""
    settings = app.settings
    meta = app.meta_db()
    sent = []
    now_ms = time.time_ns() // 1_000_000
    for tenant_id, task in meta.running_tasks():
        if not _is_orphan(app, task, now_ms):
            continue
        # one sweeper of the many workers sends it, once per claim lifetime
        if not app.redis.set(requeue_key(settings.redis_prefix, task.id), "1", nx=True,
                             ex=max(1, int(3 * settings.task_heartbeat))):
            continue
        if _send_again(app, tenant_id, task):
            log.warning("task %s (%s of document %s) lost its worker: queued again", task.id, task.kind, task.doc_id)
            sent.append(task.id)
    return sent


class StaleTaskSweeper:
    """A daemon thread of a worker's main process: a sweep at start, then one per three beats."""

    def __init__(self, app: KBCelery) -> None:
        self.app = app
        self.every = 3 * app.settings.task_heartbeat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kbgraph-sweeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        schedule_at_start(self.app, self.app.meta_db())  # graph phases a failure left unfinished
        while True:
            try:
                requeue_orphaned_tasks(self.app)
            except Exception:  # Redis or the DB is down for a moment: the next sweep tries again
                log.exception("the sweep for tasks of killed workers failed")
            if self._stop.wait(self.every):
                return


# connected when a worker imports this module at start (the app's ``include``): each worker's main
# process runs one sweeper
@worker_ready.connect
def _start_sweeper(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if isinstance(app, KBCelery) and app.sweeper is None:
        app.sweeper = StaleTaskSweeper(app)
        app.sweeper.start()


@worker_shutdown.connect
def _stop_sweeper(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if isinstance(app, KBCelery) and app.sweeper is not None:
        app.sweeper.stop()
        app.sweeper = None
