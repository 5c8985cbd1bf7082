"""Mentions into the knowledge base's entity and relation rows: a merge re-derives exactly the
rows the documents' (or edited chunks') mentions name, plus those of rows still citing them.

The graph is a function of its mentions, so merging documents together equals merging them one by
one, and equals a rebuild from the mentions (kbgraph/graph/invariants.py checks it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kbgraph.graph.derive.aliases import load_aliases
from kbgraph.graph.derive.mentions import touched_keys, touched_pairs
from kbgraph.graph.derive.recompute import MENTION_BUDGET, DeriveResult, recompute
from kbgraph.index.context import WRITE_ROWS, KBContext
from kbgraph.index.graph_meta import bump_version, ensure_mention_format
from kbgraph.store.base import any_of, eq
from kbgraph.store.records import Entity, EntityMention, Relation, RelationMention
from kbgraph.utils.gc_scope import bulk_gc


def rows_citing(ctx: KBContext, doc_ids: Sequence[str]) -> tuple[set[str], set[tuple[str, str]]]:
    """Keys of derived rows that cite the documents (they may come from mentions since replaced)."""
    keys: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    for start in range(0, len(doc_ids), 500):
        cites = any_of("doc_ids_kwd", list(doc_ids[start:start + 500]))
        keys |= {d["entity_key_kwd"] for d in ctx.store.scan(
            ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", Entity.KIND), cites], fields=["entity_key_kwd"])}
        pairs |= {(d["src_key_kwd"], d["tgt_key_kwd"]) for d in ctx.store.scan(
            ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", Relation.KIND), cites],
            fields=["src_key_kwd", "tgt_key_kwd"])}
    return keys, pairs


@bulk_gc()
def merge_document(ctx: KBContext, doc_id: str) -> DeriveResult:
    """Bring the KB's entity and relation rows up to date with one document's mentions.

    Touches only the keys the document's mentions name, plus the keys of rows that still cite
    the document (an earlier extraction of it may have named keys the new one does not).
    """
    return merge_documents(ctx, [doc_id])


@bulk_gc()
def merge_documents(ctx: KBContext, doc_ids: Sequence[str], mentions: Sequence[dict] = (), *,
                    progress: Callable[[int, int], None] | None = None) -> DeriveResult:
    """``merge_document`` for several documents at once, in one transaction: a row touched by many
    of them is derived (and written) once. The graph is a function of the mentions, so this equals
    merging them one by one. ``mentions``: rows of these documents to store first, replacing the
    ones they had (in the same transaction: mentions and the rows derived from them agree).
    ``progress(done, total)``: entity and relation rows derived so far."""
    with ctx.store.batch():
        if mentions:
            replace_mentions(ctx, doc_ids, mentions)
        return _merge(ctx, list(doc_ids), progress)


def replace_mentions(ctx: KBContext, doc_ids: Sequence[str], mentions: Sequence[dict]) -> None:
    for start in range(0, len(doc_ids), 500):
        ids = list(doc_ids[start:start + 500])
        ctx.store.delete(ctx.tenant, [ctx.kb_id], [any_of("doc_id", ids),
                                                   any_of("knowledge_graph_kwd", [EntityMention.KIND,
                                                                                  RelationMention.KIND])],
                         refresh=False)
    for start in range(0, len(mentions), WRITE_ROWS):
        ctx.store.upsert(ctx.tenant, ctx.kb_id, list(mentions[start:start + WRITE_ROWS]), refresh=False)


# a merge whose documents hold more entity mentions than this does not keep them all to extend
# stored rows with (``recompute``'s ``added``): each row is derived from its mentions instead, a
# batch of rows at a time, so a 50 MB file's merge holds a batch's mentions, not the file's
_ADDED_MENTIONS = 50_000


def _merge(ctx: KBContext, doc_ids: list[str], progress: Callable[[int, int], None] | None = None) -> DeriveResult:
    meta = ensure_mention_format(ctx)
    added: dict[str, list[EntityMention]] | None = {}
    keys: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    for start in range(0, len(doc_ids), 500):
        ids = doc_ids[start:start + 500]
        where = [eq("knowledge_graph_kwd", EntityMention.KIND), any_of("doc_id", ids)]
        if added is not None and ctx.store.count(ctx.tenant, [ctx.kb_id], where) > _ADDED_MENTIONS:
            keys |= set(added)
            added = None
        if added is None:
            keys |= {d["entity_key_kwd"] for d in ctx.store.scan(ctx.tenant, [ctx.kb_id], where,
                                                                  fields=["entity_key_kwd"])}
        else:
            for doc in ctx.store.scan(ctx.tenant, [ctx.kb_id], where):
                mention = EntityMention.from_doc(doc)
                added.setdefault(mention.key, []).append(mention)
        pairs |= touched_pairs(ctx.store, ctx.tenant, ctx.kb_id, [any_of("doc_id", ids)])
    cited_keys, cited_pairs = rows_citing(ctx, doc_ids)
    keys |= set(added or ())
    change = recompute(ctx.store, ctx.tenant, ctx.kb_id, keys | cited_keys, pairs | cited_pairs,
                       ctx.merge_describer(), None, load_aliases(ctx.store, ctx.tenant, ctx.kb_id),
                       ctx.vector_name, added=added, progress=progress,
                       mention_budget=MENTION_BUDGET if added is None else None)
    bump_version(ctx, change, meta)  # nothing else writes the row while the merge holds the KB
    return change


@bulk_gc()
def replace_chunk_mentions(ctx: KBContext, chunk_ids: Sequence[str], mentions: Sequence[dict]) -> DeriveResult:
    """Swap the mentions of the given chunks for ``mentions`` (those of their new text; empty when the
    chunks are gone) and re-derive exactly the entity and relation rows either side names."""
    with ctx.store.batch():  # all of it or nothing
        ensure_mention_format(ctx)
        where = [any_of("chunk_id_kwd", list(chunk_ids))]
        keys, pairs = touched_keys(ctx.store, ctx.tenant, ctx.kb_id, where)
        ctx.store.delete(ctx.tenant, [ctx.kb_id], [*where, any_of("knowledge_graph_kwd", [
            EntityMention.KIND, RelationMention.KIND])], refresh=False)
        for row in mentions:
            if row["knowledge_graph_kwd"] == EntityMention.KIND:
                keys.add(row["entity_key_kwd"])
            else:
                pairs.add((row["src_key_kwd"], row["tgt_key_kwd"]))
        if mentions:
            ctx.store.upsert(ctx.tenant, ctx.kb_id, list(mentions), refresh=False)
        change = DeriveResult()
        if keys or pairs:
            change = recompute(ctx.store, ctx.tenant, ctx.kb_id, keys, pairs, ctx.describer(), None,
                               load_aliases(ctx.store, ctx.tenant, ctx.kb_id), ctx.vector_name)
            bump_version(ctx, change)
    ctx.store.refresh(ctx.tenant)
    return change
