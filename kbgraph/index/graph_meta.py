"""The knowledge base's ``graph_meta`` row: the graph version (moved by every change of the graph's
rows, so that caches keyed by it never serve an older graph), the rows' counts, each phase's status
and the version it last saw, and the format of the stored mentions.
"""

from __future__ import annotations

from kbgraph.graph.derive.mentions import MENTION_FORMAT, upgrade_mentions
from kbgraph.graph.derive.recompute import DeriveResult
from kbgraph.index.context import KBContext
from kbgraph.store.base import eq
from kbgraph.store.records import GraphMeta, graph_meta_id


def load_graph_meta(ctx: KBContext) -> GraphMeta:
    found = ctx.store.get(ctx.tenant, [ctx.kb_id], [graph_meta_id(ctx.kb_id)])
    return GraphMeta.from_doc(found[0]) if found else GraphMeta(kb_id=ctx.kb_id)


def save_graph_meta(ctx: KBContext, meta: GraphMeta) -> None:
    """The row written after the rows it describes are visible to every reader: caches keyed by
    the version (kbgraph/search/graph_cache.py) read it with a realtime get, and a reader seeing the
    new version before the rows would cache the old graph under it."""
    ctx.store.refresh(ctx.tenant)
    ctx.store.upsert(ctx.tenant, ctx.kb_id, [meta.to_doc()], refresh=False)


def count_kind(ctx: KBContext, kind: str) -> int:
    return ctx.store.count(ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", kind)])


def bump_version(ctx: KBContext, change: DeriveResult, meta: GraphMeta | None = None) -> GraphMeta:
    """A new graph version when rows changed; counts kept by difference (a recount of every row
    per merge would grow with the knowledge base; refresh_kb recounts exactly). ``meta``: the row
    as this write transaction already read it."""
    meta = meta or load_graph_meta(ctx)
    if not change.changed:
        return meta
    meta.version += 1
    meta.entity_count += change.entities_created - change.entities_removed
    meta.relation_count += change.relations_created - change.relations_removed
    save_graph_meta(ctx, meta)
    return meta


def ensure_mention_format(ctx: KBContext) -> GraphMeta:
    """Upgrade mentions an earlier kbgraph stored, once per KB, before anything derives from them;
    returns the KB's graph_meta row."""
    meta = load_graph_meta(ctx)
    if meta.mention_format < MENTION_FORMAT:
        upgrade_mentions(ctx.store, ctx.tenant, ctx.kb_id)
        meta.mention_format = MENTION_FORMAT
        save_graph_meta(ctx, meta)
    return meta
