"""Graph phases a failure left unfinished (kbgraph/index/repair.py), finished without anyone asking:
a worker's start and a web server's start queue one graph refresh for every knowledge base whose
metadata row carries the repair mark, and a refresh the store failed queues itself again.

The mark lives in the metadata database, so this needs neither the store nor any knowledge of what
ran before: a service started while the store is still down queues the refreshes, and they run
(or queue themselves again) once a worker has them.
"""

from __future__ import annotations

import logging

from kbgraph.index.repair import REPAIR_MARK
from kbgraph.meta import MetaDB
from task_executor.celery_app import KBCelery
from task_executor.tasks import schedule_refresh

log = logging.getLogger(__name__)


def schedule_unfinished_refreshes(app: KBCelery, meta: MetaDB) -> list[str]:
    """Queue the refresh of every knowledge base (graph on) with the repair mark; returns their ids.
    Several processes starting at once queue one each (``schedule_refresh``'s pending key)."""
    queued = []
    for kb in meta.kbs_marked(REPAIR_MARK):
        if kb.graph.enabled and schedule_refresh(app, kb.tenant_id, kb.id):
            queued.append(kb.id)
    if queued:
        log.warning("graph phases left unfinished by an earlier failure: refresh queued for %d knowledge base(s) %s",
                    len(queued), ", ".join(queued))
    return queued


def schedule_at_start(app: KBCelery, meta: MetaDB) -> None:
    """``schedule_unfinished_refreshes`` for a service's start: Redis or the metadata database being
    down then must not stop the start (the next start, or the next task of the knowledge base, repairs)."""
    try:
        schedule_unfinished_refreshes(app, meta)
    except Exception:
        log.exception("could not look for graph phases left unfinished (the next task of each knowledge base will)")
