"""Entity keys merged, as derivation reads them: a row is derived under its canonical key from the
mentions of every alias. Two sources: entity resolution's "same" decisions (an LLM's), and name
links, a first name or short form that only one full name of the knowledge base can stand for
("Jennifer" -> "Jennifer Moore" while the knowledge base has no other Jennifer; ``name_links``).

Name links are a pure function of the knowledge base's mentions (which keys are people, and how
often), computed by the refresh after a batch of changes (kbgraph.index.resolution) and stored as
``name_link`` rows beside the decisions, so that the graph after any adds and deletes and a refresh
equals a rebuild's: tests/graph/test_graph_exact.py and tests/graph/test_name_links.py check it.

Over both lie the user's corrections (kbgraph.graph.derive.corrections): their key edits move keys
after resolution and the links have (a key a correction names is pinned: resolution no longer moves
it), route one document's mentions of a key to another (a split by documents), set names, types and
descriptions, and hide keys and pairs. ``AliasMap.route_entity``/``route_pair`` give the row a
mention belongs to; ``members`` the raw keys whose mentions may belong to a row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from kbgraph.graph.derive.short_forms import short_form_links
from kbgraph.graph.derive.corrections import CORRECTION_KIND, Correction, KeyEdits, fold
from kbgraph.store.base import DocStore, any_of
from kbgraph.store.records import EntityMention, RelationMention, ResolutionDecision, stable_id


@dataclass(frozen=True)
class AliasMap:
    """Entity keys merged: alias key -> canonical key (resolution.plan_merges, the name links and
    the corrections' moves, flattened), and the rest of the corrections' ``edits``."""

    canonical: Mapping[str, str] = field(default_factory=dict)
    edits: KeyEdits = field(default_factory=KeyEdits)

    def canon(self, key: str) -> str:
        return self.canonical.get(key, key)

    def pair(self, a: str, b: str) -> tuple[str, str]:
        low, high = sorted((self.canon(a), self.canon(b)))
        return low, high

    def members(self, key: str) -> set[str]:
        """The raw keys whose mentions may belong to this canonical key's row (splits may run both
        ways between two keys: each key is visited once)."""
        out: set[str] = set()
        seen, todo = {key}, [key]
        while todo:
            current = todo.pop()
            out |= {current, *self._aliases_of.get(current, ())}
            for source in self._split_sources.get(current, ()):
                if source not in seen:
                    seen.add(source)
                    todo.append(source)
        return out

    def expand(self, key: str) -> set[str]:
        """The canonical keys a raw key's mentions may belong to (its own, and keys split from it)."""
        out = {self.canon(key)}
        todo = list(out)
        while todo:
            for rule in self._splits_from.get(todo.pop(), ()):
                if rule.target not in out:
                    out.add(rule.target)
                    todo.append(rule.target)
        return out

    def expand_pair(self, a: str, b: str) -> set[tuple[str, str]]:
        return {(x, y) if x <= y else (y, x) for x in self.expand(a) for y in self.expand(b) if x != y}

    def route(self, key: str, doc_id: str) -> str:
        """The canonical key a mention of ``key`` in ``doc_id`` belongs to."""
        canon = self.canon(key)
        for _ in range(len(self.edits.splits)):
            rule = next((r for r in self._splits_from.get(canon, ()) if doc_id in r.docs), None)
            if rule is None:
                break
            canon = rule.target
        return canon

    def route_entity(self, mention: EntityMention) -> str:
        return self.route(mention.key, mention.doc_id)

    def route_pair(self, mention: RelationMention) -> tuple[str, str]:
        a, b = self.route(mention.src_key, mention.doc_id), self.route(mention.tgt_key, mention.doc_id)
        return (a, b) if a <= b else (b, a)

    def shown(self, key: str) -> bool:
        """Whether a row of this canonical key is shown (not deleted by a correction)."""
        return key not in self.edits.hidden

    def shown_pair(self, a: str, b: str) -> bool:
        return a != b and self.shown(a) and self.shown(b) and (a, b) not in self.edits.hidden_pairs

    @cached_property
    def _aliases_of(self) -> dict[str, list[str]]:
        # members() is asked for every touched key: one pass over the map, not one per key
        grouped: dict[str, list[str]] = defaultdict(list)
        for alias, canon in self.canonical.items():
            grouped[canon].append(alias)
        return dict(grouped)

    @cached_property
    def _splits_from(self) -> dict[str, list]:
        grouped: dict[str, list] = defaultdict(list)
        for rule in self.edits.splits:
            grouped[rule.source].append(rule)
        return dict(grouped)

    @cached_property
    def _split_sources(self) -> dict[str, set[str]]:
        grouped: dict[str, set[str]] = defaultdict(set)
        for rule in self.edits.splits:
            grouped[rule.target].add(rule.source)
        return dict(grouped)


def with_edits(canonical: Mapping[str, str], edits: KeyEdits) -> AliasMap:
    """Resolution's merges and the name links (``canonical``) with the corrections' edits laid over:
    a raw key goes to its canonical key (itself when pinned), then where the edits moved that."""
    if not edits:
        return AliasMap(canonical)

    def final(raw: str) -> str:
        base = raw if raw in edits.pinned else canonical.get(raw, raw)
        return edits.moved.get(base, base)

    domain = set(canonical) | set(canonical.values()) | set(edits.moved) | edits.pinned
    return AliasMap({raw: final(raw) for raw in domain if final(raw) != raw}, edits)


NO_ALIASES = AliasMap()


NAME_LINK_KIND = "name_link"
_NAME_DOTS = "·•‧・"


def load_aliases(store: DocStore, tenant: str, kb_id: str) -> AliasMap:
    merges, links, edits = stored_keys(store, tenant, kb_id)
    return with_edits(with_name_links(merges, links), edits)


def stored_merges(store: DocStore, tenant: str, kb_id: str) -> tuple[dict[str, str], dict[str, str]]:
    """Resolution's merges (alias -> canonical key) and the stored name links, read in one scan."""
    merges, links, _ = stored_keys(store, tenant, kb_id)
    return merges, links


def stored_keys(store: DocStore, tenant: str, kb_id: str) -> tuple[dict[str, str], dict[str, str], KeyEdits]:
    """Resolution's merges (alias -> canonical key), the stored name links and the corrections' key
    edits, read in one scan."""
    from kbgraph.graph.resolution import Decision, plan_merges

    decisions: list[Decision] = []
    links: dict[str, str] = {}
    corrections: list[Correction] = []
    kinds = [ResolutionDecision.KIND, NAME_LINK_KIND, CORRECTION_KIND]
    for d in store.scan(tenant, [kb_id], [any_of("knowledge_graph_kwd", kinds)]):
        if d["knowledge_graph_kwd"] == NAME_LINK_KIND:
            links[d["key_a_kwd"]] = d["key_b_kwd"]
        elif d["knowledge_graph_kwd"] == CORRECTION_KIND:
            corrections.append(Correction.from_doc(d))
        else:
            decision = ResolutionDecision.from_doc(d)
            decisions.append(Decision(decision.key_a, decision.key_b, decision.same))
    return plan_merges(decisions), links, fold(corrections)


def with_name_links(canonical: Mapping[str, str], links: Mapping[str, str]) -> dict[str, str]:
    """Resolution's merges with the name links added: a short form goes to its full name's canonical
    key; one that resolution already groups keeps resolution's group (the model saw the two)."""
    out = dict(canonical)
    grouped = set(canonical) | set(canonical.values())
    for short, full in sorted(links.items()):
        target = out.get(full, full)
        if short not in grouped and target != short:
            out[short] = target
    return out


def name_link_doc(kb_id: str, short: str, full: str) -> dict:
    return {"id": stable_id(NAME_LINK_KIND, kb_id, short), "kb_id": kb_id, "knowledge_graph_kwd": NAME_LINK_KIND,
            "key_a_kwd": short, "key_b_kwd": full, "same_int": 1, "available_int": 0}


def name_links(person_mentions: Mapping[str, int], mentions: Mapping[str, int]) -> dict[str, str]:
    """Short key -> the one full name it stands for, from the knowledge base's keys.

    ``person_mentions``: every key with mentions typed as a person, and how many;
    ``mentions``: every mention of the short keys among them (any type). A short form is a one-word
    key that is a person in most of its mentions ("jennifer"), or the last part of a transliterated
    Chinese name ("罗迪奇" of "亚历山大·罗迪奇"); its full name is a person's key of two to four words
    that starts or ends with it, or the dotted name it ends. Linked only when exactly one full name
    of the knowledge base fits: with "Jennifer Moore" and "Jennifer Lopez" both known, "Jennifer"
    stays itself (precision first)."""
    by_part: dict[str, set[str]] = defaultdict(set)
    for key in person_mentions:
        words = key.split()
        if 2 <= len(words) <= 4 and all(w[:1].isalpha() for w in words):
            by_part[words[0]].add(key)
            by_part[words[-1]].add(key)
        elif len(words) == 1 and any(d in key for d in _NAME_DOTS):
            parts = [p for p in key.translate({ord(d): "·" for d in _NAME_DOTS}).split("·") if len(p) >= 2]
            for part in {parts[0], parts[-1]} if parts else ():
                by_part[part].add(key)
    links: dict[str, str] = {}
    for short, count in person_mentions.items():
        fulls = by_part.get(short, set())
        if " " in short or len(short) < 2 or len(fulls) != 1 or count * 2 <= mentions.get(short, count):
            continue
        links[short] = next(iter(fulls))
    return links


def kb_name_links(typed: Mapping[str, Mapping[str, int]], person: str, place: str) -> dict[str, str]:
    """Every name link of a knowledge base, from its keys' mentions by type (key -> type -> count):
    first names (``name_links``) and, for the other names, short forms and spelling variants
    (``short_forms.short_form_links``). A key both would link keeps its first-name link."""
    totals = {key: sum(by_type.values()) for key, by_type in typed.items()}
    main = {key: _main_type(by_type, person, place) for key, by_type in typed.items() if by_type}
    people = {key: by_type[person] for key, by_type in typed.items() if person and by_type.get(person)}
    links = short_form_links(totals, main, person, place)
    links.update(name_links(people, totals))
    return links


def _main_type(by_type: Mapping[str, int], person: str, place: str) -> str:
    """A key's type for the short-form rules: a person or a place when a third of its mentions say so
    (Boston read now as a band, now as the city, is a place: never a short form), else its commonest."""
    total = sum(by_type.values())
    for kind in (place, person):
        if kind and by_type.get(kind, 0) * 3 >= total:
            return kind
    return max(by_type.items(), key=lambda item: (item[1], item[0]))[0]
