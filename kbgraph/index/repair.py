"""Graph phases a failure left unfinished, remembered where a store outage cannot erase the fact,
and finished by whatever runs next (``refresh_recorded``).

A knowledge base's PageRank, communities and reports follow its entity and relation rows through
the graph version kept in the store (``graph_meta``: each phase stamped with the version it saw).
That alone misses two failures: a merge whose rows reached the store but whose version bump did not
(the rows changed, nothing says so; the document's rerun then finds its rows written and moves
nothing), and a process that cannot read the store to find out (a service starting while the store
is down must still know which knowledge bases to repair). So the metadata database keeps a mark on
the knowledge base (``KnowledgeBase.extra[REPAIR_MARK]``), always under its lock:

- ``rows``: set before anything rewrites graph rows; stays if that fails. The repair moves the
  graph version on before it refreshes, so every phase is recomputed from the rows as they are.
- ``phases``: the rows and their version are written; the phases are owed a refresh (graph_meta
  says which). Set after a merge that followed no failure, and when a refresh starts.

A refresh that finishes clears the mark. The next ``kbgraph index`` (even when every file is
unchanged), the next worker task of the knowledge base and the next start of the service look for
the mark, and also for phases graph_meta calls stale, and refresh.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kbgraph.index.context import KBContext
from kbgraph.index.graph_meta import load_graph_meta, save_graph_meta
from kbgraph.index.refresh import refresh_kb
from kbgraph.index.refresh_state import RefreshResult
from kbgraph.llm.base import CancelCheck
from kbgraph.meta import MetaDB
from kbgraph.meta.schemas import KnowledgeBase
from kbgraph.store.base import StoreError
from kbgraph.utils.progress import ProgressFn, never, no_progress

REPAIR_MARK = "graph_repair"
ROWS_CHANGING = "rows"
PHASES_OWED = "phases"


def _mark(state: str, reason: str) -> dict[str, Any]:
    return {"state": state, "since": time.time_ns() // 1_000_000, "reason": reason}


def repair_mark(kb: KnowledgeBase) -> dict[str, Any] | None:
    """The knowledge base's mark as its row was read (None: nothing owed that the store cannot show)."""
    found = kb.extra.get(REPAIR_MARK)
    return found if isinstance(found, dict) else None


def rows_changing(meta: MetaDB, kb_id: str, what: str) -> Any:
    """Before a rewrite of the knowledge base's graph rows (``what``: a merge, a deletion), under its
    lock: the mark says ``rows`` while it runs. Returns the mark it replaced, for ``rows_written``."""
    return meta.set_kb_mark(kb_id, REPAIR_MARK, _mark(ROWS_CHANGING, f"{what} under way"))


def rows_written(meta: MetaDB, kb_id: str, previous: Any, what: str) -> None:
    """After the rewrite: the phases are owed, unless an earlier failure's ``rows`` mark still waits
    for its repair (it stays)."""
    if not isinstance(previous, dict) or previous.get("state") != ROWS_CHANGING:
        meta.set_kb_mark(kb_id, REPAIR_MARK, _mark(PHASES_OWED, f"{what} done; the graph refresh follows"))


@contextmanager
def changing_rows(meta: MetaDB, kb: KnowledgeBase, what: str) -> Iterator[None]:
    """``rows_changing`` and, if the body finishes, ``rows_written`` (a knowledge base without a
    graph has no graph rows to change: no mark)."""
    if not kb.graph.enabled:
        yield
        return
    previous = rows_changing(meta, kb.id, what)
    yield
    rows_written(meta, kb.id, previous, what)


def _phases(ctx: KBContext) -> list[str]:
    phases = ["pagerank"]
    if ctx.graph.community:
        phases.append("communities")
    if ctx.graph.resolution and ctx.chat is not None:  # without a model the phase is skipped for good
        phases.append("resolution")
    return phases


def phases_stale(ctx: KBContext) -> bool:
    """Whether graph_meta says a phase saw an older graph than the stored one (reads the store)."""
    meta = load_graph_meta(ctx)
    return meta.version > 0 and any(meta.is_stale(p) for p in _phases(ctx))


def repair_owed(ctx: KBContext, kb: KnowledgeBase) -> bool:
    """Whether the knowledge base's graph phases were left unfinished (its mark, or graph_meta)."""
    return kb.graph.enabled and (repair_mark(kb) is not None or phases_stale(ctx))


def unfinished_message(kb_name: str, error: BaseException) -> str:
    """What a failed refresh left, and what finishes it."""
    return (f"the graph refresh of knowledge base {kb_name!r} stopped: {error}. Its graph rows are stored, but "
            f"PageRank, communities and reports are unfinished; the next `kbgraph index` into it (even of "
            f"unchanged files), the next worker task of it or the next start of the service finishes them "
            f"(or run `kbgraph graph refresh --kb {kb_name}` once the store answers)")


def refresh_recorded(ctx: KBContext, meta: MetaDB, kb: KnowledgeBase, *, force: bool = False,
                     progress: ProgressFn = no_progress, cancel: CancelCheck = never) -> RefreshResult:
    """``refresh_kb`` under the knowledge base's mark (the caller holds its lock): a ``rows`` mark
    moves the graph version on first, so every phase is recomputed; a refresh that finishes clears
    the mark, one that fails keeps it, and a store failure says what will finish the work."""
    state = ROWS_CHANGING if ctx.graph.resolution else PHASES_OWED  # resolution merges rows itself
    previous = meta.set_kb_mark(ctx.kb_id, REPAIR_MARK, _mark(state, "graph refresh under way"))
    try:
        if isinstance(previous, dict) and previous.get("state") == ROWS_CHANGING:
            meta.set_kb_mark(ctx.kb_id, REPAIR_MARK, _mark(ROWS_CHANGING, "graph refresh under way after a failure"))
            _move_version_on(ctx)
        result = refresh_kb(ctx, force=force, progress=progress, cancel=cancel)
    except StoreError as exc:
        raise type(exc)(unfinished_message(kb.name, exc)) from exc
    meta.set_kb_mark(ctx.kb_id, REPAIR_MARK, None)
    return result


def _move_version_on(ctx: KBContext) -> None:
    """Rows may have changed without the version moving: no phase may count as current."""
    graph = load_graph_meta(ctx)
    if graph.version > 0 or graph.phase_versions:
        graph.version += 1
        save_graph_meta(ctx, graph)
