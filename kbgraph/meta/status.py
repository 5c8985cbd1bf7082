"""Status changes of documents and tasks: the timestamps and progress that go with each status.

Documents (``kbgraph.meta.documents``) and tasks (``kbgraph.meta.tasks``) move through the same
statuses with the same side effects, so both apply them from here.
"""

from __future__ import annotations

import kbgraph.meta.models as m


def apply_status(row: m.Document | m.Task, status: str, progress: float | None, now: int) -> None:
    """The timestamp and progress side effects of a status change, shared by documents and tasks."""
    previous = row.status
    row.status = status
    if status == "pending":
        row.progress, row.started, row.finished, row.error = 0.0, None, None, None
    elif status == "running":
        if previous != "running":
            row.started, row.finished, row.error = now, None, None
    else:
        row.finished = now
        if status == "done":
            row.progress, row.error = 1.0, None
    if progress is not None:
        row.progress = progress


def stays_cancelled(row: m.Document, status: str) -> bool:
    """A stop the user asked for is shown at once, but the worker sees it only at its next check
    and may report progress before that: such a late "running" must not bring the run back. A new
    run goes through "pending" first (a new parse, or a changed file), which is let through."""
    return row.status == "cancelled" and status == "running"


def owns_row(row: m.Document, status: str, run_id: str | None) -> bool:
    """Whether a write naming run ``run_id`` may change the document: an anonymous write (None)
    always may, a new run's "pending" takes the row over, any other only from the row's own run."""
    if run_id is None or row.run_id is None or (status == "pending"):
        return True
    return row.run_id == run_id
