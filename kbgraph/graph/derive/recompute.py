"""Re-deriving the rows of the keys a change touched: every remaining mention of those keys read (a
few hundred keys at a time), their rows derived (entities.py, relations.py), written when they
differ from the stored ones, and rows left without mentions removed. ``DeriveResult`` counts what
changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from kbgraph.graph.derive.aliases import NO_ALIASES, AliasMap
from kbgraph.graph.derive.entities import (
    EntityFacts, _description_input, _entity_from_facts, apply_edits, entity_facts, extended_facts,
)
from kbgraph.graph.derive.fragments import Describe, _in_order, _prefetch_summaries
from kbgraph.graph.derive.mentions import _BATCH, _batches, _entity_mentions, _relation_mentions, pairs_touching
from kbgraph.graph.derive.relations import _relation_description_input, derive_relation
from kbgraph.graph.derive.vectors import entity_text, relation_text
from kbgraph.parse.tokenize import token_string_of
from kbgraph.store.base import Condition, DocStore, any_of, eq
from kbgraph.store.records import (
    Entity, EntityMention, Relation, RelationMention, entity_id, entity_score_id, graph_text, relation_id,
)

# Embeds texts; rows are plain float lists (None when the KB has no embedder).
EmbedTexts = Callable[[Sequence[str]], list[list[float]]]
# keys (or pairs) derived at a time by recompute: their mentions are what it holds at once
_DERIVE_ROWS = _BATCH


@dataclass
class DeriveResult:
    # rows actually rewritten (created or changed), created, and removed
    entities_written: int = 0
    entities_created: int = 0
    entities_removed: int = 0
    relations_written: int = 0
    relations_created: int = 0
    relations_removed: int = 0
    renamed: set[str] = field(default_factory=set)

    @property
    def changed(self) -> bool:
        return bool(self.entities_written or self.entities_removed or self.relations_written
                    or self.relations_removed)


@dataclass
class _Derivation:
    """What one ``recompute`` derives with, and how far it has come (``done`` of its keys and pairs)."""

    store: DocStore
    tenant: str
    kb_id: str
    describe: Describe
    embed: EmbedTexts | None
    aliases: AliasMap
    vector_name: str | None
    mention_budget: int | None
    report: Callable[[int, int], None]
    done: int = 0


# a derivation of many mentions (a large document's merge, a first name regrouped under its full
# name) is cut into batches of at most this many mentions (counted first: a query more), so it
# holds a batch's mentions in memory, not every one
MENTION_BUDGET = 20_000


def recompute(store: DocStore, tenant: str, kb_id: str, entity_keys: Iterable[str],
              relation_pairs: Iterable[tuple[str, str]], describe: Describe,
              embed: EmbedTexts | None, aliases: AliasMap = NO_ALIASES,
              vector_name: str | None = None,
              added: Mapping[str, Sequence[EntityMention]] | None = None,
              progress: Callable[[int, int], None] | None = None,
              mention_budget: int | None = None) -> DeriveResult:
    """Re-derive the rows of the given keys from their remaining mentions; write or remove them.

    Keys may be raw or aliased: an alias's own row is removed and its canonical key re-derived.
    ``added``: when the only change is one document's new mentions, those mentions by entity key
    (every one of the document's), so rows that do not cite the document yet can be extended.
    Rows are derived _DERIVE_ROWS keys (or pairs) at a time, so only their mentions are in memory
    at once, never all those of a large document; ``progress(done, total)`` follows them. With
    ``mention_budget`` a batch is cut further where its mentions (counted first) would pass it.
    """
    result = DeriveResult()
    raw_keys = set(entity_keys)
    keys = sorted({c for k in raw_keys for c in aliases.expand(k)})
    raw_pairs = {tuple(sorted(p)) for p in relation_pairs if p[0] != p[1]}
    pairs = sorted({q for p in raw_pairs for q in aliases.expand_pair(*p)})
    total = len(keys) + len(pairs)
    report = progress or (lambda _done, _total: None)
    report(0, total)
    run = _Derivation(store, tenant, kb_id, describe, embed, aliases, vector_name, mention_budget, report)
    entities = _entity_rows(run, keys, raw_keys, added or {}, total, result)

    # relations whose endpoint was renamed carry the old name: re-derive them as well
    if result.renamed:
        pairs = sorted(set(pairs) | {q for p in pairs_touching(store, tenant, kb_id, result.renamed)
                                     for q in aliases.expand_pair(*p)})
        total = len(keys) + len(pairs)
    _relation_rows(run, pairs, raw_pairs, entities, total, result)
    store.refresh(tenant)
    return result


def _entity_rows(run: _Derivation, keys: list[str], raw_keys: set[str], added: Mapping[str, Sequence[EntityMention]],
                 total: int, result: DeriveResult) -> list[Entity]:
    """Derive, write and remove the entity rows of these canonical keys (and remove the rows of
    ``raw_keys`` that are aliases); returns the derived rows."""
    store, tenant, kb_id, aliases, describe = run.store, run.tenant, run.kb_id, run.aliases, run.describe
    previous = _existing(store, tenant, kb_id, [entity_id(kb_id, k) for k in keys], run.vector_name)
    tokens = _stored_tokens(previous)
    entities: list[Entity] = []
    without_mentions: set[str] = set()
    for batch in _key_runs(store, tenant, kb_id, keys, aliases, run.mention_budget):
        facts = _gather_facts(store, tenant, kb_id, batch, previous, added, aliases, describe)
        _prefetch_summaries(describe, (_description_input(key, facts[key]) for key in batch if key in facts))
        for key in batch:
            if key not in facts or not aliases.shown(key):
                without_mentions.add(key)
                continue
            entity = apply_edits(_entity_from_facts(kb_id, key, facts[key], describe, tokens), aliases.edits)
            # its PageRank and communities stay in its score row (the refresh's), not carried here
            old = previous.get(entity.id)
            if old is not None and old.get("name_kwd") != entity.name:
                result.renamed.add(key)
            entities.append(entity)
        run.done += len(batch)
        run.report(run.done, total)
    changed, gone = _write_rows(run, entities, previous, entity_text, Entity.from_doc,
                                {entity_id(kb_id, k) for k in without_mentions}
                                | {entity_id(kb_id, k) for k in raw_keys if aliases.canon(k) != k})
    if gone:  # their score rows (the refresh's PageRank and communities) go with them
        store.delete(tenant, [kb_id], [Condition("id", "in", [entity_score_id(i) for i in gone])], refresh=False)
    result.entities_written, result.entities_removed = len(changed), len(gone)
    result.entities_created = sum(1 for e in changed if e.id not in previous)
    return entities


def _relation_rows(run: _Derivation, pairs: list[tuple[str, str]], raw_pairs: set[tuple[str, str]],
                   entities: Sequence[Entity], total: int, result: DeriveResult) -> None:
    """Derive, write and remove the relation rows of these canonical pairs (and remove the rows of
    ``raw_pairs`` that alias others); ``entities``: the entity rows just derived (their names)."""
    store, tenant, kb_id, aliases, describe = run.store, run.tenant, run.kb_id, run.aliases, run.describe
    names = _display_names(store, tenant, kb_id, {k for p in pairs for k in p}, entities)
    relations: list[Relation] = []
    unmentioned: list[tuple[str, str]] = []
    for batch in _pair_runs(store, tenant, kb_id, pairs, aliases, run.mention_budget):
        rel_mentions = _relation_mentions(store, tenant, kb_id, batch, aliases)
        _prefetch_summaries(describe, (_relation_description_input(s, t, _in_order(rel_mentions[(s, t)]), names)
                                       for s, t in batch if (s, t) in rel_mentions))
        shown = [(s, t) for s, t in batch if (s, t) in rel_mentions and aliases.shown_pair(s, t)]
        relations += [derive_relation(kb_id, s, t, rel_mentions[(s, t)], names, describe) for s, t in shown]
        unmentioned += sorted(set(batch) - set(shown))
        run.done += len(batch)
        run.report(run.done, total)
    previous_rel = _existing(store, tenant, kb_id, [r.id for r in relations], run.vector_name)
    changed_rel, gone_rel = _write_rows(run, relations, previous_rel, relation_text, Relation.from_doc,
                                        {relation_id(kb_id, s, t) for s, t in unmentioned}
                                        | {relation_id(kb_id, *p) for p in raw_pairs if aliases.pair(*p) != p})
    result.relations_written, result.relations_removed = len(changed_rel), len(gone_rel)
    result.relations_created = sum(1 for r in changed_rel if r.id not in previous_rel)


def _write_rows(run: _Derivation, rows: list, previous: Mapping[str, dict], text_of: Callable[[object], str],
                from_doc: Callable[[dict], object], gone_ids: set[str]) -> tuple[list, list[str]]:
    """Write the rows that changed (``_changed_rows``) and remove the stored ones of ``gone_ids``;
    returns both."""
    changed = _changed_rows(rows, previous, text_of, from_doc, run.embed)
    if changed:
        run.store.upsert(run.tenant, run.kb_id, [r.to_doc() for r in changed], refresh=False)
    gone = _stored_ids(run.store, run.tenant, run.kb_id, gone_ids)
    if gone:
        run.store.delete(run.tenant, [run.kb_id], [Condition("id", "in", gone)], refresh=False)
    return changed, gone


def _gather_facts(store: DocStore, tenant: str, kb_id: str, keys: Sequence[str], previous: Mapping[str, dict],
                  added: Mapping[str, Sequence[EntityMention]], aliases: AliasMap,
                  describe: Describe) -> dict[str, EntityFacts]:
    """Facts per key that has mentions: extended from the stored row where one document's mentions
    are all that is new (a frequent entity's older mentions are not read again), else from all."""
    facts: dict[str, EntityFacts] = {}
    for key in keys:
        row = previous.get(entity_id(kb_id, key))
        if key in added and row is not None and aliases.members(key) == {key} and not aliases.edits.edited(key):
            extended = extended_facts(row, added[key], describe)
            if extended is not None:
                facts[key] = extended
    rest = [key for key in keys if key not in facts]
    for key, mentions in _entity_mentions(store, tenant, kb_id, rest, aliases).items():
        facts[key] = entity_facts(mentions)
    return facts


def _existing(store: DocStore, tenant: str, kb_id: str, ids: Sequence[str],
              vector_name: str | None = None) -> dict[str, dict]:
    """The stored rows with these ids, with their vectors when ``vector_name`` is given."""
    out: dict[str, dict] = {}
    for batch in _batches(list(ids)):
        for doc in store.get(tenant, [kb_id], batch):
            out[doc["id"]] = doc
        # only a row the embedding pass has reached has a vector to carry over
        embedded = [i for i in batch if i in out and out[i].get("embedded_int") != 0]
        if vector_name is not None and embedded:
            for doc in store.get(tenant, [kb_id], embedded, fields=["id", vector_name]):
                if vector_name in doc:
                    out[doc["id"]][vector_name] = doc[vector_name]
    return out


def _stored_ids(store: DocStore, tenant: str, kb_id: str, ids: set[str]) -> list[str]:
    """Those of ``ids`` that have a stored row."""
    found: list[str] = []
    for batch in _batches(sorted(ids)):
        found += [d["id"] for d in store.get(tenant, [kb_id], batch, fields=["id"])]
    return found


def _stored_tokens(previous: Mapping[str, dict]) -> Callable[[str], str]:
    """token_string, answered from the stored entity rows for a description they already hold: a
    frequent entity's description stops changing once it is full, and is long to tokenize."""
    known = {doc.get("content_with_weight"): graph_text(doc) or None for doc in previous.values()}

    def tokens(text: str) -> str:
        found = known.get(text)
        return found if isinstance(found, str) else token_string_of([text])

    return tokens


def _changed_rows(rows: list, previous: Mapping[str, dict], text_of: Callable[[object], str],
                  from_doc: Callable[[dict], object], embed: EmbedTexts | None) -> list:
    """The rows that differ from what is stored. A row keeps its stored vector while the text it
    embeds is unchanged; the others are embedded in one batch, or, without ``embed``, left for the
    KB's embedding pass (their ``embedded_int`` is 0). Unchanged rows are not rewritten."""
    to_embed = []
    for row in rows:
        old = previous.get(row.id)
        if old is not None:
            old_row = from_doc(old)
            # a vector made from the row's chunks (vector_from_chunks) is made again: a re-derived
            # row's chunks may have been edited or re-parsed under the same ids, an entity may have
            # been found in a second chunk (its text's vector then)
            if (old_row.vector is not None and text_of(old_row) == text_of(row)
                    and not getattr(old_row, "vector_from_chunks", False)):
                row.vector = old_row.vector
        if row.vector is None and embed is not None:
            to_embed.append(row)
    if to_embed:
        for row, vector in zip(to_embed, embed([text_of(r) for r in to_embed])):
            row.vector = list(vector)
    return [row for row in rows if previous.get(row.id) != row.to_doc()]


def _display_names(store: DocStore, tenant: str, kb_id: str, keys: set[str],
                   fresh: Sequence[Entity]) -> dict[str, str]:
    names = {e.key: e.name for e in fresh}
    missing_keys = sorted(keys - names.keys())
    for batch in _batches(missing_keys):
        for doc in store.get(tenant, [kb_id], [entity_id(kb_id, k) for k in batch], fields=["entity_key_kwd", "name_kwd"]):
            names[doc["entity_key_kwd"]] = doc["name_kwd"]
    return names


def _runs(items: Sequence, counts: Mapping, budget: int) -> Iterator[list]:
    """``items`` in order, in runs whose counts total at most ``budget`` (an item over it alone)."""
    run: list = []
    total = 0
    for item in items:
        if run and total + counts.get(item, 0) > budget:
            yield run
            run, total = [], 0
        run.append(item)
        total += counts.get(item, 0)
    if run:
        yield run


def _key_runs(store: DocStore, tenant: str, kb_id: str, keys: Sequence[str], aliases: AliasMap,
              budget: int | None) -> Iterator[Sequence[str]]:
    """Batches of canonical keys to derive at once, cut where their mentions would pass ``budget``."""
    for batch in _batches(keys, _DERIVE_ROWS):
        if budget is None:
            yield batch
            continue
        canon = {member: key for key in batch for member in aliases.members(key)}
        counts: Counter[str] = Counter()
        where = [eq("knowledge_graph_kwd", EntityMention.KIND), any_of("entity_key_kwd", sorted(canon))]
        for member, count in store.aggregate(tenant, [kb_id], "entity_key_kwd", where, size=len(canon)):
            counts[canon[member]] += count
        yield from _runs(batch, counts, budget)


def _pair_runs(store: DocStore, tenant: str, kb_id: str, pairs: Sequence[tuple[str, str]], aliases: AliasMap,
               budget: int | None) -> Iterator[Sequence[tuple[str, str]]]:
    """Batches of canonical pairs to derive at once, cut where their mentions would pass ``budget``."""
    for batch in _batches(pairs, _DERIVE_ROWS):
        if budget is None:
            yield batch
            continue
        canon = {relation_id(kb_id, a, b): (s, t) for s, t in batch
                 for a in aliases.members(s) for b in aliases.members(t)}
        counts: Counter[tuple[str, str]] = Counter()
        where = [eq("knowledge_graph_kwd", RelationMention.KIND), any_of("relation_id_kwd", sorted(canon))]
        for raw, count in store.aggregate(tenant, [kb_id], "relation_id_kwd", where, size=len(canon)):
            counts[canon[raw]] += count
        yield from _runs(batch, counts, budget)
