"""A document, or the knowledge base's whole graph, removed from the store.

Deleting a document removes its chunks and mentions and re-derives exactly the rows they touched;
dropping the graph removes every graph row (its chunks stay) and moves the graph version on, so that
no cache keyed by the version (kbgraph/search/graph_cache.py) serves the old graph.
"""

from __future__ import annotations

from kbgraph.graph.derive.aliases import load_aliases
from kbgraph.graph.derive.corrections import CORRECTION_KIND, curated_doc_id
from kbgraph.graph.derive.mentions import MENTION_FORMAT, touched_keys
from kbgraph.graph.derive.recompute import DeriveResult, recompute
from kbgraph.index.context import KBContext
from kbgraph.index.graph_meta import bump_version, ensure_mention_format, load_graph_meta, save_graph_meta
from kbgraph.index.curated import live_sources
from kbgraph.index.merge import rows_citing
from kbgraph.store.base import eq, exists, none_of
from kbgraph.store.records import GraphMeta
from kbgraph.utils.gc_scope import bulk_gc


@bulk_gc()
def delete_document(ctx: KBContext, doc_id: str) -> DeriveResult:
    """Remove a document's chunks and mentions and re-derive exactly the rows it touched."""
    with ctx.store.batch():  # all of it or nothing
        ensure_mention_format(ctx)
        keys, pairs = touched_keys(ctx.store, ctx.tenant, ctx.kb_id, [eq("doc_id", doc_id)])
        cited_keys, cited_pairs = rows_citing(ctx, [doc_id])
        ctx.store.delete(ctx.tenant, [ctx.kb_id], [eq("doc_id", doc_id)])
        change = DeriveResult()
        if keys or pairs or cited_keys or cited_pairs:
            change = recompute(ctx.store, ctx.tenant, ctx.kb_id, keys | cited_keys, pairs | cited_pairs,
                               ctx.merge_describer(), None, load_aliases(ctx.store, ctx.tenant, ctx.kb_id),
                               ctx.vector_name)
            bump_version(ctx, change)
        return change


def drop_graph(ctx: KBContext) -> None:
    """Remove the knowledge base's whole graph (mentions, entities, relations, communities, reports,
    resolution decisions); its chunks stay, and so do its users' corrections and curated mentions
    (kbgraph.index.curated.rederive_curated derives their rows again). The version moves on, so no
    cache serves the old graph."""
    kept = [curated_doc_id(ctx.kb_id, s) for s in live_sources(ctx)]
    with ctx.store.batch():
        version = load_graph_meta(ctx).version
        ctx.store.delete(ctx.tenant, [ctx.kb_id], [exists("knowledge_graph_kwd"), none_of("knowledge_graph_kwd", [
            CORRECTION_KIND])] + ([none_of("doc_id", kept)] if kept else []))
        save_graph_meta(ctx, GraphMeta(kb_id=ctx.kb_id, version=version + 1, mention_format=MENTION_FORMAT))
    ctx.store.refresh(ctx.tenant)
