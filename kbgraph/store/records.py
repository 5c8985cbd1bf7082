"""The kinds of record kbgraph stores, and how each maps to a DocStore document.

Field names follow the suffix convention of ``kbgraph.store.base``. Chunks have no
``knowledge_graph_kwd``; every graph record names its kind there. ``available_int`` is 1 for rows
plain chunk search may return and 0 for everything else.

Ids are deterministic (DESIGN.md principle 2): a retried or resumed task rewrites the same rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, Sequence

import numpy as np

from kbgraph.store.base import Doc, vector_field

# an embedding as stored: a list of floats, or (as the indexing steps produce them) a float32 array row
Vector = list[float] | np.ndarray


def stable_id(*parts: str) -> str:
    """A 32-hex-digit id from its parts; the separator keeps ("ab","c") apart from ("a","bc")."""
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=16).hexdigest()


def chunk_id(doc_id: str, position: int) -> str:
    return stable_id("chunk", doc_id, str(position))


# a merge and a refresh ask for each entity's and relation's id a dozen times (``Entity.id``)
@lru_cache(maxsize=1 << 16)
def entity_id(kb_id: str, key: str) -> str:
    return stable_id("entity", kb_id, key)


@lru_cache(maxsize=1 << 16)
def relation_id(kb_id: str, src_key: str, tgt_key: str) -> str:
    """Relations are undirected: (a, b) and (b, a) are one relation."""
    low, high = sorted((src_key, tgt_key))
    return stable_id("relation", kb_id, low, high)


def entity_mention_id(chunk: str, key: str) -> str:
    return stable_id("entity_mention", chunk, key)


def relation_mention_id(chunk: str, src_key: str, tgt_key: str) -> str:
    low, high = sorted((src_key, tgt_key))
    return stable_id("relation_mention", chunk, low, high)


def report_id(kb_id: str, level: int, member_keys: Sequence[str]) -> str:
    return stable_id("community_report", kb_id, str(level), *sorted(member_keys))


def graph_meta_id(kb_id: str) -> str:
    return stable_id("graph_meta", kb_id)


# an entity's score row is its row's id with this suffix: score rows then sort as their entities do
# (every entity id has the same length), so a listing of score rows ties as one of entity rows would
SCORE_SUFFIX = "_s"


def entity_score_id(entity_row_id: str) -> str:
    return entity_row_id + SCORE_SUFFIX


def scored_entity_id(score_row_id: str) -> str:
    """The id of the entity row a score row belongs to."""
    return score_row_id[:-len(SCORE_SUFFIX)] if score_row_id.endswith(SCORE_SUFFIX) else score_row_id


# Keyword and numeric fields of these records that no query filters, sorts or aggregates on. An engine
# may keep them out of its filter indexes (the embedded store does: each value is one more index entry,
# on a random page, to write per row); a condition on one must still give the same answer, only slower.
# (A field taken off this list needs its index entries rebuilt on the stores that left them out.)
UNFILTERED_FIELDS = frozenset({
    # graph rows
    "name_kwd", "src_name_kwd", "tgt_name_kwd", "chunk_id_kwd", "chunk_ids_kwd", "community_ids_kwd",
    "mention_count_int", "weight_flt", "embedded_int", "summary_pending_int",
    # community reports
    "title_kwd", "parent_kwd", "member_count_int", "graph_version_int", "input_hash_kwd",
    # chunks
    "docnm_kwd", "position_int", "page_num_int", "start_int", "end_int", "token_count_int", "create_timestamp_flt",
})


def _vector_fields(doc: Doc) -> Vector | None:
    for name, value in doc.items():
        if name.startswith("q_") and name.endswith("_vec"):
            return value
    return None


def _put_vector(doc: Doc, vector: Vector | Sequence[float] | None) -> None:
    if vector is not None:
        # an array stays an array (the stores take both); anything else becomes a list
        doc[vector_field(len(vector))] = vector if isinstance(vector, np.ndarray) else list(vector)


@dataclass
class Chunk:
    KIND: ClassVar[None] = None

    id: str
    kb_id: str
    doc_id: str
    doc_name: str
    content: str
    content_tokens: str  # space-joined tokens of content
    title_tokens: str  # space-joined tokens of the document name
    position: int  # chunk index within its document
    start: int  # character offsets into the parsed text
    end: int
    token_count: int
    page: int = 0
    vector: Vector | None = None
    created: float = 0.0

    def to_doc(self) -> Doc:
        doc: Doc = {
            "id": self.id, "kb_id": self.kb_id, "doc_id": self.doc_id, "docnm_kwd": self.doc_name,
            "content_with_weight": self.content, "content_ltks": self.content_tokens,
            "title_tks": self.title_tokens, "position_int": self.position, "start_int": self.start,
            "end_int": self.end, "token_count_int": self.token_count, "page_num_int": self.page,
            "available_int": 1, "create_timestamp_flt": self.created,
        }
        _put_vector(doc, self.vector)
        return doc

    @classmethod
    def from_doc(cls, doc: Doc) -> "Chunk":
        return cls(
            id=doc["id"], kb_id=doc["kb_id"], doc_id=doc["doc_id"], doc_name=doc.get("docnm_kwd", ""),
            content=doc.get("content_with_weight", ""), content_tokens=doc.get("content_ltks", ""),
            title_tokens=doc.get("title_tks", ""), position=int(doc.get("position_int", 0)),
            start=int(doc.get("start_int", 0)), end=int(doc.get("end_int", 0)),
            token_count=int(doc.get("token_count_int", 0)), page=int(doc.get("page_num_int", 0)),
            vector=_vector_fields(doc), created=float(doc.get("create_timestamp_flt", 0.0)),
        )


@dataclass
class EntityMention:
    """One entity as one extraction saw it in one chunk: the source of truth for entities."""

    KIND: ClassVar[str] = "entity_mention"

    kb_id: str
    doc_id: str
    chunk_id: str
    key: str  # normalized name (kbgraph.graph.keys.normalize_key)
    name: str  # the surface form the extractor gave
    type: str
    description: str
    weight: float = 1.0

    @property
    def id(self) -> str:
        return entity_mention_id(self.chunk_id, self.key)

    def to_doc(self) -> Doc:
        return {
            "id": self.id, "kb_id": self.kb_id, "knowledge_graph_kwd": self.KIND, "doc_id": self.doc_id,
            "chunk_id_kwd": self.chunk_id, "entity_key_kwd": self.key, "name_kwd": self.name,
            "entity_type_kwd": self.type, "content_with_weight": self.description,
            "weight_flt": self.weight, "available_int": 0,
        }

    @classmethod
    def from_doc(cls, doc: Doc) -> "EntityMention":
        return cls(
            kb_id=doc["kb_id"], doc_id=doc["doc_id"], chunk_id=doc["chunk_id_kwd"], key=doc["entity_key_kwd"],
            name=doc.get("name_kwd", ""), type=doc.get("entity_type_kwd", ""),
            description=doc.get("content_with_weight", ""), weight=float(doc.get("weight_flt", 1.0)),
        )


@dataclass
class RelationMention:
    """One relation as one extraction saw it in one chunk. src/tgt are stored as sorted keys."""

    KIND: ClassVar[str] = "relation_mention"

    kb_id: str
    doc_id: str
    chunk_id: str
    src_key: str
    tgt_key: str
    description: str
    keywords: list[str] = field(default_factory=list)
    weight: float = 1.0

    def __post_init__(self) -> None:
        if self.src_key > self.tgt_key:
            self.src_key, self.tgt_key = self.tgt_key, self.src_key

    @property
    def id(self) -> str:
        return relation_mention_id(self.chunk_id, self.src_key, self.tgt_key)

    def to_doc(self) -> Doc:
        return {
            "id": self.id, "kb_id": self.kb_id, "knowledge_graph_kwd": self.KIND, "doc_id": self.doc_id,
            "chunk_id_kwd": self.chunk_id, "src_key_kwd": self.src_key, "tgt_key_kwd": self.tgt_key,
            # the relation row it derives: how a merge finds a pair's mentions without reading every
            # mention of a frequent endpoint
            "relation_id_kwd": relation_id(self.kb_id, self.src_key, self.tgt_key),
            "content_with_weight": self.description, "keywords_kwd": list(self.keywords),
            "weight_flt": self.weight, "available_int": 0,
        }

    @classmethod
    def from_doc(cls, doc: Doc) -> "RelationMention":
        return cls(
            kb_id=doc["kb_id"], doc_id=doc["doc_id"], chunk_id=doc["chunk_id_kwd"], src_key=doc["src_key_kwd"],
            tgt_key=doc["tgt_key_kwd"], description=doc.get("content_with_weight", ""),
            keywords=list(doc.get("keywords_kwd") or []), weight=float(doc.get("weight_flt", 1.0)),
        )


# The searchable text of a graph row (an entity's or a relation's description, a community report's
# summary) lives in a field of its own, not in the chunks' ``content_ltks``: BM25 takes its
# collection statistics from the whole field on both stores (as Elasticsearch does per field), and
# the descriptions, excerpts of the chunks, moved every chunk's IDF whenever the graph changed (a
# rebuild of the same IRC set moved naive recall@5 by 1.7 points; bench/README.md, "The session of
# 2026-11-30 (5)"). Rows an older kbgraph wrote hold it in ``content_ltks`` until they are written
# again: graph searches read both (``graph_text_fields``).
GRAPH_TEXT = "description_ltks"
LEGACY_GRAPH_TEXT = "content_ltks"


def graph_text(doc: Doc) -> str:
    """A graph row's searchable text, wherever the kbgraph that wrote it put it."""
    value = doc.get(GRAPH_TEXT)
    return value if isinstance(value, str) else doc.get(LEGACY_GRAPH_TEXT, "") or ""


def graph_text_fields() -> dict[str, float]:
    """The text fields a search of graph rows reads, with their boosts: the row's own and, for rows
    an older kbgraph wrote, the chunks' field (which newer graph rows leave empty)."""
    return {GRAPH_TEXT: 1.0, LEGACY_GRAPH_TEXT: 1.0}


@dataclass
class Entity:
    """A knowledge-base entity, derived from all its mentions."""

    KIND: ClassVar[str] = "entity"

    kb_id: str
    key: str
    name: str  # display name: the most frequent surface form
    type: str  # the most frequent type
    description: str
    name_tokens: str  # tokens of name and aliases, for BM25
    description_tokens: str
    aliases: list[str] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)
    mention_count: int = 0
    pagerank: float = 0.0
    community_ids: list[str] = field(default_factory=list)
    vector: Vector | None = None
    # what a later merge needs to extend this row with a new document's mentions without reading
    # the older ones again (kbgraph.graph.derive.entities.extended_facts); None when it cannot
    derivation: dict[str, Any] | None = None
    # the description is a stand-in (its first fragments) until the KB's summary pass replaces it
    # with the LLM summary of all of them (kbgraph.index.summaries.summarize_pending)
    summary_pending: bool = False
    # the vector is made from its one chunk's vector and its name's (``embedded_int`` 2), not its
    # text's: every re-derivation of the row makes it again (settings.entity_vectors)
    vector_from_chunks: bool = False

    @property
    def id(self) -> str:
        return entity_id(self.kb_id, self.key)

    def to_doc(self) -> Doc:
        doc: Doc = {
            "id": self.id, "kb_id": self.kb_id, "knowledge_graph_kwd": self.KIND, "entity_key_kwd": self.key,
            "name_kwd": self.name, "entity_type_kwd": self.type, "content_with_weight": self.description,
            "name_ltks": self.name_tokens, GRAPH_TEXT: self.description_tokens,
            "aliases_kwd": list(self.aliases), "doc_ids_kwd": list(self.doc_ids),
            "chunk_ids_kwd": list(self.chunk_ids), "mention_count_int": self.mention_count, "available_int": 0,
            # 0 until the KB's embedding pass gives the row a vector (kbgraph.index.embed_rows.embed_pending)
            "embedded_int": (2 if self.vector_from_chunks else 1) if self.vector is not None else 0,
        }
        # the refresh keeps PageRank and communities in the entity's score row (EntityScore): a row
        # carries them only when written with them (by hand, or by a kbgraph before score rows), and
        # its score row, once there is one, wins (kbgraph.graph.scores)
        if self.pagerank:
            doc["pagerank_flt"] = self.pagerank
        if self.community_ids:
            doc["community_ids_kwd"] = list(self.community_ids)
        if self.derivation is not None:
            doc["derivation_with_weight"] = self.derivation
        if self.summary_pending:  # absent otherwise: rows written before the field stay as they are
            doc["summary_pending_int"] = 1
        _put_vector(doc, self.vector)
        return doc

    @classmethod
    def from_doc(cls, doc: Doc) -> "Entity":
        return cls(
            kb_id=doc["kb_id"], key=doc["entity_key_kwd"], name=doc.get("name_kwd", ""),
            type=doc.get("entity_type_kwd", ""), description=doc.get("content_with_weight", ""),
            name_tokens=doc.get("name_ltks", ""), description_tokens=graph_text(doc),
            aliases=list(doc.get("aliases_kwd") or []), doc_ids=list(doc.get("doc_ids_kwd") or []),
            chunk_ids=list(doc.get("chunk_ids_kwd") or []), mention_count=int(doc.get("mention_count_int", 0)),
            pagerank=float(doc.get("pagerank_flt", 0.0)), community_ids=list(doc.get("community_ids_kwd") or []),
            vector=_vector_fields(doc), derivation=doc.get("derivation_with_weight"),
            summary_pending=bool(doc.get("summary_pending_int")), vector_from_chunks=doc.get("embedded_int") == 2,
        )


@dataclass
class EntityScore:
    """What the refresh computes for an entity (its PageRank, its communities), in a small row of its
    own beside the entity's row, with the fields listings of the highest PageRank filter and order on.

    A refresh moves PageRank for nearly every entity when a document comes or goes; kept in the
    entity's row, every move rewrote that row, and Elasticsearch (Lucene) rewrites a row whole, its
    vector indexed again (~0.3 ms of the node's CPU per row: 10.8k rows, ~3 s, per ``docs rm`` of a
    MuSiQue document). A score row has no vector and no text."""

    KIND: ClassVar[str] = "entity_score"

    kb_id: str
    key: str
    type: str
    mention_count: int
    pagerank: float
    community_ids: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return entity_score_id(entity_id(self.kb_id, self.key))

    @classmethod
    def of(cls, entity: Entity) -> "EntityScore":
        return cls(kb_id=entity.kb_id, key=entity.key, type=entity.type, mention_count=entity.mention_count,
                   pagerank=entity.pagerank, community_ids=sorted(entity.community_ids))

    def to_doc(self) -> Doc:
        return {"id": self.id, "kb_id": self.kb_id, "knowledge_graph_kwd": self.KIND, "entity_key_kwd": self.key,
                "entity_type_kwd": self.type, "mention_count_int": self.mention_count, "pagerank_flt": self.pagerank,
                "community_ids_kwd": list(self.community_ids), "available_int": 0}

    @classmethod
    def from_doc(cls, doc: Doc) -> "EntityScore":
        return cls(kb_id=doc["kb_id"], key=doc["entity_key_kwd"], type=doc.get("entity_type_kwd", ""),
                   mention_count=int(doc.get("mention_count_int", 0)), pagerank=float(doc.get("pagerank_flt", 0.0)),
                   community_ids=list(doc.get("community_ids_kwd") or []))


@dataclass
class Relation:
    """A knowledge-base relation (undirected; src_key < tgt_key), derived from all its mentions."""

    KIND: ClassVar[str] = "relation"

    kb_id: str
    src_key: str
    tgt_key: str
    src_name: str
    tgt_name: str
    description: str
    description_tokens: str
    keywords: list[str] = field(default_factory=list)
    weight: float = 0.0
    doc_ids: list[str] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)
    mention_count: int = 0
    vector: Vector | None = None
    summary_pending: bool = False  # as Entity.summary_pending
    # the vector is the mean of its chunks' vectors (``embedded_int`` 2), not its text's: every
    # re-derivation of the row makes it again (settings.relation_vectors)
    vector_from_chunks: bool = False

    @property
    def id(self) -> str:
        return relation_id(self.kb_id, self.src_key, self.tgt_key)

    def to_doc(self) -> Doc:
        doc: Doc = {
            "id": self.id, "kb_id": self.kb_id, "knowledge_graph_kwd": self.KIND, "src_key_kwd": self.src_key,
            "tgt_key_kwd": self.tgt_key, "src_name_kwd": self.src_name, "tgt_name_kwd": self.tgt_name,
            "content_with_weight": self.description, GRAPH_TEXT: self.description_tokens,
            "keywords_kwd": list(self.keywords), "weight_flt": self.weight, "doc_ids_kwd": list(self.doc_ids),
            "chunk_ids_kwd": list(self.chunk_ids), "mention_count_int": self.mention_count, "available_int": 0,
            "embedded_int": (2 if self.vector_from_chunks else 1) if self.vector is not None else 0,
        }
        if self.summary_pending:
            doc["summary_pending_int"] = 1
        _put_vector(doc, self.vector)
        return doc

    @classmethod
    def from_doc(cls, doc: Doc) -> "Relation":
        return cls(
            kb_id=doc["kb_id"], src_key=doc["src_key_kwd"], tgt_key=doc["tgt_key_kwd"],
            src_name=doc.get("src_name_kwd", ""), tgt_name=doc.get("tgt_name_kwd", ""),
            description=doc.get("content_with_weight", ""), description_tokens=graph_text(doc),
            keywords=list(doc.get("keywords_kwd") or []), weight=float(doc.get("weight_flt", 0.0)),
            doc_ids=list(doc.get("doc_ids_kwd") or []), chunk_ids=list(doc.get("chunk_ids_kwd") or []),
            mention_count=int(doc.get("mention_count_int", 0)), vector=_vector_fields(doc),
            summary_pending=bool(doc.get("summary_pending_int")), vector_from_chunks=doc.get("embedded_int") == 2,
        )


@dataclass
class Finding:
    summary: str
    explanation: str


@dataclass
class CommunityReport:
    KIND: ClassVar[str] = "community_report"

    kb_id: str
    level: int
    community: str  # the community's label at its level
    member_keys: list[str]
    title: str
    summary: str
    findings: list[Finding]
    rating: float
    rating_explanation: str
    graph_version: int
    content_tokens: str = ""  # tokens of title + summary + findings
    parent: str = ""
    vector: Vector | None = None
    input_hash: str = ""  # of the members and relations it was written from ("" = write it again)

    @property
    def id(self) -> str:
        return report_id(self.kb_id, self.level, self.member_keys)

    def to_doc(self) -> Doc:
        doc: Doc = {
            "id": self.id, "kb_id": self.kb_id, "knowledge_graph_kwd": self.KIND, "level_int": self.level,
            "community_kwd": self.community, "parent_kwd": self.parent, "entity_keys_kwd": list(self.member_keys),
            "title_kwd": self.title, "content_with_weight": self.summary, GRAPH_TEXT: self.content_tokens,
            "findings_with_weight": [{"summary": f.summary, "explanation": f.explanation} for f in self.findings],
            "rating_flt": self.rating, "rating_explanation_with_weight": self.rating_explanation,
            "graph_version_int": self.graph_version, "member_count_int": len(self.member_keys), "available_int": 0,
            "input_hash_kwd": self.input_hash,
        }
        _put_vector(doc, self.vector)
        return doc

    @classmethod
    def from_doc(cls, doc: Doc) -> "CommunityReport":
        return cls(
            kb_id=doc["kb_id"], level=int(doc.get("level_int", 0)), community=doc.get("community_kwd", ""),
            member_keys=list(doc.get("entity_keys_kwd") or []), title=doc.get("title_kwd", ""),
            summary=doc.get("content_with_weight", ""),
            findings=[Finding(f.get("summary", ""), f.get("explanation", ""))
                      for f in doc.get("findings_with_weight") or []],
            rating=float(doc.get("rating_flt", 0.0)),
            rating_explanation=doc.get("rating_explanation_with_weight", ""),
            graph_version=int(doc.get("graph_version_int", 0)), content_tokens=graph_text(doc),
            parent=doc.get("parent_kwd", ""), vector=_vector_fields(doc), input_hash=doc.get("input_hash_kwd", ""),
        )


PHASES = ("pagerank", "resolution", "communities")


@dataclass
class GraphMeta:
    """The knowledge base's graph version, counts and the version each phase last saw."""

    KIND: ClassVar[str] = "graph_meta"

    kb_id: str
    version: int = 0
    entity_count: int = 0
    relation_count: int = 0
    report_count: int = 0
    # phase name -> graph version it was computed at (-1: never)
    phase_versions: dict[str, int] = field(default_factory=dict)
    phase_status: dict[str, str] = field(default_factory=dict)
    # the format of the KB's stored mentions (MENTION_FORMAT once kbgraph.graph.derive.mentions.upgrade_mentions
    # has run); 1: written before relation mentions named their relation row
    mention_format: int = 1

    @property
    def id(self) -> str:
        return graph_meta_id(self.kb_id)

    def is_stale(self, phase: str) -> bool:
        return self.phase_versions.get(phase, -1) != self.version

    def to_doc(self) -> Doc:
        return {
            "id": self.id, "kb_id": self.kb_id, "knowledge_graph_kwd": self.KIND, "version_int": self.version,
            "entity_count_int": self.entity_count, "relation_count_int": self.relation_count,
            "report_count_int": self.report_count, "mention_format_int": self.mention_format,
            "phases_with_weight": {p: {"version": self.phase_versions.get(p, -1),
                                       "status": self.phase_status.get(p, "never")} for p in PHASES},
            "available_int": 0,
        }

    @classmethod
    def from_doc(cls, doc: Doc) -> "GraphMeta":
        phases: dict[str, Any] = doc.get("phases_with_weight") or {}
        return cls(
            kb_id=doc["kb_id"], version=int(doc.get("version_int", 0)),
            entity_count=int(doc.get("entity_count_int", 0)), relation_count=int(doc.get("relation_count_int", 0)),
            report_count=int(doc.get("report_count_int", 0)), mention_format=int(doc.get("mention_format_int", 1)),
            phase_versions={p: int(v.get("version", -1)) for p, v in phases.items()},
            phase_status={p: str(v.get("status", "never")) for p, v in phases.items()},
        )


@dataclass
class ResolutionDecision:
    """An LLM's judgement whether two entity keys name the same thing; kept so it is never paid twice.

    "Same" decisions merge the keys (kbgraph.graph.resolution.plan_merges); deleting the row undoes it.
    """

    KIND: ClassVar[str] = "resolution_decision"

    kb_id: str
    key_a: str
    key_b: str
    same: bool

    def __post_init__(self) -> None:
        if self.key_a > self.key_b:
            self.key_a, self.key_b = self.key_b, self.key_a

    @property
    def id(self) -> str:
        return stable_id("resolution_decision", self.kb_id, self.key_a, self.key_b)

    def to_doc(self) -> Doc:
        return {"id": self.id, "kb_id": self.kb_id, "knowledge_graph_kwd": self.KIND, "key_a_kwd": self.key_a,
                "key_b_kwd": self.key_b, "same_int": int(self.same), "available_int": 0}

    @classmethod
    def from_doc(cls, doc: Doc) -> "ResolutionDecision":
        return cls(kb_id=doc["kb_id"], key_a=doc["key_a_kwd"], key_b=doc["key_b_kwd"], same=bool(doc.get("same_int")))
