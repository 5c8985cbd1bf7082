"""The communities phase of the refresh: communities detected (hierarchical Leiden per connected
component), the reports whose inputs changed written again (by the model, several at a time, or put
together from their rows), embedded and stored as they come, reports of communities that are gone
dropped, and every entity labelled with its communities.

With the summary pass running beside it (kbgraph/index/schedule.py), a community with a member or
relation being summarized is reported once those rows are summarized, the others at once.
"""

from __future__ import annotations

import functools
import queue
from concurrent.futures import Executor, Future, ThreadPoolExecutor

from kbgraph.graph.communities import Community, detect_communities
from kbgraph.index.context import WRITE_ROWS, KBContext, report_progress
from kbgraph.index.refresh_state import RefreshResult, RowChanges
from kbgraph.index.reports import CommunityReports, write_report
from kbgraph.index.schedule import _SummariesFirst, _SummaryWatch
from kbgraph.llm.base import CancelCheck
from kbgraph.store.base import Condition, eq
from kbgraph.store.records import CommunityReport, Entity, GraphMeta, Relation
from kbgraph.utils.progress import ProgressFn


def refresh_communities(ctx: KBContext, meta: GraphMeta, entities: list[Entity], relations: list[Relation],
                        result: RefreshResult, changes: RowChanges, progress: ProgressFn, cancel: CancelCheck, *,
                        summaries: _SummaryWatch | None = None) -> None:
    """Detect communities and write the reports whose inputs changed. ``summaries``: the summary
    pass running meanwhile; a community with a member (or relation) it is summarizing is reported
    once those rows are summarized, from their new descriptions, the others at once."""
    report_progress(ctx, progress, "communities", 0, 1)
    communities = detect_communities([e.key for e in entities], [(r.src_key, r.tgt_key, r.weight) for r in relations],
                                     max_cluster_size=ctx.settings.max_cluster_size)
    report_progress(ctx, progress, "communities", 1, 1, f"{len(communities)} communities")
    result.communities = len(communities)
    _label_entities(entities, communities)
    if summaries is None:
        # the entities' last change of the refresh: their score rows go to the store while the
        # reports are written (a summary pass running beside would rewrite some rows after)
        changes.write_behind()
    reports = CommunityReports(ctx, communities, entities, relations)
    _write_reports(reports, meta.version, result, progress, cancel, summaries)
    result.reports_reused = len(reports.wanted) - len(reports.todo)
    result.reports_generated = len(reports.todo)
    for rid in reports.todo:
        ctx.ledger.count(f"report: {reports.authors[rid]}")
    result.reports_removed = _drop_stale_reports(reports)
    meta.report_count = len(reports.wanted)


def _write_reports(reports: CommunityReports, version: int, result: RefreshResult, progress: ProgressFn,
                   cancel: CancelCheck, summaries: _SummaryWatch | None) -> None:
    """Write the reports to be written again, each once its rows are summarized, and store them all."""
    ctx = reports.ctx
    # the model's reports go out first: the put-together ones cost no call and fill the wait
    by_model_first = sorted(reports.wanted, key=lambda rid: (not reports.by_model(rid), rid))
    waits = {rid: reports.waits(rid, summaries) for rid in by_model_first}
    workers = max(1, ctx.settings.llm_concurrency) if ctx.chat is not None else 1
    # twice the calls allowed in flight: a thread writing a prompt or reading an answer would
    # otherwise hold a model slot idle
    threads = 2 * workers if ctx.chat is not None else 1
    gate = _SummariesFirst(workers, threads, summaries)
    write = functools.partial(write_report, reports, gate=gate, version=version, result=result, cancel=cancel)
    total = len(reports.wanted)
    report_progress(ctx, progress, "reports", 0, total)
    # the put-together reports on a thread of their own: hundreds of them queued in the model's
    # pool held the model's reports that waited for a summary behind them
    with ThreadPoolExecutor(max_workers=threads) as pool, ThreadPoolExecutor(max_workers=1) as rows_pool, \
            ThreadPoolExecutor(max_workers=max(1, ctx.settings.embedding_concurrency),
                               thread_name_prefix="kbgraph-report-vectors") as vector_pool:
        for rid in by_model_first:
            start = functools.partial(reports.start, rid, write, (pool, rows_pool), summaries)
            if summaries is not None and waits[rid]:
                summaries.when_done(waits[rid], start)
            else:
                start()
        _store_as_written(ctx, reports.events, total, vector_pool, progress)


def _store_as_written(ctx: KBContext, events: queue.SimpleQueue, total: int, vector_pool: Executor,
                      progress: ProgressFn) -> None:
    """Embed and store the ``total`` reports the report threads hand back through ``events``."""
    batch: list[CommunityReport] = []
    waiting: list[dict] = []
    # the reports' vectors are fetched beside the reports still being written, several batches at once
    embedding: list[tuple[list[CommunityReport], Future]] = []
    # as they are written, not in their order: a batch of vectors goes out once 64 are in (the
    # order held the put-together reports behind the slowest LLM one, and with them their vectors)
    for done in range(1, total + 1):
        event = events.get()
        if isinstance(event, BaseException):
            raise event
        last = done == total
        if event is not None:
            batch.append(event.result())
        if batch and (len(batch) >= 64 or last):
            embedding.append((batch, vector_pool.submit(ctx.embed, [f"{r.title}\n{r.summary}" for r in batch])))
            batch = []
        while embedding and (embedding[0][1].done() or last):
            embedded, vectors = embedding.pop(0)
            for r, v in zip(embedded, vectors.result()):
                r.vector = v
            waiting += [r.to_doc() for r in embedded]
        if len(waiting) >= WRITE_ROWS or (waiting and last):
            ctx.store.upsert(ctx.tenant, ctx.kb_id, waiting, refresh=False)
            waiting = []
        report_progress(ctx, progress, "reports", done, total)


def _drop_stale_reports(reports: CommunityReports) -> int:
    """Delete the stored reports of communities that are gone; returns how many."""
    ctx = reports.ctx
    stale = sorted(reports.existing.keys() - reports.wanted.keys())
    if stale:
        # visible to other readers with the refresh's last write (refresh_kb)
        ctx.store.delete(ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", CommunityReport.KIND),
                                                   Condition("id", "in", stale)], refresh=False)
    return len(stale)


def _label_entities(entities: list[Entity], communities: list[Community]) -> None:
    """Each entity's community labels (stored in its score row by the refresh's writes)."""
    labels: dict[str, set[str]] = {e.key: set() for e in entities}
    for community in communities:
        for key in community.member_keys:
            labels.setdefault(key, set()).add(community.label)
    for e in entities:
        e.community_ids = sorted(labels.get(e.key, ()))
