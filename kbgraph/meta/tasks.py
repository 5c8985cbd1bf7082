"""Tasks: the runs of a knowledge base's work (index a document, build or refresh the graph).

A task row carries a run's status, progress, counters (attempts, LLM calls, tokens) and the cancel
flag a worker polls. Calls keyed by a task id alone (``update_task``, ``request_cancel``,
``is_cancel_requested``) are for workers that got the id from a task they were handed.
"""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

import kbgraph.meta.models as m
from kbgraph.meta.checks import check_count, check_progress, check_status, check_task_kind
from kbgraph.meta.database import Database, new_id, now_ms
from kbgraph.meta.documents import doc_row
from kbgraph.meta.knowledge_bases import require_kb
from kbgraph.meta.schemas import FINISHED, MetaError, NotFound, Task
from kbgraph.meta.status import apply_status


def task_row(s: Session, task_id: str, kb_id: str | None = None, *, lock: bool = False) -> m.Task:
    query = select(m.Task).where(m.Task.id == task_id)
    if kb_id is not None:
        query = query.where(m.Task.kb_id == kb_id)
    row = s.scalar(query.with_for_update() if lock else query)
    if row is None:
        raise NotFound(f"task {task_id!r} does not exist")
    return row


class TasksMixin(Database):
    """``MetaDB``'s calls on tasks."""

    def create_task(self, kb_id: str, kind: str, doc_id: str | None = None) -> Task:
        check_task_kind(kind)
        now = now_ms()
        with self._write() as s:
            require_kb(s, kb_id)
            if doc_id is not None:
                doc_row(s, doc_id, kb_id)
            row = m.Task(
                id=new_id(), kb_id=kb_id, doc_id=doc_id, kind=kind, status="pending", created=now, updated=now
            )
            s.add(row)
        return Task.model_validate(row)

    def prune_finished_tasks(self, kb_id: str, kind: str, keep: int) -> int:
        """Delete the KB's finished (done, failed, cancelled) tasks of one document-less kind but the
        newest ``keep``: a KB refreshed after every batch would otherwise gather a row per refresh.
        Pending and running tasks are never touched. Returns how many rows went."""
        if keep < 0:
            raise MetaError(f"keep must be >= 0, not {keep}")
        finished = (m.Task.kb_id == kb_id, m.Task.kind == kind, m.Task.doc_id.is_(None),
                    m.Task.status.in_(("done", "failed", "cancelled")))
        with self._write() as s:
            kept = select(m.Task.id).where(*finished).order_by(m.Task.created.desc(), m.Task.id.desc()).limit(keep)
            gone = s.execute(delete(m.Task).where(*finished, m.Task.id.not_in(kept.scalar_subquery())))
            return gone.rowcount or 0

    def get_task(self, kb_id: str, task_id: str) -> Task:
        with self._read() as s:
            return Task.model_validate(task_row(s, task_id, kb_id))

    def update_task(
        self,
        task_id: str,
        *,
        status: str | None = None,
        progress: float | None = None,
        message: str | None = None,
        error: str | None = None,
        add_attempts: int = 0,
        add_llm_calls: int = 0,
        add_prompt_tokens: int = 0,
        add_completion_tokens: int = 0,
    ) -> Task:
        """Set status/progress/message/error and add to the counters (adds never lose updates).
        Status side effects are those of ``set_document_status``."""
        if status is not None:
            check_status(status)
        check_progress(progress)
        for key, value in (
            ("add_attempts", add_attempts),
            ("add_llm_calls", add_llm_calls),
            ("add_prompt_tokens", add_prompt_tokens),
            ("add_completion_tokens", add_completion_tokens),
        ):
            check_count(key, value)
        with self._write() as s:
            row = task_row(s, task_id, lock=True)
            now = now_ms()
            if status is not None:
                apply_status(row, status, progress, now)
            elif progress is not None:
                row.progress = progress
            if message is not None:
                row.message = message
            if error is not None:
                row.error = error
            row.attempts += add_attempts
            row.llm_calls += add_llm_calls
            row.prompt_tokens += add_prompt_tokens
            row.completion_tokens += add_completion_tokens
            row.updated = now
        return Task.model_validate(row)

    def request_cancel(self, task_id: str) -> Task:
        """Ask a task to stop. A pending task is cancelled at once; a running one sees the flag at
        its next ``is_cancel_requested`` check; a finished one is left as it is."""
        with self._write() as s:
            row = task_row(s, task_id, lock=True)
            if row.status not in FINISHED:
                now = now_ms()
                row.cancel_requested, row.updated = True, now
                if row.status == "pending":
                    apply_status(row, "cancelled", None, now)
        return Task.model_validate(row)

    def request_cancel_document(self, kb_id: str, doc_id: str) -> int:
        """Request cancellation of every unfinished task of a document; returns how many."""
        with self._read() as s:
            ids = s.scalars(
                select(m.Task.id).where(
                    m.Task.kb_id == kb_id, m.Task.doc_id == doc_id, m.Task.status.not_in(FINISHED)
                )
            ).all()
        for task_id in ids:
            try:
                self.request_cancel(task_id)
            except NotFound:  # deleted meanwhile: nothing left to cancel
                pass
        return len(ids)

    def is_cancel_requested(self, task_id: str) -> bool:
        """True when the task was asked to stop, or no longer exists (its KB or document was
        deleted under it, so its work is unwanted)."""
        with self._read() as s:
            flag = s.scalar(select(m.Task.cancel_requested).where(m.Task.id == task_id))
            return True if flag is None else bool(flag)

    def list_tasks(
        self,
        kb_id: str,
        *,
        doc_id: str | None = None,
        kind: str | None = None,
        status: str | None = None,
        offset: int = 0,
        limit: int | None = 100,
        newest_first: bool = False,
    ) -> list[Task]:
        query = select(m.Task).where(m.Task.kb_id == kb_id)
        if doc_id is not None:
            query = query.where(m.Task.doc_id == doc_id)
        if kind is not None:
            query = query.where(m.Task.kind == kind)
        if status is not None:
            check_status(status)
            query = query.where(m.Task.status == status)
        order = (m.Task.created.desc(), m.Task.id.desc()) if newest_first else (m.Task.created, m.Task.id)
        with self._read() as s:
            return [Task.model_validate(r) for r in s.scalars(query.order_by(*order).offset(offset).limit(limit))]

    def count_tasks_by_status(self) -> dict[tuple[str, str], int]:
        """(kind, status) -> how many task rows, over every knowledge base (what /metrics reports)."""
        query = select(m.Task.kind, m.Task.status, func.count(m.Task.id)).group_by(m.Task.kind, m.Task.status)
        with self._read() as s:
            return {(kind, status): int(n) for kind, status, n in s.execute(query).all()}

    def running_tasks(self) -> list[tuple[str, Task]]:
        """(tenant id, task) of every task marked running, in any knowledge base: what a sweep for
        tasks whose worker died looks at."""
        query = (select(m.KnowledgeBase.tenant_id, m.Task).join(m.KnowledgeBase, m.KnowledgeBase.id == m.Task.kb_id)
                 .where(m.Task.status == "running").order_by(m.Task.created, m.Task.id))
        with self._read() as s:
            return [(tenant, Task.model_validate(row)) for tenant, row in s.execute(query).all()]
