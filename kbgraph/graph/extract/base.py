"""What every extractor returns and the interface it implements.

An extractor turns one chunk's text into a ``ChunkExtraction``: entities and relations with their
descriptions and weights. Three methods exist ("general" and "light" ask an LLM, llm.py; "nlp"
needs none, nlp/); factory.py builds the one a knowledge base asks for, and finalize.py applies
the rules they all share. These types sit apart from all of them so that each can import them
without importing the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kbgraph.graph.keys import normalize_key
from kbgraph.llm.base import CancelCheck
from kbgraph.store.records import EntityMention, RelationMention

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
