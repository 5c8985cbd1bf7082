"""Mentions in and out of the store: the stored mentions of canonical keys and pairs (their aliases'
included), the keys and pairs a set of mentions touches, and the upgrade of mentions written by an
earlier format.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from kbgraph.graph.derive.aliases import AliasMap
from kbgraph.store.base import Condition, DocStore, any_of, eq, missing
from kbgraph.store.records import EntityMention, Relation, RelationMention, relation_id

_BATCH = 500


def _batches(items: Sequence, size: int = _BATCH) -> Iterable[Sequence]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _entity_mentions(store: DocStore, tenant: str, kb_id: str, keys: Sequence[str],
                     aliases: AliasMap) -> dict[str, list[EntityMention]]:
    """Mentions grouped by canonical key, for the given canonical keys (aliases included)."""
    found: dict[str, list[EntityMention]] = defaultdict(list)
    wanted = set(keys)
    members = sorted({m for key in keys for m in aliases.members(key)})
    for batch in _batches(members):
        where = [eq("knowledge_graph_kwd", EntityMention.KIND), any_of("entity_key_kwd", batch)]
        for doc in store.scan(tenant, [kb_id], where):
            mention = EntityMention.from_doc(doc)
            key = aliases.route_entity(mention)
            if key in wanted:  # a split's source and target share raw keys
                found[key].append(mention)
    return found


def _relation_mentions(store: DocStore, tenant: str, kb_id: str, pairs: Iterable[tuple[str, str]],
                       aliases: AliasMap) -> dict[tuple[str, str], list[RelationMention]]:
    """Mentions grouped by canonical pair, for the given canonical pairs (aliases included)."""
    wanted = set(pairs)
    # a canonical pair's mentions are stored under the raw pairs of its endpoints' alias groups
    raw_ids = sorted({relation_id(kb_id, a, b) for s, t in wanted
                      for a in aliases.members(s) for b in aliases.members(t)})
    found: dict[tuple[str, str], list[RelationMention]] = defaultdict(list)
    for batch in _batches(raw_ids):
        where = [eq("knowledge_graph_kwd", RelationMention.KIND), any_of("relation_id_kwd", batch)]
        for doc in store.scan(tenant, [kb_id], where):
            mention = RelationMention.from_doc(doc)
            pair = aliases.route_pair(mention)
            if pair in wanted:
                found[pair].append(mention)
    return found


def stored_entity_mentions(store: DocStore, tenant: str, kb_id: str, keys: Sequence[str],
                           aliases: AliasMap) -> dict[str, list[EntityMention]]:
    """The stored mentions of these canonical keys (their aliases' included), by canonical key."""
    return _entity_mentions(store, tenant, kb_id, keys, aliases)


def stored_relation_mentions(store: DocStore, tenant: str, kb_id: str, pairs: Iterable[tuple[str, str]],
                             aliases: AliasMap) -> dict[tuple[str, str], list[RelationMention]]:
    """The stored mentions of these canonical pairs (their endpoints' aliases' included), by pair."""
    return _relation_mentions(store, tenant, kb_id, pairs, aliases)


def touched_keys(store: DocStore, tenant: str, kb_id: str,
                 where: Sequence[Condition]) -> tuple[set[str], set[tuple[str, str]]]:
    """The entity keys and relation pairs of the mentions matching ``where`` (e.g. one document's)."""
    keys = {doc["entity_key_kwd"] for doc in store.scan(
        tenant, [kb_id], [eq("knowledge_graph_kwd", EntityMention.KIND), *where], fields=["entity_key_kwd"])}
    return keys, touched_pairs(store, tenant, kb_id, where)


def touched_pairs(store: DocStore, tenant: str, kb_id: str, where: Sequence[Condition]) -> set[tuple[str, str]]:
    """The relation pairs of the mentions matching ``where``."""
    return {(doc["src_key_kwd"], doc["tgt_key_kwd"]) for doc in store.scan(
        tenant, [kb_id], [eq("knowledge_graph_kwd", RelationMention.KIND), *where], fields=["src_key_kwd", "tgt_key_kwd"])}


def pairs_touching(store: DocStore, tenant: str, kb_id: str, keys: set[str]) -> set[tuple[str, str]]:
    pairs: set[tuple[str, str]] = set()
    for side in ("src_key_kwd", "tgt_key_kwd"):
        for batch in _batches(sorted(keys)):
            where = [eq("knowledge_graph_kwd", Relation.KIND), any_of(side, batch)]
            for doc in store.scan(tenant, [kb_id], where, fields=["src_key_kwd", "tgt_key_kwd"]):
                pairs.add((doc["src_key_kwd"], doc["tgt_key_kwd"]))
    return pairs


# The format of stored mentions this code writes and reads (GraphMeta.mention_format).
MENTION_FORMAT = 2


def upgrade_mentions(store: DocStore, tenant: str, kb_id: str) -> int:
    """Bring mentions written by an earlier format up to MENTION_FORMAT; returns how many changed.
    Format 2: relation mentions name their relation row (relation_id_kwd)."""
    where = [eq("knowledge_graph_kwd", RelationMention.KIND), missing("relation_id_kwd")]
    changes: dict[str, dict] = {}
    for doc in store.scan(tenant, [kb_id], where, fields=["id", "src_key_kwd", "tgt_key_kwd"]):
        changes[doc["id"]] = {"relation_id_kwd": relation_id(kb_id, doc["src_key_kwd"], doc["tgt_key_kwd"])}
    for batch in _batches(list(changes)):
        store.patch(tenant, kb_id, {i: changes[i] for i in batch})
    return len(changes)
