"""Entity resolution: the model's decisions on candidate pairs of entities being one, stored, and
the entities whose alias groups they change re-derived (a merge is undone by dropping its decision);
and the name links of the knowledge base (a first name or short form that only one full name can
stand for, kbgraph.graph.derive.aliases.name_links), recomputed from the mentions by every refresh.
"""

from __future__ import annotations

from collections.abc import Sequence

from collections import Counter, defaultdict

from kbgraph.graph.derive.aliases import (
    NAME_LINK_KIND, AliasMap, kb_name_links, load_aliases, name_link_doc, stored_keys, with_edits, with_name_links,
)
from kbgraph.graph.derive.corrections import edited_keys
from kbgraph.graph.extract.nlp.types import FALLBACK_TYPE, kind_types
from kbgraph.graph.derive.mentions import pairs_touching
from kbgraph.graph.derive.recompute import MENTION_BUDGET, DeriveResult, recompute
from kbgraph.index.context import KBContext
from kbgraph.index.graph_meta import bump_version, ensure_mention_format
from kbgraph.index.refresh_state import RefreshResult
from kbgraph.llm.base import CancelCheck
from kbgraph.store.base import any_of, eq
from kbgraph.store.records import Entity, EntityMention, RelationMention, ResolutionDecision


def regroup(ctx: KBContext, before: AliasMap, after: AliasMap) -> DeriveResult:
    """Re-derive every key whose alias group (or corrected row) changed between two alias maps."""
    changed = {k for k in before.canonical.keys() ^ after.canonical.keys()}
    changed |= {k for k in before.canonical.keys() & after.canonical.keys() if before.canon(k) != after.canon(k)}
    changed |= edited_keys(before.edits, after.edits)
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
                       after, ctx.vector_name, mention_budget=MENTION_BUDGET)
    bump_version(ctx, change)
    return change


def record_decisions(ctx: KBContext, decisions: Sequence[ResolutionDecision]) -> DeriveResult:
    """Store resolution decisions (new or revised) and re-derive the entities whose merges changed."""
    before = load_aliases(ctx.store, ctx.tenant, ctx.kb_id)
    if decisions:
        ctx.store.upsert(ctx.tenant, ctx.kb_id, [d.to_doc() for d in decisions])
    return regroup(ctx, before, load_aliases(ctx.store, ctx.tenant, ctx.kb_id))


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



def refresh_name_links(ctx: KBContext) -> DeriveResult:
    """Recompute the knowledge base's name links from its mentions; store the ones that changed and
    re-derive the entities whose groups they change. Nothing is written when they are the same."""
    merges, have, edits = stored_keys(ctx.store, ctx.tenant, ctx.kb_id)
    want = _wanted_name_links(ctx)
    if want == have:
        return DeriveResult()
    gone = sorted(k for k in have if want.get(k) != have[k])
    if gone:
        ctx.store.delete(ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", NAME_LINK_KIND),
                                                   any_of("key_a_kwd", gone)], refresh=False)
    new = [name_link_doc(ctx.kb_id, k, f) for k, f in sorted(want.items()) if have.get(k) != f]
    if new:
        ctx.store.upsert(ctx.tenant, ctx.kb_id, new, refresh=False)
    change = regroup(ctx, with_edits(with_name_links(merges, have), edits),
                     with_edits(with_name_links(merges, want), edits))
    if not change.changed:
        ctx.store.refresh(ctx.tenant)  # the links themselves, for the next merge to read
    return change


def _wanted_name_links(ctx: KBContext) -> dict[str, str]:
    """The name links the stored mentions call for (``aliases.kb_name_links``): first names of
    people, short forms and spelling variants of the other names."""
    kinds = kind_types(ctx.graph.entity_types)
    typed: dict[str, Counter[str]] = defaultdict(Counter)
    for d in ctx.store.scan(ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", EntityMention.KIND)],
                            fields=["entity_key_kwd", "entity_type_kwd"]):
        typed[d["entity_key_kwd"]][d.get("entity_type_kwd") or ""] += 1
    person = kinds["person"] if kinds["person"] != FALLBACK_TYPE else ""
    place = kinds["geo"] if kinds["geo"] != FALLBACK_TYPE else ""
    return kb_name_links(typed, person, place)
