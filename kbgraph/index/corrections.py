"""Corrections of a knowledge base's graph stored and undone, and exactly the rows they change
re-derived (kbgraph.graph.derive.corrections says what a correction is). The caller holds the
knowledge base's lock and refreshes the graph's phases afterwards (PageRank, communities, reports,
vectors follow the bumped graph version).

A correction that adds mentions (an entity or relation by hand, a curated import) records them here
and writes them through kbgraph.index.curated; undoing it removes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from kbgraph.graph.derive.aliases import load_aliases
from kbgraph.graph.derive.corrections import CORRECTION_KIND, KEY_OPS, OPS, Correction
from kbgraph.graph.derive.recompute import DeriveResult
from kbgraph.index.context import KBContext
from kbgraph.index.resolution import regroup
from kbgraph.store.base import eq


class CorrectionError(ValueError):
    """A correction that cannot be made as asked; the message says why."""


def list_corrections(ctx: KBContext, *, include_undone: bool = True) -> list[Correction]:
    """The knowledge base's corrections, oldest first."""
    found = [Correction.from_doc(d) for d in ctx.store.scan(ctx.tenant, [ctx.kb_id],
                                                            [eq("knowledge_graph_kwd", CORRECTION_KIND)])]
    return sorted((c for c in found if include_undone or not c.undone), key=lambda c: c.seq)


def next_seq(ctx: KBContext) -> int:
    return max((c.seq for c in list_corrections(ctx)), default=0) + 1


def _store(ctx: KBContext, correction: Correction) -> None:
    ctx.store.upsert(ctx.tenant, ctx.kb_id, [correction.to_doc()])
    ctx.store.refresh(ctx.tenant)


def record_key_correction(ctx: KBContext, op: str, params: Mapping[str, Any],
                          who: str) -> tuple[Correction, DeriveResult]:
    """Store a correction that changes how rows derive (rename, set, merge, split, delete) and
    re-derive the rows it changes."""
    if op not in KEY_OPS:
        raise CorrectionError(f"unknown correction {op!r} (one of {', '.join(OPS)})")
    before = load_aliases(ctx.store, ctx.tenant, ctx.kb_id)
    correction = Correction(ctx.kb_id, next_seq(ctx), op, dict(params), who, time.time())
    _store(ctx, correction)
    return correction, regroup(ctx, before, load_aliases(ctx.store, ctx.tenant, ctx.kb_id))


def record_curated_correction(ctx: KBContext, op: str, params: Mapping[str, Any], who: str,
                              write: Callable[[int], DeriveResult]) -> tuple[Correction, DeriveResult]:
    """Store a correction that adds curated mentions; ``write(seq)`` writes them and re-derives."""
    seq = next_seq(ctx)
    correction = Correction(ctx.kb_id, seq, op, dict(params), who, time.time())
    change = write(seq)
    _store(ctx, correction)
    return correction, change


def find_correction(ctx: KBContext, seq: int | None) -> Correction:
    """The correction numbered ``seq``, or the last one not undone when None."""
    corrections = list_corrections(ctx)
    if seq is None:
        live = [c for c in corrections if not c.undone]
        if not live:
            raise CorrectionError("there is no correction to undo")
        return live[-1]
    found = next((c for c in corrections if c.seq == seq), None)
    if found is None:
        raise CorrectionError(f"no correction number {seq} (there are {len(corrections)})")
    if found.undone:
        raise CorrectionError(f"correction {seq} ({found.summary()}) was already undone")
    return found


def undo_correction(ctx: KBContext, correction: Correction, who: str,
                    remove: Callable[[Correction], DeriveResult]) -> tuple[Correction, DeriveResult]:
    """Mark a correction undone and re-derive what it changed; ``remove`` takes away the mentions a
    curated correction added."""
    before = load_aliases(ctx.store, ctx.tenant, ctx.kb_id)
    undone = mark_undone(ctx, correction, who)
    if correction.op in KEY_OPS:
        return undone, regroup(ctx, before, load_aliases(ctx.store, ctx.tenant, ctx.kb_id))
    return undone, remove(correction)


def mark_undone(ctx: KBContext, correction: Correction, who: str) -> Correction:
    """Store the correction as undone (it stays listed: who undid it, and when)."""
    undone = Correction(correction.kb_id, correction.seq, correction.op, correction.params, correction.who,
                        correction.at, True, who, time.time())
    _store(ctx, undone)
    return undone
