"""Entity and relation rows derived from their mentions (DESIGN.md principle 1).

Mentions are the source of truth. For a set of touched keys this module reads every remaining
mention of those keys, derives the rows from them alone, writes the rows, and removes rows with
no mention left. When a merge adds one document's mentions to an entity row that does not cite the
document yet, the row's stored state (counts, and where the fragments its description shows first
occur) stands in for the older mentions, so a frequent entity costs the same to merge as a rare one;
the result is the same row, which tests/graph/test_extend_entity.py checks.

Derivation depends only on the set of mentions (every choice is order-free or made on a sorted
order), so the graph after any sequence of adds and deletes equals a rebuild from the remaining
mentions; ``kbgraph.graph.invariants`` checks exactly that.

Phase products stored on entity rows (PageRank, community ids) are carried over from the
existing row: the KB phases own them and are marked stale whenever the graph changes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from kbgraph.graph.describe import Describer
from kbgraph.parse.tokenize import token_string, token_string_of
from kbgraph.store.base import Condition, DocStore, any_of, eq, missing
from kbgraph.store.records import (
    Entity, EntityMention, Relation, RelationMention, ResolutionDecision, entity_id, relation_id,
)

# Turns (what, name, fragments) into one description; see kbgraph.graph.describe.
Describe = Callable[[str, str, Sequence[str]], str]
# Embeds texts; rows are plain float lists (None when the KB has no embedder).
EmbedTexts = Callable[[Sequence[str]], list[list[float]]]

UNTYPED = {"", "unknown", "other"}
_BATCH = 500
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


@dataclass(frozen=True)
class AliasMap:
    """Entity keys merged by resolution: alias key -> canonical key (see resolution.plan_merges)."""

    canonical: Mapping[str, str] = field(default_factory=dict)

    def canon(self, key: str) -> str:
        return self.canonical.get(key, key)

    def pair(self, a: str, b: str) -> tuple[str, str]:
        low, high = sorted((self.canon(a), self.canon(b)))
        return low, high

    def members(self, key: str) -> set[str]:
        return {key, *self._aliases_of.get(key, ())}

    @cached_property
    def _aliases_of(self) -> dict[str, list[str]]:
        # members() is asked for every touched key: one pass over the map, not one per key
        grouped: dict[str, list[str]] = defaultdict(list)
        for alias, canon in self.canonical.items():
            grouped[canon].append(alias)
        return dict(grouped)


NO_ALIASES = AliasMap()


def load_aliases(store: DocStore, tenant: str, kb_id: str) -> AliasMap:
    from kbgraph.graph.resolution import Decision, plan_merges

    decisions = [ResolutionDecision.from_doc(d) for d in
                 store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", ResolutionDecision.KIND)])]
    return AliasMap(plan_merges(Decision(d.key_a, d.key_b, d.same) for d in decisions))


Order = tuple[str, str]  # where a fragment first occurs: (doc_id, chunk_id)


def _mention_order(doc_id: str, chunk_id: str) -> Order:
    return (doc_id, chunk_id)


def _most_common(counts: Mapping[str, int], *, avoid: set[str] = frozenset()) -> str:
    counts = {v: c for v, c in counts.items() if v and c > 0}
    preferred = {v: c for v, c in counts.items() if v.lower() not in avoid} or counts
    if not preferred:
        return ""
    # highest count wins; ties go to the lexicographically smallest, so order never matters
    return min(preferred, key=lambda v: (-preferred[v], v))


@lru_cache(maxsize=65536)
def _squeezed(fragment: str) -> str:
    # a frequent entity's fragments are trimmed again every time a new mention re-derives it
    return " ".join(fragment.split())


def _first_fragments(ordered: Sequence[EntityMention] | Sequence[RelationMention]) -> list[tuple[Order, str]]:
    """The mentions' descriptions, trimmed, each kept once where it first occurs, in mention order."""
    seen: set[str] = set()
    out: list[tuple[Order, str]] = []
    for m in ordered:
        text = _squeezed(m.description)
        if text and text not in seen:
            seen.add(text)
            out.append((_mention_order(m.doc_id, m.chunk_id), text))
    return out


# Embedding models read a few hundred word pieces at most; a longer text costs more and says little more.
EMBED_CHARS = 1000


def entity_text(entity: Entity) -> str:
    """What an entity's vector embeds."""
    return f"{entity.name} ({entity.type}): {entity.description}"[:EMBED_CHARS]


def relation_text(relation: Relation) -> str:
    keywords = f" [{', '.join(relation.keywords)}]" if relation.keywords else ""
    return f"{relation.src_name} -- {relation.tgt_name}{keywords}: {relation.description}"[:EMBED_CHARS]


# chunks whose vectors are read at once for relation vectors
_CHUNK_VECTOR_READ = 2000


def relation_vectors_from_chunks(store: DocStore, tenant: str, kb_id: str, relations: Sequence[Relation],
                                 vector_name: str) -> Iterator[tuple[Relation, np.ndarray | None]]:
    """Each relation with the mean of its chunks' stored vectors (``vector_name``), normalized;
    None where none of its chunks has one.

    A relation of the nlp extractor is two names in one sentence, its description that sentence:
    the chunk's vector says nearly as well what it is about (bench/README.md, retrieval with the
    local embedder), and costs no model call. The sum runs over the chunks in their (sorted) id
    order, so the vector is a function of the relation's chunks and their vectors alone. Relations
    are taken in order of their chunks, a few thousand chunks' vectors in memory at a time."""
    ordered = sorted(relations, key=lambda r: r.chunk_ids)
    start = 0
    while start < len(ordered):
        wanted: set[str] = set()
        end = start
        while end < len(ordered) and (end == start or len(wanted) + len(ordered[end].chunk_ids) <= _CHUNK_VECTOR_READ):
            wanted.update(ordered[end].chunk_ids)
            end += 1
        vectors = chunk_vectors(store, tenant, kb_id, sorted(wanted), vector_name)
        for relation in ordered[start:end]:
            found = [vectors[c] for c in sorted(relation.chunk_ids) if c in vectors]
            if not found:
                yield relation, None
                continue
            total = np.sum(np.asarray(found, dtype=np.float64), axis=0)
            norm = float(np.linalg.norm(total))
            yield relation, (total / norm if norm > 0 else total).astype(np.float32)
        start = end


def chunk_vectors(store: DocStore, tenant: str, kb_id: str, chunk_ids: Sequence[str],
                  vector_name: str) -> dict[str, np.ndarray]:
    """The stored vectors (``vector_name``) of those of these chunks that have one, by chunk id."""
    out: dict[str, np.ndarray] = {}
    for batch in _batches(list(chunk_ids)):
        for doc in store.get(tenant, [kb_id], batch, fields=["id", vector_name]):
            vector = doc.get(vector_name)
            if vector is not None and doc.get("id") is not None:
                out[doc["id"]] = np.asarray(vector, dtype=np.float32)
    return out


# How much of its name's vector an entity found in a single chunk adds to that chunk's (both unit
# length). With the bundled e5, 0.25-0.35 kept every retrieval figure within 0.01 of the entities'
# text vectors; the chunk's alone, 0.2 or 0.5 lost 0.02 of a MuSiQue all-recall@5 (bench/README.md)
ENTITY_NAME_WEIGHT = 0.3


def entity_name_text(entity: Entity) -> str:
    """What an entity found in a single chunk embeds when its vector is made from that chunk's
    (``entity_vectors``): its name, a few word pieces instead of its description's hundreds."""
    return entity.name


def entity_vector_from_chunk(chunk_vector: Sequence[float], name_vector: Sequence[float]) -> np.ndarray:
    """An entity's vector from its one chunk's vector and its name's: the unit chunk vector plus
    ENTITY_NAME_WEIGHT of the unit name vector, normalized.

    With the nlp extractor such an entity's description is the sentences of that chunk naming it,
    which the chunk's vector already covers; the name's share sets apart the several entities of
    one chunk, which would otherwise tie on every query."""
    chunk = _unit(np.asarray(chunk_vector, dtype=np.float64))
    name = _unit(np.asarray(name_vector, dtype=np.float64))
    return _unit(chunk + ENTITY_NAME_WEIGHT * name).astype(np.float32)


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def _relation_description_input(src: str, tgt: str, ordered: Sequence[RelationMention],
                                names: Mapping[str, str]) -> tuple[str, str, list[str]]:
    return ("relation", f"{names.get(src, src)} -- {names.get(tgt, tgt)}",
            [text for _, text in _first_fragments(ordered)])


def _in_order(mentions: Sequence[EntityMention] | Sequence[RelationMention]) -> list:
    return sorted(mentions, key=lambda m: _mention_order(m.doc_id, m.chunk_id))


def _prefetch_summaries(describe: Describe, inputs: Iterable[tuple[str, str, list[str]]]) -> None:
    # only a describer that can ask the LLM several things at once gains from knowing them ahead
    if isinstance(describe, Describer) and describe.chat is not None and describe.concurrency > 1:
        describe.prefetch(list(inputs))


@dataclass
class EntityFacts:
    """What an entity row is derived from: counts and sets over its mentions, and its unique
    description fragments (trimmed) in mention order, each with where it first occurs."""

    names: Counter[str]
    types: Counter[str]
    fragments: list[tuple[Order, str]]
    doc_ids: set[str]
    chunk_ids: set[str]
    mention_count: int
    # a row's state keeps only the fragments its description shows; this is where the first one
    # past them occurs, None when there is none
    beyond: Order | None = None


def entity_facts(mentions: Sequence[EntityMention]) -> EntityFacts:
    return EntityFacts(names=Counter(m.name for m in mentions), types=Counter(m.type for m in mentions),
                       fragments=_first_fragments(_in_order(mentions)), doc_ids={m.doc_id for m in mentions},
                       chunk_ids={m.chunk_id for m in mentions}, mention_count=len(mentions))


def _description_input(key: str, facts: EntityFacts) -> tuple[str, str, list[str]]:
    """What an entity's description is made from: (kind, display name, fragments)."""
    return "entity", _most_common(facts.names) or key, [text for _, text in facts.fragments]


def _entity_from_facts(kb_id: str, key: str, facts: EntityFacts, describe: Describe,
                       tokens: Callable[[str], str]) -> Entity:
    kind, name, fragments = _description_input(key, facts)
    aliases = sorted(n for n in facts.names if n and n != name)
    description = describe(kind, name, fragments)
    doc_ids, chunk_ids = sorted(facts.doc_ids), sorted(facts.chunk_ids)
    return Entity(
        kb_id=kb_id, key=key, name=name, type=_most_common(facts.types, avoid=UNTYPED) or "unknown",
        description=description, name_tokens=token_string_of([name, *aliases]),
        description_tokens=tokens(description), aliases=aliases, doc_ids=doc_ids, chunk_ids=chunk_ids,
        mention_count=facts.mention_count, derivation=_derivation_state(facts, description, doc_ids, chunk_ids),
        # fragments past the ones an extended row kept (``beyond``) put the whole set over the budget
        # even where the kept ones and the new ones still fit
        summary_pending=_pending(describe, fragments) or (
            facts.beyond is not None and isinstance(describe, Describer) and describe.deferred),
    )


def _derivation_state(facts: EntityFacts, description: str, doc_ids: list[str],
                      chunk_ids: list[str]) -> dict | None:
    """The state extended_facts needs, when the description is its first fragments joined (not an
    LLM summary): the counts, where each shown fragment first occurs (as positions in the row's
    doc and chunk ids) and the first fragment past them."""
    shown = description.count("\n") + 1 if description else 0
    texts = [text for _, text in facts.fragments[:shown]]
    if len(texts) < shown or "\n".join(texts) != description:
        return None
    doc_at = {d: i for i, d in enumerate(doc_ids)}
    chunk_at = {c: i for i, c in enumerate(chunk_ids)}
    beyond = facts.fragments[shown][0] if shown < len(facts.fragments) else facts.beyond
    # an empty surface form or type never counts (_most_common skips it); leaving it out also keeps
    # the state free of empty keys, which a search engine may refuse as field names
    return {"names": {n: c for n, c in facts.names.items() if n}, "types": {t: c for t, c in facts.types.items() if t},
            "order": [[doc_at[doc], chunk_at[chunk]] for (doc, chunk), _ in facts.fragments[:shown]],
            "next": list(beyond) if beyond else None}


def _facts_from_row(row: Mapping[str, Any]) -> EntityFacts | None:
    state = row.get("derivation_with_weight")
    if not isinstance(state, dict):
        return None  # written before rows kept a state, or its description is a summary
    doc_ids, chunk_ids = list(row.get("doc_ids_kwd") or []), list(row.get("chunk_ids_kwd") or [])
    description = row.get("content_with_weight") or ""
    try:
        texts = description.split("\n") if state["order"] else []
        if len(texts) != len(state["order"]):
            return None
        beyond = state.get("next")
        return EntityFacts(
            names=Counter(state["names"]), types=Counter(state["types"]),
            fragments=[((doc_ids[d], chunk_ids[c]), text) for (d, c), text in zip(state["order"], texts)],
            doc_ids=set(doc_ids), chunk_ids=set(chunk_ids), mention_count=int(row.get("mention_count_int", 0)),
            beyond=(beyond[0], beyond[1]) if beyond else None)
    except (KeyError, IndexError, TypeError, ValueError):
        return None  # a state that does not fit its row: derive the row from its mentions instead


def _add_mentions(facts: EntityFacts, added: Sequence[EntityMention]) -> None:
    """Fold one new document's mentions into facts read from a row."""
    first: dict[str, Order] = {text: order for order, text in facts.fragments}
    for m in _in_order(added):
        text, order = _squeezed(m.description), _mention_order(m.doc_id, m.chunk_id)
        if not text:
            continue
        if facts.beyond is not None and order > facts.beyond:
            # the description stops at or before that first fragment it could not take: even with
            # new fragments before it (which only take room), it cannot reach one that sorts after
            continue
        if text not in first or order < first[text]:
            first[text] = order
    facts.fragments = sorted((order, text) for text, order in first.items())
    facts.names.update(m.name for m in added)
    facts.types.update(m.type for m in added)
    facts.doc_ids.update(m.doc_id for m in added)
    facts.chunk_ids.update(m.chunk_id for m in added)
    facts.mention_count += len(added)


def _truncates(describe: Describe) -> bool:
    """Whether a description too long for the budget is its first fragments (no LLM summary, or
    the summary left for the KB's summary pass)."""
    return isinstance(describe, Describer) and (describe.chat is None or describe.deferred)


def _pending(describe: Describe, fragments: Sequence[str]) -> bool:
    return isinstance(describe, Describer) and describe.pending(fragments)


def derive_entity(kb_id: str, key: str, mentions: Sequence[EntityMention], describe: Describe,
                  tokens: Callable[[str], str] = token_string) -> Entity:
    return _entity_from_facts(kb_id, key, entity_facts(mentions), describe, tokens)


def extended_facts(row: Mapping[str, Any], added: Sequence[EntityMention], describe: Describe) -> EntityFacts | None:
    """The facts of a stored entity row with one new document's mentions added, equal to those of
    all its mentions, without reading the earlier ones; None where the row cannot tell them.

    The row must not cite the document yet. A description that is an LLM summary depends on every
    fragment, so only rows whose description is their first fragments joined can be extended, and
    while fragments lie past those, only with a describer that truncates (a summary would need them).
    """
    facts = _facts_from_row(row)
    if facts is None or any(m.doc_id in facts.doc_ids for m in added):
        return None
    if facts.beyond is not None and not _truncates(describe):
        return None
    _add_mentions(facts, added)
    return facts


def derive_relation(kb_id: str, src: str, tgt: str, mentions: Sequence[RelationMention],
                    names: Mapping[str, str], describe: Describe) -> Relation:
    ordered = _in_order(mentions)
    src_name, tgt_name = names.get(src, src), names.get(tgt, tgt)
    kind, subject, fragments = _relation_description_input(src, tgt, ordered, names)
    description = describe(kind, subject, fragments)
    keyword_counts = Counter(k.strip().lower() for m in ordered for k in m.keywords if k.strip())
    keywords = sorted(keyword_counts, key=lambda k: (-keyword_counts[k], k))[:12]
    return Relation(
        kb_id=kb_id, src_key=src, tgt_key=tgt, src_name=src_name, tgt_name=tgt_name, description=description,
        description_tokens=token_string_of([src_name, tgt_name, description, *keywords]),
        keywords=keywords, weight=round(sum(m.weight for m in ordered), 6),
        doc_ids=sorted({m.doc_id for m in ordered}), chunk_ids=sorted({m.chunk_id for m in ordered}),
        mention_count=len(ordered), summary_pending=_pending(describe, fragments),
    )


def _batches(items: Sequence, size: int = _BATCH) -> Iterable[Sequence]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _entity_mentions(store: DocStore, tenant: str, kb_id: str, keys: Sequence[str],
                     aliases: AliasMap) -> dict[str, list[EntityMention]]:
    """Mentions grouped by canonical key, for the given canonical keys (aliases included)."""
    found: dict[str, list[EntityMention]] = defaultdict(list)
    members = sorted({m for key in keys for m in aliases.members(key)})
    for batch in _batches(members):
        where = [eq("knowledge_graph_kwd", EntityMention.KIND), any_of("entity_key_kwd", batch)]
        for doc in store.scan(tenant, [kb_id], where):
            mention = EntityMention.from_doc(doc)
            found[aliases.canon(mention.key)].append(mention)
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
            pair = aliases.pair(mention.src_key, mention.tgt_key)
            if pair in wanted:
                found[pair].append(mention)
    return found


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
    known = {doc.get("content_with_weight"): doc.get("content_ltks") for doc in previous.values()}

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


def _gather_facts(store: DocStore, tenant: str, kb_id: str, keys: Sequence[str], previous: Mapping[str, dict],
                  added: Mapping[str, Sequence[EntityMention]], aliases: AliasMap,
                  describe: Describe) -> dict[str, EntityFacts]:
    """Facts per key that has mentions: extended from the stored row where one document's mentions
    are all that is new (a frequent entity's older mentions are not read again), else from all."""
    facts: dict[str, EntityFacts] = {}
    for key in keys:
        row = previous.get(entity_id(kb_id, key))
        if key in added and row is not None and aliases.members(key) == {key}:
            extended = extended_facts(row, added[key], describe)
            if extended is not None:
                facts[key] = extended
    rest = [key for key in keys if key not in facts]
    for key, mentions in _entity_mentions(store, tenant, kb_id, rest, aliases).items():
        facts[key] = entity_facts(mentions)
    return facts


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
    keys = sorted({aliases.canon(k) for k in raw_keys})
    raw_pairs = {tuple(sorted(p)) for p in relation_pairs if p[0] != p[1]}
    pairs = {aliases.pair(*p) for p in raw_pairs}
    pairs = sorted(p for p in pairs if p[0] != p[1])
    total = len(keys) + len(pairs)
    report = progress or (lambda _done, _total: None)
    report(0, total)

    previous = _existing(store, tenant, kb_id, [entity_id(kb_id, k) for k in keys], vector_name)
    tokens = _stored_tokens(previous)
    entities: list[Entity] = []
    without_mentions: set[str] = set()
    done = 0
    for batch in _key_runs(store, tenant, kb_id, keys, aliases, mention_budget):
        facts = _gather_facts(store, tenant, kb_id, batch, previous, added or {}, aliases, describe)
        _prefetch_summaries(describe, (_description_input(key, facts[key]) for key in batch if key in facts))
        for key in batch:
            if key not in facts:
                without_mentions.add(key)
                continue
            entity = _entity_from_facts(kb_id, key, facts[key], describe, tokens)
            old = previous.get(entity.id)
            if old is not None:
                entity.pagerank = float(old.get("pagerank_flt", 0.0))
                entity.community_ids = list(old.get("community_ids_kwd") or [])
                if old.get("name_kwd") != entity.name:
                    result.renamed.add(key)
            entities.append(entity)
        done += len(batch)
        report(done, total)
    changed = _changed_rows(entities, previous, entity_text, Entity.from_doc, embed)
    if changed:
        store.upsert(tenant, kb_id, [e.to_doc() for e in changed], refresh=False)
    gone = _stored_ids(store, tenant, kb_id, {entity_id(kb_id, k) for k in without_mentions}
                       | {entity_id(kb_id, k) for k in raw_keys if aliases.canon(k) != k})
    if gone:
        store.delete(tenant, [kb_id], [Condition("id", "in", gone)], refresh=False)
    result.entities_written, result.entities_removed = len(changed), len(gone)
    result.entities_created = sum(1 for e in changed if e.id not in previous)

    # relations whose endpoint was renamed carry the old name: re-derive them as well
    if result.renamed:
        pairs = sorted(set(pairs) | {aliases.pair(*p) for p in pairs_touching(store, tenant, kb_id, result.renamed)})
        total = len(keys) + len(pairs)
    names = _display_names(store, tenant, kb_id, {k for p in pairs for k in p}, entities)
    relations: list[Relation] = []
    unmentioned: list[tuple[str, str]] = []
    for batch in _pair_runs(store, tenant, kb_id, pairs, aliases, mention_budget):
        rel_mentions = _relation_mentions(store, tenant, kb_id, batch, aliases)
        _prefetch_summaries(describe, (_relation_description_input(s, t, _in_order(rel_mentions[(s, t)]), names)
                                       for s, t in batch if (s, t) in rel_mentions))
        relations += [derive_relation(kb_id, s, t, rel_mentions[(s, t)], names, describe)
                      for s, t in batch if (s, t) in rel_mentions]
        unmentioned += [(s, t) for s, t in batch if (s, t) not in rel_mentions]
        done += len(batch)
        report(done, total)
    previous_rel = _existing(store, tenant, kb_id, [r.id for r in relations], vector_name)
    changed_rel = _changed_rows(relations, previous_rel, relation_text, Relation.from_doc, embed)
    if changed_rel:
        store.upsert(tenant, kb_id, [r.to_doc() for r in changed_rel], refresh=False)
    gone_rel = _stored_ids(store, tenant, kb_id, {relation_id(kb_id, s, t) for s, t in unmentioned}
                           | {relation_id(kb_id, *p) for p in raw_pairs if aliases.pair(*p) != p})
    if gone_rel:
        store.delete(tenant, [kb_id], [Condition("id", "in", gone_rel)], refresh=False)
    result.relations_written, result.relations_removed = len(changed_rel), len(gone_rel)
    result.relations_created = sum(1 for r in changed_rel if r.id not in previous_rel)
    store.refresh(tenant)
    return result


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


def pairs_touching(store: DocStore, tenant: str, kb_id: str, keys: set[str]) -> set[tuple[str, str]]:
    pairs: set[tuple[str, str]] = set()
    for side in ("src_key_kwd", "tgt_key_kwd"):
        for batch in _batches(sorted(keys)):
            where = [eq("knowledge_graph_kwd", Relation.KIND), any_of(side, batch)]
            for doc in store.scan(tenant, [kb_id], where, fields=["src_key_kwd", "tgt_key_kwd"]):
                pairs.add((doc["src_key_kwd"], doc["tgt_key_kwd"]))
    return pairs


def _display_names(store: DocStore, tenant: str, kb_id: str, keys: set[str],
                   fresh: Sequence[Entity]) -> dict[str, str]:
    names = {e.key: e.name for e in fresh}
    missing_keys = sorted(keys - names.keys())
    for batch in _batches(missing_keys):
        for doc in store.get(tenant, [kb_id], [entity_id(kb_id, k) for k in batch], fields=["entity_key_kwd", "name_kwd"]):
            names[doc["entity_key_kwd"]] = doc["name_kwd"]
    return names


def document_entity_mentions(store: DocStore, tenant: str, kb_id: str, doc_id: str) -> dict[str, list[EntityMention]]:
    """A document's entity mentions by key."""
    found: dict[str, list[EntityMention]] = defaultdict(list)
    for doc in store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", EntityMention.KIND), eq("doc_id", doc_id)]):
        mention = EntityMention.from_doc(doc)
        found[mention.key].append(mention)
    return dict(found)


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


def entity_summary_input(key: str, mentions: Sequence[EntityMention]) -> tuple[str, str, list[str]]:
    """(kind, display name, fragments) of an entity with these mentions: what its description, and a
    summary of it, are made from."""
    return _description_input(key, entity_facts(mentions))


def relation_summary_input(src: str, tgt: str, mentions: Sequence[RelationMention],
                           names: Mapping[str, str]) -> tuple[str, str, list[str]]:
    """(kind, subject, fragments) of a relation with these mentions; ``names``: its endpoints'
    display names by key."""
    return _relation_description_input(src, tgt, _in_order(mentions), names)


def display_name(key: str, mentions: Sequence[EntityMention]) -> str:
    """The name an entity row with these mentions shows."""
    return _most_common(Counter(m.name for m in mentions)) or key


def stored_entity_mentions(store: DocStore, tenant: str, kb_id: str, keys: Sequence[str],
                           aliases: AliasMap) -> dict[str, list[EntityMention]]:
    """The stored mentions of these canonical keys (their aliases' included), by canonical key."""
    return _entity_mentions(store, tenant, kb_id, keys, aliases)


def stored_relation_mentions(store: DocStore, tenant: str, kb_id: str, pairs: Iterable[tuple[str, str]],
                             aliases: AliasMap) -> dict[tuple[str, str], list[RelationMention]]:
    """The stored mentions of these canonical pairs (their endpoints' aliases' included), by pair."""
    return _relation_mentions(store, tenant, kb_id, pairs, aliases)


def entity_description_inputs(store: DocStore, tenant: str, kb_id: str, keys: Sequence[str],
                              aliases: AliasMap) -> dict[str, tuple[str, str, list[str]]]:
    """(kind, display name, fragments) of these canonical entity keys, from all their mentions:
    what their descriptions are made from (for the summary pass)."""
    return {key: _description_input(key, entity_facts(mentions))
            for key, mentions in _entity_mentions(store, tenant, kb_id, keys, aliases).items()}


def relation_description_inputs(store: DocStore, tenant: str, kb_id: str, rows: Sequence[Relation],
                                aliases: AliasMap) -> dict[tuple[str, str], tuple[str, str, list[str]]]:
    """(kind, subject, fragments) of these relation rows, from all their mentions; the subject
    names the endpoints as the rows do (as a derivation names them)."""
    mentions = _relation_mentions(store, tenant, kb_id, [(r.src_key, r.tgt_key) for r in rows], aliases)
    out: dict[tuple[str, str], tuple[str, str, list[str]]] = {}
    for row in rows:
        pair = (row.src_key, row.tgt_key)
        if pair in mentions:
            out[pair] = _relation_description_input(row.src_key, row.tgt_key, _in_order(mentions[pair]),
                                                    {row.src_key: row.src_name, row.tgt_key: row.tgt_name})
    return out
