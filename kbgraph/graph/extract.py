"""Entity/relation extraction: the types every extractor returns, the dispatcher, and the
post-processing all methods share.

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
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from kbgraph.graph.keys import clean_name, normalize_key
from kbgraph.llm.base import CancelCheck, ChatModel, LLMNotConfigured, UsageLedger
from kbgraph.store.records import EntityMention, RelationMention

Method = Literal["general", "light", "nlp"]
METHODS: tuple[str, ...] = ("general", "light", "nlp")
UNKNOWN_TYPE = "unknown"
DEFAULT_ENTITY_TYPES: tuple[str, ...] = ("organization", "person", "geo", "event", "category")


class ExtractionError(RuntimeError):
    """Extraction of one chunk failed for good (e.g. the model's answer stayed unreadable).
    The pipeline marks that chunk failed and carries on with the others."""


@dataclass
class ExtractedEntity:
    name: str
    type: str
    description: str
    weight: float = 1.0


@dataclass
class ExtractedRelation:
    source: str
    target: str
    description: str
    keywords: list[str] = field(default_factory=list)
    weight: float = 1.0


@dataclass
class ChunkExtraction:
    entities: list[ExtractedEntity] = field(default_factory=list)
    relations: list[ExtractedRelation] = field(default_factory=list)
    dropped: int = 0
    llm_calls: int = 0

    def to_mentions(self, kb_id: str, doc_id: str, chunk_id: str) -> tuple[list[EntityMention], list[RelationMention]]:
        """The mention rows for this chunk (keys computed here, so callers never re-normalize)."""
        ents = [EntityMention(kb_id=kb_id, doc_id=doc_id, chunk_id=chunk_id, key=normalize_key(e.name), name=e.name,
                              type=e.type, description=e.description, weight=e.weight) for e in self.entities]
        rels = [RelationMention(kb_id=kb_id, doc_id=doc_id, chunk_id=chunk_id, src_key=normalize_key(r.source),
                                tgt_key=normalize_key(r.target), description=r.description,
                                keywords=list(r.keywords), weight=r.weight) for r in self.relations]
        return ents, rels


@runtime_checkable
class Extractor(Protocol):
    method: str

    def extract(self, text: str, *, cancel: CancelCheck | None = None) -> ChunkExtraction:
        ...


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


def build_extractor(method: str, chat: ChatModel | None, entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES,
                    language: str = "English", max_gleanings: int = 1, glean_min_tokens: int = 0,
                    glean_policy: str = "always", glean_missed_names: int = 2,
                    ledger: UsageLedger | None = None) -> Extractor:
    """The extractor for a knowledge base's ``method``: "general" | "light" (LLM) or "nlp" (no LLM)."""
    if method == "nlp":
        from kbgraph.graph.extract_nlp import NLPExtractor
        return NLPExtractor(entity_types=list(entity_types))
    if method in ("general", "light"):
        if chat is None:
            raise LLMNotConfigured(
                f"extraction method {method!r} needs a chat model, and none is configured; configure one "
                "(KBGRAPH_LLM_BASE_URL and KBGRAPH_LLM_MODEL) or use the LLM-free method 'nlp'")
        from kbgraph.graph.extract_llm import LLMExtractor
        return LLMExtractor(chat, method=method, entity_types=list(entity_types), language=language,
                            max_gleanings=max_gleanings, glean_min_tokens=glean_min_tokens,
                            glean_policy=glean_policy, glean_missed_names=glean_missed_names, ledger=ledger)
    raise ValueError(f"unknown extraction method {method!r}; expected one of {', '.join(METHODS)}")
