"""An entity row derived from its mentions, or extended from its stored state by one new document's
mentions (equal to the row all its mentions give: tests/graph/test_extend_entity.py), and the inputs
a summary of its description is made from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbgraph.graph.derive.aliases import AliasMap
from kbgraph.graph.derive.corrections import KeyEdits
from kbgraph.graph.derive.fragments import (
    Describe, Order, _first_fragments, _in_order, _mention_order, _most_common, _pending, _squeezed, _truncates,
)
from kbgraph.graph.derive.mentions import _entity_mentions
from kbgraph.graph.describe import Describer
from kbgraph.graph.keys import normalize_key
from kbgraph.parse.tokenize import token_string, token_string_of
from kbgraph.store.base import DocStore
from kbgraph.store.records import Entity, EntityMention

UNTYPED = {"", "unknown", "other"}


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
    return "entity", _display(key, facts.names), [text for _, text in facts.fragments]


def _display(key: str, names: Mapping[str, int]) -> str:
    """The name a row shows: its commonest surface of its own key ("Jennifer Moore", not the first
    name a name link merged into it), else its commonest surface."""
    own = {n: c for n, c in names.items() if n and normalize_key(n) == key}
    return _most_common(own) or _most_common(names) or key


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


def entity_summary_input(key: str, mentions: Sequence[EntityMention]) -> tuple[str, str, list[str]]:
    """(kind, display name, fragments) of an entity with these mentions: what its description, and a
    summary of it, are made from."""
    return _description_input(key, entity_facts(mentions))


def display_name(key: str, mentions: Sequence[EntityMention]) -> str:
    """The name an entity row with these mentions shows."""
    return _display(key, Counter(m.name for m in mentions))


def entity_description_inputs(store: DocStore, tenant: str, kb_id: str, keys: Sequence[str],
                              aliases: AliasMap) -> dict[str, tuple[str, str, list[str]]]:
    """(kind, display name, fragments) of these canonical entity keys, from all their mentions:
    what their descriptions are made from (for the summary pass)."""
    return {key: _description_input(key, entity_facts(mentions))
            for key, mentions in _entity_mentions(store, tenant, kb_id, keys, aliases).items()}


def apply_edits(entity: Entity, edits: KeyEdits) -> Entity:
    """The row with the name, type and description the corrections set for its key (the rest, and
    the old display name among its aliases, as its mentions give them)."""
    key = entity.key
    name, kind, description = edits.names.get(key), edits.types.get(key), edits.descriptions.get(key)
    if name is None and kind is None and description is None:
        return entity
    if name is not None and name != entity.name:
        entity.aliases = sorted({*entity.aliases, entity.name} - {name, ""})
        entity.name = name
        entity.name_tokens = token_string_of([name, *entity.aliases])
    if kind is not None:
        entity.type = kind
    if description is not None:
        entity.description = description
        entity.description_tokens = token_string_of([description])
        entity.summary_pending = False
    entity.derivation = None  # an edited row is derived from all its mentions, never extended
    return entity
