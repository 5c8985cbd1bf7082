"""The summary pass of the refresh: every description a merge left over the budget (a stand-in,
``summary_pending_int`` 1) gets the summary of all its fragments, several model calls at a time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed

from kbgraph.graph.derive.aliases import load_aliases
from kbgraph.graph.derive.entities import entity_description_inputs
from kbgraph.graph.derive.relations import relation_description_inputs
from kbgraph.graph.describe import Describer, SummaryError
from kbgraph.index.context import WRITE_ROWS, KBContext, check_cancel, report_progress
from kbgraph.index.refresh_state import GraphRows, stored_doc
from kbgraph.llm.base import CancelCheck
from kbgraph.parse.tokenize import token_string
from kbgraph.store.records import Entity, Relation
from kbgraph.utils.progress import ProgressFn, never, no_progress


def summarize_pending(ctx: KBContext, rows: GraphRows, *, progress: ProgressFn = no_progress,
                      cancel: CancelCheck = never, failures: dict[str, str] | None = None,
                      on_row: Callable[[str], None] | None = None) -> int:
    """Give every row of ``rows`` whose description waits for a summary (merges leave summaries to
    this pass, kbgraph.graph.describe) the summary of all its fragments, several at a time; the
    rows are then due for a new vector. Returns how many rows were summarized.

    An entity touched by many documents of a batch is summarized once, from its fragments as the
    batch left them: the same description a rebuild from the mentions would ask for. A summary the
    model botched twice (describe.SummaryError) leaves its row pending; ``failures`` then gets the
    error for each document the row cites. ``on_row(row_id)``: a row's summary is in (or failed), in
    the order the answers come.
    """
    failures = failures if failures is not None else {}
    entities = [e for e in rows.entities if e.id in rows.pending]
    relations = [r for r in rows.relations if r.id in rows.pending]
    total = len(entities) + len(relations)
    if not total:
        return 0
    report_progress(ctx, progress, "summaries", 0, total)
    describer = ctx.describer()
    aliases = load_aliases(ctx.store, ctx.tenant, ctx.kb_id)
    entity_inputs = entity_description_inputs(ctx.store, ctx.tenant, ctx.kb_id, [e.key for e in entities], aliases)
    relation_inputs = relation_description_inputs(ctx.store, ctx.tenant, ctx.kb_id, relations, aliases)
    work: list[tuple[Entity | Relation, tuple[str, str, list[str]]]] = (
        [(e, entity_inputs[e.key]) for e in entities if e.key in entity_inputs]
        + [(r, relation_inputs[(r.src_key, r.tgt_key)]) for r in relations if (r.src_key, r.tgt_key) in relation_inputs])
    describe = functools.partial(_summary, describer, failures, cancel)
    waiting: list[dict] = []
    workers = max(1, min(ctx.settings.llm_concurrency, len(work))) if ctx.chat is not None else 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        answers = as_completed([pool.submit(describe, item) for item in work])
        for done, (row, description) in enumerate((answer.result() for answer in answers), start=1):
            if description is None:
                if on_row is not None:
                    on_row(row.id)
                continue
            _set_summary(row, description)
            rows.unembedded.add(row.id)
            waiting.append(stored_doc(row))
            if on_row is not None:
                on_row(row.id)
            if len(waiting) >= WRITE_ROWS:
                ctx.store.upsert(ctx.tenant, ctx.kb_id, waiting, refresh=False)
                waiting = []
            report_progress(ctx, progress, "summaries", done, total)
    if waiting:
        ctx.store.upsert(ctx.tenant, ctx.kb_id, waiting, refresh=False)
    rows.pending.clear()
    ctx.store.refresh(ctx.tenant)
    return len(work)


def _summary(describer: Describer, failures: dict[str, str], cancel: CancelCheck,
             item: tuple[Entity | Relation, tuple[str, str, list[str]]]) -> tuple[Entity | Relation, str | None]:
    """A row and the summary of its fragments, or None when the model botched it twice."""
    check_cancel(cancel)
    row, (kind, name, fragments) = item
    try:
        return row, describer.summary(kind, name, fragments)
    except SummaryError as exc:  # the row keeps its stand-in and stays pending: never garbage
        for doc_id in row.doc_ids:
            failures.setdefault(doc_id, str(exc))
        return row, None


def _set_summary(row: Entity | Relation, description: str) -> None:
    row.description, row.summary_pending, row.vector = description, False, None
    if isinstance(row, Entity):
        row.derivation = None  # the description is no longer its first fragments
        row.description_tokens = token_string(description)
    else:
        row.description_tokens = token_string(" ".join([row.src_name, row.tgt_name, description,
                                                        *row.keywords]))
