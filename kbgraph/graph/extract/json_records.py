"""Entity and relation records from a model's answer written as JSON instead of delimited tuples:
lists under an "entities"/"relationships" key (or their synonyms), single records told apart by
their keys, and lists of ``["entity", name, type, ...]`` rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kbgraph.graph.extract.base import ExtractedEntity, ExtractedRelation
from kbgraph.graph.extract.record_fields import (
    _ENTITY_TAGS, _IGNORED_TAGS, _RELATION_TAGS, DEFAULT_WEIGHT, _clean_field, _entity_from_fields,
    _relation_from_fields, _split_keywords, _untagged, _valid_name, parse_strength,
)

# takes a record (None: one that could not be read) and says whether it was readable
AddRecord = Callable[[ExtractedEntity | ExtractedRelation | None], bool]

_J_NAME = ("entity_name", "name", "entity", "title", "label", "id", "text")
_J_TYPE = ("entity_type", "type", "category", "label", "kind")
_J_DESC = ("description", "entity_description", "relationship_description", "desc", "summary", "definition")
_J_SRC = ("source", "src", "source_entity", "src_id", "source_name", "from", "head", "subject", "entity1")
_J_TGT = ("target", "tgt", "target_entity", "tgt_id", "target_name", "to", "tail", "object", "entity2")
_J_KW = ("keywords", "relationship_keywords", "keys", "tags")
_J_WEIGHT = ("weight", "strength", "relationship_strength", "score", "confidence")
_J_REL_LABEL = ("relation", "relationship", "predicate", "type", "label")


def _pick(d: dict[str, Any], names: tuple[str, ...], skip: str | None = None) -> tuple[str | None, Any]:
    for n in names:
        if n != skip and n in d and d[n] not in (None, "", []):
            return n, d[n]
    return None, None


def _json_kind(lower: dict[str, Any]) -> str | None:
    if _pick(lower, _J_SRC)[0] and _pick(lower, _J_TGT)[0]:
        return "relation"
    if _pick(lower, _J_NAME)[0]:
        return "entity"
    return None


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(_text(v) for v in value)
    return _clean_field(str(value)) if value is not None else ""


def _json_entity(item: Any) -> ExtractedEntity | None:
    if isinstance(item, str):
        name = _clean_field(item)
        return ExtractedEntity(name=name, type="", description="") if _valid_name(name) else None
    if not isinstance(item, dict):
        return None
    d = {str(k).lower(): v for k, v in item.items()}
    name_key, name = _pick(d, _J_NAME)
    if name_key is None:
        return None
    _, etype = _pick(d, _J_TYPE, skip=name_key)
    _, desc = _pick(d, _J_DESC)
    fields = [_text(name), _text(etype), _text(desc)]
    ent = _entity_from_fields(fields)
    _, w = _pick(d, _J_WEIGHT)
    if ent is not None and w is not None:
        ent.weight = parse_strength(str(w)) or DEFAULT_WEIGHT
    return ent


def _json_relation(item: Any) -> ExtractedRelation | None:
    if not isinstance(item, dict):
        return None
    d = {str(k).lower(): v for k, v in item.items()}
    _, src = _pick(d, _J_SRC)
    _, tgt = _pick(d, _J_TGT)
    _, desc = _pick(d, _J_DESC)
    if desc is None:
        _, desc = _pick(d, _J_REL_LABEL)
    _, kws = _pick(d, _J_KW)
    _, w = _pick(d, _J_WEIGHT)
    src_t, tgt_t = _text(src), _text(tgt)
    if not _valid_name(src_t) or not _valid_name(tgt_t):
        return None
    return ExtractedRelation(source=src_t, target=tgt_t, description=_text(desc), keywords=_split_keywords(kws),
                             weight=(parse_strength(str(w)) or DEFAULT_WEIGHT) if w is not None else DEFAULT_WEIGHT)


def walk_json(obj: Any, add: AddRecord, depth: int = 0) -> None:
    """Hand every record found in parsed JSON to ``add``."""
    if depth > 4:
        return
    if isinstance(obj, dict):
        lower = {str(k).lower(): v for k, v in obj.items()}
        lists = False
        for key, value in lower.items():
            if not isinstance(value, (list, dict)):
                continue  # {"relation": "nephew of"} is a field, not a list of relations
            if key in _ENTITY_TAGS or key in ("named_entities", "entity_list"):
                lists = True
                for item in value if isinstance(value, list) else [value]:
                    add(_json_entity(item))
            elif key in _RELATION_TAGS or key in ("relation_list", "links", "triples"):
                lists = True
                for item in value if isinstance(value, list) else [value]:
                    add(_json_relation(item))
        if lists:
            return
        kind = _json_kind(lower)
        if kind == "relation":
            add(_json_relation(obj))
        elif kind == "entity":
            add(_json_entity(obj))
        else:
            for value in lower.values():
                if isinstance(value, (dict, list)):
                    walk_json(value, add, depth + 1)
    elif isinstance(obj, list):
        for item in obj:
            if isinstance(item, (list, tuple)) and item and all(isinstance(x, (str, int, float)) for x in item):
                fields = [_clean_field(str(x)) for x in item]
                tag = fields[0].lower()
                if tag in _ENTITY_TAGS:
                    add(_entity_from_fields(fields[1:]))
                elif tag in _RELATION_TAGS:
                    add(_relation_from_fields(fields[1:]))
                elif tag not in _IGNORED_TAGS:
                    add(_untagged(fields))
            else:
                walk_json(item, add, depth + 1)
