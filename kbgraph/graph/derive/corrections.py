"""A knowledge base's corrections (renames, new types and descriptions, merges, splits, deletions,
entities and relations added by hand) as facts the derivation honours.

Each correction is one stored row (``graph_correction``: who, when, what, and whether it was undone)
in the knowledge base's store, beside the resolution decisions: it moves with the tenant's rows and
is read by every derivation that reads the decisions. The live corrections, in their order, fold
into ``KeyEdits``: keys moved to other keys (merges, renames, names split off), documents' mentions
of a key routed to a new key (a split by documents), a key's name, type or description set, keys and
pairs hidden (deletions). ``aliases.AliasMap`` lays the edits over resolution's merges and the name
links, so a row is derived from its mentions, then edited, whenever it is derived: the graph after
any adds, deletes and rebuilds equals one in which the corrections held from the start.

Entities and relations added by hand, and curated imports, are mentions of a curated source
(``curated_doc_id``): derivation treats them as any document's mentions; their corrections only
record them, so that undo can remove them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kbgraph.graph.keys import normalize_key
from kbgraph.store.records import stable_id

CORRECTION_KIND = "graph_correction"
# the operations a correction row holds; the first ones change how rows are derived, the others
# added curated mentions (see kbgraph/index/corrections.py)
KEY_OPS = ("rename", "set", "merge", "split", "delete_entity", "delete_relation")
CURATED_OPS = ("add_entity", "add_relation", "import")
OPS = KEY_OPS + CURATED_OPS
CURATED_PREFIX = "curated-"


def curated_doc_id(kb_id: str, source: str) -> str:
    """The pseudo-document id of a curated source of a knowledge base (its mentions and chunks)."""
    return CURATED_PREFIX + stable_id("curated", kb_id, source)[:24]


def is_curated(doc_id: str) -> bool:
    return doc_id.startswith(CURATED_PREFIX)


@dataclass(frozen=True)
class Correction:
    """One correction of a knowledge base's graph: ``seq`` orders them, ``params`` say what."""

    KIND: ClassVar[str] = CORRECTION_KIND

    kb_id: str
    seq: int
    op: str
    params: Mapping[str, Any]
    who: str = ""
    at: float = 0.0
    undone: bool = False
    undone_by: str = ""
    undone_at: float = 0.0

    @property
    def id(self) -> str:
        return stable_id(CORRECTION_KIND, self.kb_id, str(self.seq))

    def to_doc(self) -> dict:
        return {"id": self.id, "kb_id": self.kb_id, "knowledge_graph_kwd": CORRECTION_KIND, "seq_int": self.seq,
                "op_kwd": self.op, "params_with_weight": dict(self.params), "who_kwd": self.who,
                "created_flt": self.at, "undone_int": int(self.undone), "undone_by_kwd": self.undone_by,
                "undone_flt": self.undone_at, "available_int": 0}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Correction:
        return cls(kb_id=doc["kb_id"], seq=int(doc["seq_int"]), op=doc["op_kwd"],
                   params=dict(doc.get("params_with_weight") or {}), who=doc.get("who_kwd", ""),
                   at=float(doc.get("created_flt", 0.0)), undone=bool(doc.get("undone_int")),
                   undone_by=doc.get("undone_by_kwd", ""), undone_at=float(doc.get("undone_flt", 0.0)))

    def summary(self) -> str:
        """One line saying what the correction does."""
        p = self.params
        if self.op == "rename":
            return f"rename {p['key']!r} to {p['name']!r}"
        if self.op == "set":
            return f"set {', '.join(k for k in ('type', 'description') if k in p)} of {p['key']!r}"
        if self.op == "merge":
            return f"merge {', '.join(repr(k) for k in p['keys'])} into {p.get('name') or p['into']!r}"
        if self.op == "split":
            by = f"documents {', '.join(p['docs'])}" if p.get("docs") else f"names {', '.join(p['names'])}"
            return f"split {by} off {p['key']!r}" + (f" as {p['name']!r}" if p.get("name") else "")
        if self.op == "delete_entity":
            return f"delete entity {p['key']!r}"
        if self.op == "delete_relation":
            return f"delete relation {p['src']!r} -- {p['tgt']!r}"
        if self.op == "add_entity":
            return f"add entity {p['name']!r}"
        if self.op == "add_relation":
            return f"add relation {p['src']!r} -- {p['tgt']!r}"
        return f"import {p.get('source')!r} ({p.get('entities', 0)} entities, {p.get('relations', 0)} relations)"


@dataclass(frozen=True)
class SplitRule:
    """Mentions of entity ``source`` (canonical key) in these documents belong to ``target``."""

    source: str
    target: str
    docs: frozenset[str]


@dataclass
class KeyEdits:
    """What the live corrections do to keys: ``moved`` (key -> key, laid over resolution's canonical
    keys; its values are never its keys), ``pinned`` (keys resolution may no longer move: a user's
    word is final), ``splits``, ``names``/``types``/``descriptions`` set per canonical key,
    ``hidden`` entity keys and ``hidden_pairs``."""

    moved: dict[str, str] = field(default_factory=dict)
    pinned: set[str] = field(default_factory=set)
    splits: list[SplitRule] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)
    hidden: set[str] = field(default_factory=set)
    hidden_pairs: set[tuple[str, str]] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.moved or self.pinned or self.splits or self.names or self.types or self.descriptions
                    or self.hidden or self.hidden_pairs)

    def edited(self, key: str) -> bool:
        """Whether a row of this key is anything but the plain derivation of its mentions."""
        return (key in self.names or key in self.types or key in self.descriptions
                or any(key in (r.source, r.target) for r in self.splits))

    def move(self, keys: Iterable[str], target: str) -> None:
        """Every key of ``keys`` (canonical keys) becomes part of ``target``."""
        keys = set(keys) - {target}
        for alias, canon in list(self.moved.items()):
            if canon in keys:
                self.moved[alias] = target
        for key in keys:
            self.moved[key] = target
        self.moved.pop(target, None)
        self.pinned |= keys | {target}
        self.splits = [SplitRule(target if r.source in keys else r.source, target if r.target in keys else r.target,
                                 r.docs) for r in self.splits]
        self.splits = [r for r in self.splits if r.source != r.target]
        self.hidden_pairs = {_pair(target if a in keys else a, target if b in keys else b)
                             for a, b in self.hidden_pairs}
        self.hidden_pairs = {(a, b) for a, b in self.hidden_pairs if a != b}

    def stand_alone(self, key: str) -> None:
        """``key`` is its own entity again (out of whatever group merged it)."""
        self.moved.pop(key, None)
        self.pinned.add(key)


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def fold(corrections: Iterable[Correction]) -> KeyEdits:
    """The key edits of the live corrections, applied in their order."""
    edits = KeyEdits()
    for c in sorted(corrections, key=lambda c: c.seq):
        if not c.undone and c.op in KEY_OPS:
            _apply(edits, c.op, c.params)
    return edits


def _apply(edits: KeyEdits, op: str, p: Mapping[str, Any]) -> None:
    if op == "rename":
        key, target = p["key"], normalize_key(p["name"])
        if target != key:
            carried = {d: getattr(edits, d).pop(key) for d in ("types", "descriptions") if key in getattr(edits, d)}
            edits.move([key], target)
            for d, value in carried.items():
                getattr(edits, d).setdefault(target, value)
        edits.names[target] = p["name"]
    elif op == "set":
        if "type" in p:
            edits.types[p["key"]] = p["type"]
        if "description" in p:
            edits.descriptions[p["key"]] = p["description"]
    elif op == "merge":
        edits.move(p["keys"], p["into"])
        if p.get("name"):
            edits.names[p["into"]] = p["name"]
    elif op == "split":
        _apply_split(edits, p)
    elif op == "delete_entity":
        edits.hidden.add(p["key"])
    elif op == "delete_relation":
        edits.hidden_pairs.add(_pair(p["src"], p["tgt"]))


def _apply_split(edits: KeyEdits, p: Mapping[str, Any]) -> None:
    target = normalize_key(p["name"]) if p.get("name") else ""
    if p.get("docs"):
        if target != p["key"]:  # onto its own key a split moves nothing (the engine refuses one)
            edits.splits.append(SplitRule(p["key"], target, frozenset(p["docs"])))
            edits.pinned.add(target)
    else:
        for name in p.get("names") or ():
            edits.stand_alone(name)
            if target and target != name:
                edits.move([name], target)
    if target and p.get("name"):
        edits.names.setdefault(target, p["name"])


def edited_keys(before: KeyEdits, after: KeyEdits) -> set[str]:
    """The canonical keys whose rows two sets of edits derive differently, beyond moved keys (which
    the alias maps' difference gives): names, types and descriptions set, splits, hidden keys, and
    the ends of hidden pairs."""
    keys: set[str] = set()
    for attr in ("names", "types", "descriptions"):
        old, new = getattr(before, attr), getattr(after, attr)
        keys |= {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
    for rule in set(before.splits) ^ set(after.splits):
        keys |= {rule.source, rule.target}
    keys |= before.hidden ^ after.hidden
    keys |= {k for pair in before.hidden_pairs ^ after.hidden_pairs for k in pair}
    keys |= before.pinned ^ after.pinned
    return keys
