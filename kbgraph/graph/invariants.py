"""The graph invariant: stored entity and relation rows equal a rebuild from the remaining mentions."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from kbgraph.graph.derive.aliases import load_aliases
from kbgraph.graph.derive.entities import apply_edits, derive_entity
from kbgraph.graph.derive.fragments import Describe
from kbgraph.graph.derive.relations import derive_relation
from kbgraph.graph.scores import scan_entities
from kbgraph.store.base import DocStore, eq
from kbgraph.store.records import Entity, EntityMention, Relation, RelationMention

# Fields a rebuild must reproduce exactly. Phase products (PageRank, communities) and vectors
# are left out: the phases own the former, and the latter follow from the description.
ENTITY_FIELDS = ("name", "type", "aliases", "doc_ids", "chunk_ids", "mention_count", "description")
RELATION_FIELDS = ("src_name", "tgt_name", "keywords", "weight", "doc_ids", "chunk_ids", "mention_count",
                   "description")


@dataclass
class GraphSnapshot:
    entities: dict[str, Entity]
    relations: dict[tuple[str, str], Relation]


def stored_graph(store: DocStore, tenant: str, kb_id: str) -> GraphSnapshot:
    entities = {e.key: e for e in (Entity.from_doc(d) for d in scan_entities(store, tenant, [kb_id]))}
    relations = {(r.src_key, r.tgt_key): r for r in (Relation.from_doc(d) for d in
                                                     store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", Relation.KIND)]))}
    return GraphSnapshot(entities, relations)


def rebuilt_graph(store: DocStore, tenant: str, kb_id: str, describe: Describe) -> GraphSnapshot:
    """The graph a rebuild from every remaining mention (and resolution decision, name link and
    correction) would give."""
    aliases = load_aliases(store, tenant, kb_id)
    by_key: dict[str, list[EntityMention]] = defaultdict(list)
    for doc in store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", EntityMention.KIND)]):
        mention = EntityMention.from_doc(doc)
        by_key[aliases.route_entity(mention)].append(mention)
    by_pair: dict[tuple[str, str], list[RelationMention]] = defaultdict(list)
    for doc in store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", RelationMention.KIND)]):
        mention = RelationMention.from_doc(doc)
        pair = aliases.route_pair(mention)
        if aliases.shown_pair(*pair):
            by_pair[pair].append(mention)
    entities = {key: apply_edits(derive_entity(kb_id, key, ms, describe), aliases.edits)
                for key, ms in by_key.items() if aliases.shown(key)}
    names = {key: e.name for key, e in entities.items()}
    relations = {pair: derive_relation(kb_id, pair[0], pair[1], ms, names, describe) for pair, ms in by_pair.items()}
    return GraphSnapshot(entities, relations)


def _diff(kind: str, stored: dict, rebuilt: dict, fields: tuple[str, ...]) -> list[str]:
    problems = [f"{kind} {k!r} is stored but has no mention left" for k in sorted(stored.keys() - rebuilt.keys())]
    problems += [f"{kind} {k!r} has mentions but no row" for k in sorted(rebuilt.keys() - stored.keys())]
    for key in sorted(stored.keys() & rebuilt.keys()):
        for name in fields:
            have, want = getattr(stored[key], name), getattr(rebuilt[key], name)
            if have != want:
                problems.append(f"{kind} {key!r}: {name} is {have!r}, a rebuild gives {want!r}")
    return problems


def check_graph(store: DocStore, tenant: str, kb_id: str, describe: Describe) -> list[str]:
    """Every difference between the stored graph and a rebuild from mentions (empty = consistent)."""
    stored = stored_graph(store, tenant, kb_id)
    rebuilt = rebuilt_graph(store, tenant, kb_id, describe)
    return (_diff("entity", stored.entities, rebuilt.entities, ENTITY_FIELDS)
            + _diff("relation", stored.relations, rebuilt.relations, RELATION_FIELDS))
