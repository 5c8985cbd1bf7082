"""The refresh of a knowledge base's graph after a batch of changes (``refresh_kb``): the stale
phases, each stamped with the graph version it saw, in order: the name links (a first name that
only one full name of the knowledge base can stand for), summaries and vectors of the rows merges
left without them, resolution (if on), PageRank, then communities and their reports (if on).

With a remote model and no resolution, the summaries and vectors are fetched while the reports are
written (``_refresh_overlapped``): all of them wait on the network.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from kbgraph.index.context import KBContext, report_progress
from kbgraph.index.embed_rows import embed_pending
from kbgraph.index.graph_meta import count_kind, load_graph_meta, save_graph_meta
from kbgraph.index.pagerank import refresh_pagerank
from kbgraph.index.refresh_state import GraphRows, RefreshResult, RowChanges, _graph_rows
from kbgraph.index.resolution import refresh_name_links, refresh_resolution
from kbgraph.index.schedule import _SummaryWatch
from kbgraph.index.summaries import summarize_pending
from kbgraph.llm.base import CancelCheck
from kbgraph.search.prepare import prepare_search
from kbgraph.store.records import Entity, GraphMeta, Relation
from kbgraph.utils.gc_scope import bulk_gc
from kbgraph.utils.progress import ProgressFn, never, no_progress


def _refresh_phases(ctx: KBContext, result: RefreshResult, changes: RowChanges, force: bool,
                    progress: ProgressFn, cancel: CancelCheck) -> GraphMeta:
    if force or load_graph_meta(ctx).is_stale("pagerank"):  # the graph changed since the last refresh
        refresh_name_links(ctx)  # re-derives rows: before the rows are read for the other phases
    rows = _graph_rows(ctx)
    changes.track(rows)
    # with a remote model the summaries and then the vectors are fetched while the reports are
    # written (all wait on the network): the reports of communities with a member waiting for its
    # summary are written once it has it, the others at once. Resolution re-derives rows, so with
    # it on the summaries and the vectors come first
    if ctx.chat is not None and not ctx.graph.resolution:
        return _refresh_overlapped(ctx, rows, result, changes, force, progress, cancel)
    result.summarized = summarize_pending(ctx, rows, progress=progress, cancel=cancel,
                                          failures=result.summary_failures)
    result.embedded = embed_pending(ctx, rows, progress=progress, cancel=cancel, into=changes)
    meta = load_graph_meta(ctx)
    if ctx.graph.resolution and (force or meta.is_stale("resolution")):
        if ctx.chat is None:
            meta.phase_status["resolution"] = "skipped: needs an LLM"
        else:
            report_progress(ctx, progress, "resolution", 0, 1)
            changes.write()  # merges re-derive rows: a vector waiting here could be stale after them
            refresh_resolution(ctx, rows.entities, result, cancel)
            rows = _graph_rows(ctx)
            changes.track(rows)
            result.summarized += summarize_pending(ctx, rows, progress=progress, cancel=cancel,
                                                   failures=result.summary_failures)
            result.embedded += embed_pending(ctx, rows, progress=progress, cancel=cancel,
                                             into=changes)  # merged rows
            meta = load_graph_meta(ctx)  # merges bump the graph version
            meta.phase_versions["resolution"], meta.phase_status["resolution"] = meta.version, "done"
            report_progress(ctx, progress, "resolution", 1, 1)
    return _ranked_and_reported(ctx, meta, rows, result, changes, force, progress, cancel)


def _refresh_overlapped(ctx: KBContext, rows: GraphRows, result: RefreshResult, changes: RowChanges, force: bool,
                        progress: ProgressFn, cancel: CancelCheck) -> GraphMeta:
    watch = _SummaryWatch(frozenset(rows.pending))  # summarize_pending empties rows.pending
    started: list[Future] = []
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="kbgraph-summaries") as pool:

        def start_summaries() -> _SummaryWatch:
            # rows no summary rewrites are embedded at once, beside the summaries and reports
            ready = set(rows.unembedded) - watch.pending
            summaries = pool.submit(summarize_pending, ctx, rows, progress=progress, cancel=cancel,
                                    failures=result.summary_failures, on_row=watch.row_done)
            watch.future = summaries
            summaries.add_done_callback(watch.close)
            started.extend([summaries, pool.submit(_embed_after, summaries, ready, ctx, rows, progress, cancel,
                                                   changes)])
            return watch

        try:
            meta = _ranked_and_reported(ctx, load_graph_meta(ctx), rows, result, changes, force, progress, cancel,
                                        start_summaries=start_summaries)
        finally:
            if started:
                result.summarized, result.embedded = started[0].result(), started[1].result()
    return meta


def _embed_after(summaries: Future, ready: set[str], ctx: KBContext, rows: GraphRows, progress: ProgressFn,
                 cancel: CancelCheck, changes: RowChanges) -> int:
    """The vectors of ``ready`` (rows no summary rewrites) now, and beside them, once the summaries
    are in, those of the summarized rows (behind the others, they had waited for every one of them)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbgraph-vectors") as pool:
        first = pool.submit(embed_pending, ctx, GraphRows(rows.entities, rows.relations, unembedded=set(ready)),
                            progress=progress, cancel=cancel, into=changes)
        summaries.result()  # a summarized row needs its new vector
        rest = GraphRows(rows.entities, rows.relations, unembedded=set(rows.unembedded) - ready)
        done = embed_pending(ctx, rest, progress=progress, cancel=cancel, into=changes)
        done += first.result()
    rows.unembedded.clear()
    return done


def _ranked_and_reported(ctx: KBContext, meta: GraphMeta, rows: GraphRows, result: RefreshResult,
                         changes: RowChanges, force: bool, progress: ProgressFn, cancel: CancelCheck, *,
                         start_summaries: Callable[[], _SummaryWatch] | None = None) -> GraphMeta:
    """PageRank, then communities and reports; ``start_summaries`` (summaries running beside the
    reports) is called after PageRank, whose values the rows they rewrite then carry."""
    entities, relations = rows.entities, rows.relations
    if force or meta.is_stale("pagerank"):
        report_progress(ctx, progress, "pagerank", 0, 1)
        result.pagerank_updated = refresh_pagerank(ctx, entities, relations)
        meta.phase_versions["pagerank"], meta.phase_status["pagerank"] = meta.version, "done"
        report_progress(ctx, progress, "pagerank", 1, 1)
    else:
        result.skipped.append("pagerank")
    summaries = start_summaries() if start_summaries is not None else None
    if ctx.graph.community and (force or meta.is_stale("communities")):
        # imported here: community detection's library is loaded by a refresh that needs it only
        from kbgraph.index.communities import refresh_communities

        meta.phase_status["communities"] = "running"
        refresh_communities(ctx, meta, entities, relations, result, changes, progress, cancel, summaries=summaries)
        meta.phase_versions["communities"], meta.phase_status["communities"] = meta.version, "done"
    elif ctx.graph.community:
        result.skipped.append("communities")
    return meta


@bulk_gc()
def refresh_kb(ctx: KBContext, *, force: bool = False, progress: ProgressFn = no_progress,
               cancel: CancelCheck = never) -> RefreshResult:
    """Recompute the stale KB phases: PageRank, then communities and their reports (if enabled).

    Each phase is stamped with the graph version it saw; a phase that is current is skipped
    unless ``force``. Reports whose community membership did not change are kept as they are.
    """
    result = RefreshResult(version=0)
    changes = RowChanges(ctx)
    try:
        meta = _refresh_phases(ctx, result, changes, force, progress, cancel)
    except BaseException:
        # what the finished phases computed (vectors, PageRank) stays valid: keep it, visible at once
        # (a store that refreshes on its own schedule, Elasticsearch, would show it only later)
        with contextlib.suppress(Exception):
            changes.write()
            ctx.store.refresh(ctx.tenant)
        raise
    changes.write()
    meta.entity_count = count_kind(ctx, Entity.KIND)
    meta.relation_count = count_kind(ctx, Relation.KIND)
    save_graph_meta(ctx, meta)  # after a refresh: every row written here is visible with it
    result.version = meta.version
    prepare_search(ctx.store, ctx.tenant, [ctx.kb_id])
    return result

