"""The post-processing every extraction method shares: entity types mapped, duplicates merged.

Choices the rest of kbgraph relies on (documented here because they shape the graph):

* Types outside the knowledge base's ``entity_types`` are **kept**, not dropped (RAGFlow drops them
  and loses the entity together with every relation that touches it). A type is matched to an
  allowed one case-insensitively, then through a small synonym table ("location" -> "geo" when
  "geo" is allowed, "company" -> "organization"...); anything else is kept lower-cased.
* An entity with no type at all, and an endpoint a relation names without an entity record for it,
  get the type ``UNKNOWN_TYPE`` ("unknown"). The merge should prefer any real type over it.
* Entities are unique per chunk by key (``normalize_key``): duplicates (gleaning often repeats
  records) are merged: first surface name, first known type, distinct descriptions joined with a
  newline, the highest weight. Relations are undirected and unique per unordered key pair, merged
  the same way, keywords unioned.
* Dropped: entities whose key is empty; relations with an empty endpoint or both endpoints equal.
  ``ChunkExtraction.dropped`` counts these together with the parser's unreadable records.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from kbgraph.graph.extract.base import UNKNOWN_TYPE, ChunkExtraction, ExtractedEntity, ExtractedRelation
from kbgraph.graph.keys import clean_name, normalize_key


# --- entity types -----------------------------------------------------------------------------

# canonical name -> words that mean the same thing; used only when the canonical name is allowed
_TYPE_SYNONYMS: dict[str, tuple[str, ...]] = {
    "person": ("person", "people", "persons", "human", "individual", "character", "per", "人物", "人名", "人"),
    "organization": ("organization", "organisation", "org", "company", "institution", "corporation", "agency",
                     "group", "组织", "机构", "公司"),
    "geo": ("geo", "location", "place", "gpe", "loc", "country", "city", "region", "geography", "地点", "地名",
            "地理"),
    "location": ("location", "geo", "place", "gpe", "loc", "country", "city", "region", "地点", "地名"),
    "event": ("event", "events", "incident", "事件"),
    "category": ("category", "concept", "other", "misc", "thing", "类别", "概念"),
    "concept": ("concept", "category", "idea", "other", "misc", "概念"),
}


def map_entity_type(raw: str, allowed: Sequence[str]) -> str:
    """The allowed type ``raw`` means, else ``raw`` lower-cased (kept, never dropped)."""
    t = clean_name(raw).strip().strip('"\'').lower()
    t = re.sub(r"\s+", " ", t)
    if not t:
        return UNKNOWN_TYPE
    by_lower = {a.lower(): a.lower() for a in allowed}
    if t in by_lower:
        return by_lower[t]
    for canon, words in _TYPE_SYNONYMS.items():
        if canon in by_lower and t in words:
            return canon
    # "Person/Organization" or "geo, location": take the first part that maps
    parts = [p for p in re.split(r"[/,|;]", t) if p.strip()]
    if len(parts) > 1:
        for part in parts:
            mapped = map_entity_type(part, allowed)
            if mapped in by_lower:
                return mapped
    return t


# --- post-processing shared by all extractors ---------------------------------------------------


def _clean_weight(w: float) -> float:
    return w if isinstance(w, (int, float)) and math.isfinite(w) and w > 0 else 1.0


def _surface_from_text(name: str, text: str) -> str:
    """GraphRAG-style prompts make models shout names ("EBENEZER SCROOGE"); when the chunk spells
    the name in another case, use the chunk's spelling so display names read naturally."""
    if not text or not name.isupper() or len(name) < 2:
        return name
    m = re.search(re.escape(name), text, re.IGNORECASE)
    return m.group(0) if m else name


def _join(a: str, b: str) -> str:
    if not b or b in a:
        return a
    if not a or a in b:
        return b
    return f"{a}\n{b}"


def finalize(entities: Sequence[ExtractedEntity], relations: Sequence[ExtractedRelation],
             entity_types: Sequence[str], text: str = "", dropped: int = 0, llm_calls: int = 0) -> ChunkExtraction:
    """Apply the shared rules above to one chunk's raw records."""
    by_key: dict[str, ExtractedEntity] = {}
    for ent in entities:
        name = _surface_from_text(clean_name(ent.name), text)
        key = normalize_key(name)
        if not key:
            dropped += 1
            continue
        etype = map_entity_type(ent.type, entity_types)
        desc = (ent.description or "").strip()
        weight = _clean_weight(ent.weight)
        cur = by_key.get(key)
        if cur is None:
            by_key[key] = ExtractedEntity(name=name, type=etype, description=desc, weight=weight)
            continue
        if cur.type == UNKNOWN_TYPE:
            cur.type = etype
        cur.description = _join(cur.description, desc)
        cur.weight = max(cur.weight, weight)

    rel_by_pair: dict[tuple[str, str], ExtractedRelation] = {}
    for rel in relations:
        src = _surface_from_text(clean_name(rel.source), text)
        tgt = _surface_from_text(clean_name(rel.target), text)
        sk, tk = normalize_key(src), normalize_key(tgt)
        if not sk or not tk or sk == tk:
            dropped += 1
            continue
        for key, name in ((sk, src), (tk, tgt)):
            if key not in by_key:
                by_key[key] = ExtractedEntity(name=name, type=UNKNOWN_TYPE, description="", weight=1.0)
        keywords: list[str] = []
        for kw in rel.keywords:
            kw = kw.strip().strip('"\'').strip()
            if kw and kw.lower() not in {k.lower() for k in keywords}:
                keywords.append(kw)
        desc = (rel.description or "").strip()
        weight = _clean_weight(rel.weight)
        pair = (sk, tk) if sk <= tk else (tk, sk)
        cur_rel = rel_by_pair.get(pair)
        if cur_rel is None:
            rel_by_pair[pair] = ExtractedRelation(source=by_key[sk].name, target=by_key[tk].name, description=desc,
                                                  keywords=keywords, weight=weight)
            continue
        cur_rel.description = _join(cur_rel.description, desc)
        seen = {k.lower() for k in cur_rel.keywords}
        cur_rel.keywords.extend(k for k in keywords if k.lower() not in seen)
        cur_rel.weight = max(cur_rel.weight, weight)
    return ChunkExtraction(entities=list(by_key.values()), relations=list(rel_by_pair.values()),
                           dropped=dropped, llm_calls=llm_calls)
