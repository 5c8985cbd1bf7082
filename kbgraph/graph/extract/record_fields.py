"""One record's fields (name, type, description, strength...) as an entity or a relation.

The record formats a model may answer in (delimited tuples, output_parser.py; JSON,
json_records.py) both end here: fields cleaned of quotes and markdown, a strength read from
whatever the model wrote, a record without a tag told apart by its shape.
"""

from __future__ import annotations

import math
import re
from typing import Any

from kbgraph.graph.extract.base import ExtractedEntity, ExtractedRelation

DEFAULT_WEIGHT = 1.0
_MAX_NAME_CHARS = 200

_ENTITY_TAGS = frozenset({"entity", "entities", "node", "nodes"})
_RELATION_TAGS = frozenset({"relationship", "relationships", "relation", "relations", "edge", "edges", "rel"})
# records some prompts ask for and we do not use: skipped without counting them as dropped
_IGNORED_TAGS = frozenset({"content_keywords", "high_level_keywords", "low_level_keywords"})
_ALL_TAGS = sorted(_ENTITY_TAGS | _RELATION_TAGS | _IGNORED_TAGS, key=len, reverse=True)

_QUOTES = "\"'“”‘’`"
_NUMBER = re.compile(r"^[+-]?(\d+(?:\.\d*)?|\.\d+)$")
_FRACTION = re.compile(r"^(\d+(?:\.\d+)?)\s*(?:/|out of)\s*(\d+(?:\.\d+)?)$", re.IGNORECASE)
_PERCENT = re.compile(r"^(\d+(?:\.\d+)?)\s*%$")
_LABELLED = re.compile(r"^(?:relationship[_ ])?(?:strength|weight|score|confidence)\s*[:=]\s*(.+)$", re.IGNORECASE)
_STRENGTH_WORDS = frozenset({"high", "medium", "low", "strong", "weak", "moderate", "very high", "very low",
                             "very strong", "very weak", "none", "n/a", "unknown"})
_KEYWORD_SPLIT = re.compile(r"[,，;；、]")


def parse_strength(value: str) -> float | None:
    """A relation strength from "8", "0.8", "8/10", "80%", "strength: 7"; words like "high" give the
    default. None when the value does not look like a strength at all."""
    s = value.strip().strip(_QUOTES + "()*[] ").strip()
    m = _LABELLED.match(s)
    if m:
        s = m.group(1).strip().strip(_QUOTES + "()*[] ")
    low = s.lower()
    try:
        if _NUMBER.match(s):
            w = float(s)
        elif m := _FRACTION.match(s):
            w = 10.0 * float(m.group(1)) / float(m.group(2))
        elif m := _PERCENT.match(s):
            w = float(m.group(1)) / 10.0
        elif low in _STRENGTH_WORDS:
            return DEFAULT_WEIGHT
        else:
            return None
    except (ValueError, ZeroDivisionError):
        return DEFAULT_WEIGHT
    return w if math.isfinite(w) and w > 0 else DEFAULT_WEIGHT


def _clean_field(value: str) -> str:
    s = value.strip()
    prev = None
    while s != prev:
        prev = s
        s = s.strip().strip(_QUOTES).strip()
        if s.startswith("**") and s.endswith("**") and len(s) > 4:
            s = s[2:-2]
    return s


def _split_keywords(value: Any) -> list[str]:
    items = value if isinstance(value, (list, tuple)) else _KEYWORD_SPLIT.split(str(value or ""))
    out: list[str] = []
    for item in items:
        kw = _clean_field(str(item))
        if kw and kw not in out:
            out.append(kw)
    return out


def _valid_name(name: str) -> bool:
    return bool(name) and len(name) <= _MAX_NAME_CHARS and any(ch.isalnum() for ch in name)


def _entity_from_fields(fields: list[str]) -> ExtractedEntity | None:
    if not fields or not _valid_name(fields[0]):
        return None
    name, rest = fields[0], fields[1:]
    etype = rest[0] if rest else ""
    rest = rest[1:]
    weight = DEFAULT_WEIGHT
    if len(rest) >= 2 and (w := parse_strength(rest[-1])) is not None:
        weight, rest = w, rest[:-1]
    return ExtractedEntity(name=name, type=etype, description=" ".join(r for r in rest if r), weight=weight)


def _relation_from_fields(fields: list[str]) -> ExtractedRelation | None:
    if len(fields) < 2 or not _valid_name(fields[0]) or not _valid_name(fields[1]):
        return None
    rest = fields[2:]
    weight = DEFAULT_WEIGHT
    if rest and (w := parse_strength(rest[-1])) is not None:
        weight, rest = w, rest[:-1]
    keywords: list[str] = []
    if len(rest) >= 2:  # the light format: DESCRIPTION, KEYWORDS
        keywords, rest = _split_keywords(rest[-1]), rest[:-1]
    return ExtractedRelation(source=fields[0], target=fields[1], description=" ".join(r for r in rest if r),
                             keywords=keywords, weight=weight)


def _untagged(fields: list[str]) -> ExtractedEntity | ExtractedRelation | None:
    """A record whose tag is missing: guess the kind by its shape."""
    if len(fields) == 3 and parse_strength(fields[2]) is None:
        return _entity_from_fields(fields)
    if len(fields) in (4, 5) and parse_strength(fields[-1]) is not None:
        return _relation_from_fields(fields)
    return None
