"""A knowledge base's graph corrected and extended by its users: entities renamed, retyped,
described, merged, split and deleted, relations deleted, entities and relations added by hand,
curated graphs imported and removed, every correction listed and undoable.

Each operation checks what it names against the current graph (a name that is no entity, a rename
or merge that would fold two entities together: refused unless ``force``), then, under the
knowledge base's lock (the one indexing merges under, so neither loses the other's rows), stores the
correction, re-derives exactly the rows it changes (kbgraph.index.corrections) and refreshes the
graph's phases. The corrections themselves are stored rows the derivation honours
(kbgraph.graph.derive.corrections).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kbgraph.engine.core import EngineCore
from kbgraph.engine.errors import KBGraphError, did_you_mean
from kbgraph.graph.curated import CuratedEntity, CuratedGraph, CuratedRelation
from kbgraph.graph.derive.aliases import AliasMap, load_aliases
from kbgraph.graph.derive.corrections import Correction
from kbgraph.graph.keys import clean_name, normalize_key
from kbgraph.meta.schemas import KnowledgeBase
from kbgraph.store.base import eq
from kbgraph.store.records import Entity, entity_id, relation_id

if TYPE_CHECKING:
    from kbgraph.graph.derive.recompute import DeriveResult
    from kbgraph.index.context import KBContext


class CorrectionConflict(KBGraphError):
    """A correction that would fold two entities together, refused until confirmed (``force``)."""


@dataclass(frozen=True)
class CorrectionOutcome:
    """A correction made (or undone) and how many rows it changed."""

    correction: Correction
    entities_changed: int = 0
    relations_changed: int = 0
    key: str | None = None  # the entity the correction leaves (renamed, merged, set, added), if one

    def to_dict(self) -> dict[str, Any]:
        c = self.correction
        return {**correction_dict(c), "entities_changed": self.entities_changed,
                "relations_changed": self.relations_changed, "entity_key": self.key}


def correction_dict(c: Correction) -> dict[str, Any]:
    return {"id": c.seq, "op": c.op, "params": dict(c.params), "summary": c.summary(), "who": c.who, "at": c.at,
            "undone": c.undone, "undone_by": c.undone_by, "undone_at": c.undone_at}


class GraphCorrections(EngineCore):
    """The corrections part of ``Engine``."""

    def corrections(self, kb_name: str) -> list[Correction]:
        from kbgraph.index.corrections import list_corrections

        return list_corrections(self.context(self.kb(kb_name)))  # listed while the graph is off too

    def rename_entity(self, kb_name: str, entity: str, name: str, *, force: bool = False,
                      who: str = "") -> CorrectionOutcome:
        """Give an entity a new name; onto another entity's name only with ``force`` (a merge)."""
        kb = self._graph_kb(kb_name)
        ctx, aliases = self._state(kb)
        row = self._entity(ctx, aliases, entity)
        name = clean_name(name)
        target = normalize_key(name)
        if not target:
            raise KBGraphError(f"{name!r} is no usable entity name")
        other = self._existing(ctx, aliases, target)
        if other is not None and other.key != row.key and not force:
            raise CorrectionConflict(f"an entity named {other.name!r} exists already: renaming {row.name!r} to "
                                     f"{name!r} merges the two; confirm with force (--force)")
        if other is not None and other.key not in (row.key, target):  # the name merged into another entity
            params = {"keys": sorted({row.key, other.key}), "into": other.key, "name": name}
            return self._key_correction(kb, "merge", params, who, other.key)
        return self._key_correction(kb, "rename", {"key": row.key, "name": name}, who, target)

    def set_entity(self, kb_name: str, entity: str, *, type: str | None = None, description: str | None = None,
                   who: str = "") -> CorrectionOutcome:
        kb = self._graph_kb(kb_name)
        ctx, aliases = self._state(kb)
        row = self._entity(ctx, aliases, entity)
        params: dict[str, Any] = {"key": row.key}
        if type is not None:
            if not type.strip():
                raise KBGraphError("an entity type cannot be empty")
            params["type"] = type.strip()
        if description is not None:
            params["description"] = description.strip()
        if len(params) == 1:
            raise KBGraphError("nothing to set: give a type or a description")
        return self._key_correction(kb, "set", params, who, row.key)

    def merge_entities(self, kb_name: str, entities: Sequence[str], into: str | None = None, *,
                       force: bool = False, who: str = "") -> CorrectionOutcome:
        """Merge entities into one, named ``into`` (one of them, or a new name; the first by default).
        Entities of different types, or ``into`` naming another existing entity, need ``force``."""
        kb = self._graph_kb(kb_name)
        ctx, aliases = self._state(kb)
        rows = {r.key: r for r in (self._entity(ctx, aliases, e) for e in entities)}
        name = clean_name(into) if into else next(iter(rows.values())).name if rows else ""
        target = normalize_key(name)
        if not target:
            raise KBGraphError(f"{into!r} is no usable entity name")
        other = self._existing(ctx, aliases, target)
        if other is not None and other.key not in rows:
            if not force:
                raise CorrectionConflict(f"an entity named {other.name!r} exists already and is not among those "
                                         "merged; confirm with force (--force) to merge it too")
            rows[other.key] = other
        if len(set(rows) | {target}) < 2:
            raise KBGraphError("a merge needs at least two entities")
        from kbgraph.graph.derive.entities import UNTYPED  # derivation's modules stay off the query path

        types = sorted({r.type for r in rows.values() if r.type.lower() not in UNTYPED})
        if len(types) > 1 and not force:
            raise CorrectionConflict(f"the entities have different types ({', '.join(types)}); confirm with force "
                                     "(--force) to merge them anyway")
        params: dict[str, Any] = {"keys": sorted(rows), "into": target}
        if target not in rows or name not in (rows[target].name, target):  # a new name, not the entity's own
            params["name"] = name
        return self._key_correction(kb, "merge", params, who, target)

    def split_entity(self, kb_name: str, entity: str, *, names: Sequence[str] = (), docs: Sequence[str] = (),
                     new_name: str | None = None, force: bool = False, who: str = "") -> CorrectionOutcome:
        """Separate part of an entity: the mentions under some of its names (its own entities again,
        or one named ``new_name``), or those in some documents (an entity named ``new_name``)."""
        kb = self._graph_kb(kb_name)
        ctx, aliases = self._state(kb)
        row = self._entity(ctx, aliases, entity)
        if bool(names) == bool(docs):
            raise KBGraphError("split by names or by documents (one of the two)")
        params: dict[str, Any] = {"key": row.key}
        if names:
            params["names"] = self._split_names(aliases, row, names)
        else:
            if not new_name:
                raise KBGraphError("a split by documents needs the name of the entity split off")
            params["docs"] = self._split_docs(kb, row, docs)
        if new_name:
            name = clean_name(new_name)
            target = normalize_key(name)
            if not target or target == row.key:
                raise KBGraphError(f"the entity split off needs a name other than {row.name!r}")
            other = self._existing(ctx, aliases, target)
            if other is not None and not force:
                raise CorrectionConflict(f"an entity named {other.name!r} exists already: the part split off would "
                                         "join it; confirm with force (--force)")
            params["name"] = name
        return self._key_correction(kb, "split", params, who, row.key)

    def delete_entity(self, kb_name: str, entity: str, *, who: str = "") -> CorrectionOutcome:
        kb = self._graph_kb(kb_name)
        ctx, aliases = self._state(kb)
        return self._key_correction(kb, "delete_entity", {"key": self._entity(ctx, aliases, entity).key}, who)

    def delete_relation(self, kb_name: str, source: str, target: str, *, who: str = "") -> CorrectionOutcome:
        kb = self._graph_kb(kb_name)
        ctx, aliases = self._state(kb)
        a, b = sorted((self._entity(ctx, aliases, source).key, self._entity(ctx, aliases, target).key))
        if not ctx.store.get(ctx.tenant, [ctx.kb_id], [relation_id(ctx.kb_id, a, b)], fields=["id"]):
            raise KBGraphError(f"there is no relation between {source!r} and {target!r}")
        return self._key_correction(kb, "delete_relation", {"src": a, "tgt": b}, who)

    def add_entity(self, kb_name: str, name: str, type: str = "unknown", description: str = "", *,
                   force: bool = False, who: str = "") -> CorrectionOutcome:
        """An entity added by hand (a curated mention of it); onto an existing one only with ``force``
        (its description then gains this one)."""
        kb = self._graph_kb(kb_name)
        ctx, aliases = self._state(kb)
        name = clean_name(name)
        if not normalize_key(name):
            raise KBGraphError(f"{name!r} is no usable entity name")
        other = self._existing(ctx, aliases, normalize_key(name))
        if other is not None and not force:
            raise CorrectionConflict(f"an entity named {other.name!r} exists already; change it with `graph set`, "
                                     "or confirm with force (--force) to add this as a curated mention of it")
        entity = CuratedEntity(name, type.strip() or "unknown", description.strip())
        params = {"name": entity.name, "type": entity.type, "description": entity.description}
        return self._curated(kb, "add_entity", params, who, CuratedGraph([entity], []),
                             aliases.canon(normalize_key(entity.name)))

    def add_relation(self, kb_name: str, source: str, target: str, description: str = "",
                     keywords: Sequence[str] = (), weight: float = 1.0, *, who: str = "") -> CorrectionOutcome:
        """A relation added by hand between two entities of the graph."""
        kb = self._graph_kb(kb_name)
        ctx, aliases = self._state(kb)
        a, b = self._entity(ctx, aliases, source), self._entity(ctx, aliases, target)
        if a.key == b.key:
            raise KBGraphError("a relation needs two different entities")
        if not weight > 0:
            raise KBGraphError(f"a relation's weight must be above 0 (not {weight})")
        relation = CuratedRelation(a.name, b.name, description.strip(), tuple(k.strip() for k in keywords if k.strip()),
                                   float(weight))
        params = {"src": a.name, "tgt": b.name, "description": relation.description,
                  "keywords": list(relation.keywords), "weight": relation.weight}
        return self._curated(kb, "add_relation", params, who, CuratedGraph([], [relation]), a.key)

    def import_graph(self, kb_name: str, graph: CuratedGraph, source: str, *, who: str = "") -> CorrectionOutcome:
        """Import a curated graph as the source ``source`` (an earlier import of it is replaced)."""
        from kbgraph.index.curated import remove_source, write_curated

        kb = self._graph_kb(kb_name)
        source = " ".join(source.split())
        if not source:
            raise KBGraphError("a curated import needs a source name")
        if not graph.entities and not graph.relations:
            raise KBGraphError(f"the curated graph {source!r} holds no entity and no relation")
        params = {"source": source, "entities": len(graph.entities), "relations": len(graph.relations)}

        def write(ctx: KBContext, seq: int) -> DeriveResult:
            self._undo_imports(ctx, source, who)
            removed = remove_source(ctx, source)
            change = write_curated(ctx, source, graph)
            change.entities_written += removed.entities_written + removed.entities_removed
            change.relations_written += removed.relations_written + removed.relations_removed
            return change

        return self._run(kb, "import", params, who, write)

    def remove_import(self, kb_name: str, source: str, *, who: str = "") -> CorrectionOutcome:
        """Remove a curated source as a whole (the undo of its import)."""
        from kbgraph.index.corrections import list_corrections

        kb = self._graph_kb(kb_name)
        imports = [c for c in list_corrections(self.context(kb)) if c.op == "import" and not c.undone]
        found = [c for c in imports if c.params.get("source") == source]
        if not found:
            known = sorted({c.params.get("source", "") for c in imports})
            raise KBGraphError(f"no curated source {source!r} in knowledge base {kb.name!r}"
                               f"{did_you_mean(source, known)} (imported: {', '.join(known) or 'none'})")
        return self.undo_correction(kb_name, found[-1].seq, who=who)

    def undo_correction(self, kb_name: str, seq: int | None = None, *, who: str = "") -> CorrectionOutcome:
        """Undo correction ``seq`` (the last one not undone when None)."""
        from kbgraph.index.corrections import CorrectionError, find_correction, undo_correction
        from kbgraph.index.repair import changing_rows, refresh_recorded

        kb = self._graph_kb(kb_name)
        ctx = self.context(kb)
        with self.kb_lock(kb.id):
            try:
                correction = find_correction(ctx, seq)
            except CorrectionError as exc:
                raise KBGraphError(str(exc)) from None
            with changing_rows(self.meta, kb, "a correction's undo"):
                undone, change = undo_correction(ctx, correction, who, self._remover(ctx))
            refresh_recorded(ctx, self.meta, kb)
        return CorrectionOutcome(undone, _entities(change), _relations(change))

    def curated_names(self, kb_name: str) -> dict[str, str]:
        """The knowledge base's curated sources as documents: pseudo-document id -> "curated: <source>"."""
        from kbgraph.graph.derive.corrections import curated_doc_id
        from kbgraph.index.curated import live_sources, source_name

        kb = self.kb(kb_name)
        if not kb.graph.enabled:
            return {}
        return {curated_doc_id(kb.id, s): source_name(s) for s in live_sources(self.context(kb))}

    def similar_entities(self, kb_name: str, entity: str, limit: int = 8) -> list[Entity]:
        """Entities whose names share a word with this one's, or look like it: candidates to merge
        ("Scrooge" beside "Ebenezer Scrooge")."""
        from kbgraph.graph.correction_candidates import similar_entities

        kb = self._graph_kb(kb_name)
        ctx, aliases = self._state(kb)
        return similar_entities(self.store, self.tenant, kb.id, self._entity(ctx, aliases, entity), limit)

    # --- the parts every operation shares

    def _graph_kb(self, kb_name: str) -> KnowledgeBase:
        kb = self.kb(kb_name)
        if not kb.graph.enabled:
            raise KBGraphError(f"knowledge base {kb_name!r} has no knowledge graph to correct; switch it on with "
                               f"`kbgraph kb set {kb_name} --graph nlp`")
        return kb

    def _state(self, kb: KnowledgeBase) -> tuple[KBContext, AliasMap]:
        ctx = self.context(kb)
        return ctx, load_aliases(ctx.store, ctx.tenant, ctx.kb_id)

    def _existing(self, ctx: KBContext, aliases: AliasMap, key: str) -> Entity | None:
        found = ctx.store.get(ctx.tenant, [ctx.kb_id], [entity_id(ctx.kb_id, aliases.canon(key))])
        return Entity.from_doc(found[0]) if found else None

    def _entity(self, ctx: KBContext, aliases: AliasMap, name: str) -> Entity:
        found = self._existing(ctx, aliases, normalize_key(name or ""))
        if found is None:
            names = [d.get("name_kwd", "") for d in ctx.store.scan(
                ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", Entity.KIND)], fields=["name_kwd"])]
            raise KBGraphError(f"no entity named {name!r} in the graph{did_you_mean(name or '', names)}")
        return found

    def _split_names(self, aliases: AliasMap, row: Entity, names: Sequence[str]) -> list[str]:
        members = aliases.members(row.key) - {row.key}
        keys = sorted({normalize_key(n) for n in names})
        own = [n for n in names if normalize_key(n) == row.key]
        if own:
            raise KBGraphError(f"{own[0]!r} is the entity's own name: split off its other names instead")
        foreign = [k for k in keys if k not in members]
        if foreign:
            known = sorted(a for a in row.aliases if normalize_key(a) in members)
            raise KBGraphError(f"{', '.join(map(repr, foreign))} {'is' if len(foreign) == 1 else 'are'} not merged "
                               f"into {row.name!r} (names merged into it: {', '.join(known) or 'none'})")
        return keys

    def _split_docs(self, kb: KnowledgeBase, row: Entity, docs: Sequence[str]) -> list[str]:
        ids: list[str] = []
        for name in docs:
            doc = self.meta.find_document(kb.id, name)
            if doc is None or doc.id not in row.doc_ids:
                cited = [d.name for d in self.meta.list_documents(kb.id, limit=None) if d.id in row.doc_ids]
                raise KBGraphError(f"{row.name!r} is not found in a document {name!r} "
                                   f"(its documents: {', '.join(cited) or 'none'})")
            ids.append(doc.id)
        return sorted(set(ids))

    def _key_correction(self, kb: KnowledgeBase, op: str, params: dict, who: str,
                        key: str | None = None) -> CorrectionOutcome:
        from kbgraph.index.corrections import record_key_correction

        return self._run(kb, op, params, who, None, record_key_correction, key)

    def _curated(self, kb: KnowledgeBase, op: str, params: dict, who: str, graph: CuratedGraph,
                 key: str | None) -> CorrectionOutcome:
        from kbgraph.index.curated import MANUAL_SOURCE, write_curated

        return self._run(kb, op, params, who, lambda ctx, seq: write_curated(ctx, MANUAL_SOURCE, graph, str(seq)),
                         key=key)

    def _run(self, kb: KnowledgeBase, op: str, params: dict, who: str,
             write: Callable[[KBContext, int], DeriveResult] | None, record: Callable | None = None,
             key: str | None = None) -> CorrectionOutcome:
        from kbgraph.index.corrections import record_curated_correction
        from kbgraph.index.repair import changing_rows, refresh_recorded

        ctx = self.context(kb)
        with self.kb_lock(kb.id):
            with changing_rows(self.meta, kb, f"a correction ({op})"):
                if record is not None:
                    correction, change = record(ctx, op, params, who)
                else:
                    correction, change = record_curated_correction(ctx, op, params, who, lambda seq: write(ctx, seq))
            refresh_recorded(ctx, self.meta, kb)
        return CorrectionOutcome(correction, _entities(change), _relations(change), key)

    def _remover(self, ctx: KBContext) -> Callable[[Correction], DeriveResult]:
        from kbgraph.index.curated import remove_added, remove_source

        def remove(c: Correction) -> DeriveResult:
            p = c.params
            if c.op == "import":
                return remove_source(ctx, p["source"])
            if c.op == "add_entity":
                graph = CuratedGraph([CuratedEntity(p["name"], p["type"], p["description"])], [])
            else:
                graph = CuratedGraph([], [CuratedRelation(p["src"], p["tgt"], p["description"], tuple(p["keywords"]),
                                                          p["weight"])])
            return remove_added(ctx, graph, str(c.seq))

        return remove

    def _undo_imports(self, ctx: KBContext, source: str, who: str) -> None:
        """Earlier imports of a source a new import replaces count as undone."""
        from kbgraph.index.corrections import list_corrections, mark_undone

        for c in list_corrections(ctx):
            if c.op == "import" and not c.undone and c.params.get("source") == source:
                mark_undone(ctx, c, who)


def _entities(change: DeriveResult) -> int:
    return change.entities_written + change.entities_removed


def _relations(change: DeriveResult) -> int:
    return change.relations_written + change.relations_removed
