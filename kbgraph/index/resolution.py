"""Entity resolution: the model's decisions on candidate pairs of entities being one, stored, and
the entities whose alias groups they change re-derived (a merge is undone by dropping its decision).
"""

from __future__ import annotations

from collections.abc import Sequence

from kbgraph.graph.derive.aliases import AliasMap, load_aliases
from kbgraph.graph.derive.mentions import pairs_touching
from kbgraph.graph.derive.recompute import DeriveResult, recompute
from kbgraph.index.context import KBContext
from kbgraph.index.graph_meta import bump_version, ensure_mention_format
from kbgraph.index.refresh_state import RefreshResult
from kbgraph.llm.base import CancelCheck
from kbgraph.store.base import any_of, eq
from kbgraph.store.records import Entity, RelationMention, ResolutionDecision


def _regroup(ctx: KBContext, before: AliasMap, after: AliasMap) -> DeriveResult:
    """Re-derive every key whose alias group changed between two alias maps."""
    changed = {k for k in before.canonical.keys() ^ after.canonical.keys()}
    changed |= {k for k in before.canonical.keys() & after.canonical.keys() if before.canon(k) != after.canon(k)}
    keys = {k for key in changed for k in (key, before.canon(key), after.canon(key))}
    keys = {m for k in keys for m in after.members(k) | before.members(k)}
    if not keys:
        return DeriveResult()
    ensure_mention_format(ctx)
    pairs = pairs_touching(ctx.store, ctx.tenant, ctx.kb_id, keys)
    raw_pairs = {(d["src_key_kwd"], d["tgt_key_kwd"]) for d in ctx.store.scan(
        ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", RelationMention.KIND), any_of("src_key_kwd", sorted(keys))],
        fields=["src_key_kwd", "tgt_key_kwd"])}
    raw_pairs |= {(d["src_key_kwd"], d["tgt_key_kwd"]) for d in ctx.store.scan(
        ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", RelationMention.KIND), any_of("tgt_key_kwd", sorted(keys))],
        fields=["src_key_kwd", "tgt_key_kwd"])}
    change = recompute(ctx.store, ctx.tenant, ctx.kb_id, keys, pairs | raw_pairs, ctx.merge_describer(), None,
                       after, ctx.vector_name)
    bump_version(ctx, change)
    return change


def record_decisions(ctx: KBContext, decisions: Sequence[ResolutionDecision]) -> DeriveResult:
    """Store resolution decisions (new or revised) and re-derive the entities whose merges changed."""
    before = load_aliases(ctx.store, ctx.tenant, ctx.kb_id)
    if decisions:
        ctx.store.upsert(ctx.tenant, ctx.kb_id, [d.to_doc() for d in decisions])
    return _regroup(ctx, before, load_aliases(ctx.store, ctx.tenant, ctx.kb_id))


def refresh_resolution(ctx: KBContext, entities: list[Entity], result: RefreshResult,
                        cancel: CancelCheck, max_pairs: int = 2000) -> None:
    from kbgraph.graph.resolution import candidate_pairs, judge_pairs

    decided = {(d["key_a_kwd"], d["key_b_kwd"]) for d in ctx.store.scan(
        ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", ResolutionDecision.KIND)], fields=["key_a_kwd", "key_b_kwd"])}
    pairs = candidate_pairs(entities, None, max_pairs=max_pairs, skip=decided)
    by_key = {e.key: e for e in entities}
    judged = judge_pairs(ctx.chat, pairs, by_key, cancel=cancel) if pairs else []
    result.resolution_asked = len(pairs)
    result.resolution_merged = sum(1 for d in judged if d.same)
    record_decisions(ctx, [ResolutionDecision(ctx.kb_id, d.a, d.b, d.same) for d in judged])

