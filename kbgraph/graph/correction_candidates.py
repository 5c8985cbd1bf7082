"""Entities a user may want to merge with one: those whose names share a word with its name (one
name inside the other: "Scrooge" and "Ebenezer Scrooge"), or that look alike by spelling."""

from __future__ import annotations

import difflib

from kbgraph.store.base import DocStore, SearchRequest, TextQuery, eq
from kbgraph.parse.tokenize import tokenize_query
from kbgraph.store.records import Entity

# name matches read before ranking: the best few of a word shared by many entities
_CANDIDATES = 50


def similar_entities(store: DocStore, tenant: str, kb_id: str, entity: Entity, limit: int = 8) -> list[Entity]:
    """Up to ``limit`` other entities, the likeliest same first: names containing this one's words
    (or contained in it) by mentions, then the others by spelling likeness."""
    tokens = tokenize_query(entity.name)
    if not tokens:
        return []
    hits = store.search(tenant, SearchRequest(
        kb_ids=[kb_id], where=[eq("knowledge_graph_kwd", Entity.KIND)],
        text=TextQuery(tokens=tokens, fields={"name_ltks": 1.0}), limit=_CANDIDATES)).hits
    others = [Entity.from_doc(h.doc) for h in hits if h.doc.get("entity_key_kwd") != entity.key]
    words = set(entity.key.split())

    def rank(other: Entity) -> tuple:
        theirs = set(other.key.split())
        nested = bool(words) and (words <= theirs or theirs <= words)
        likeness = difflib.SequenceMatcher(None, entity.key, other.key).ratio()
        # among names holding this one's words, the most mentioned is likeliest the full name
        return (not nested, -other.mention_count if nested else 0, -round(likeness, 3), other.key)

    return sorted(others, key=rank)[:limit]
