"""The DocStore contract: what every storage engine behind kbgraph must do.

Documents are flat JSON objects whose field types follow their suffix, as RAGFlow's records do:

- ``*_kwd``: keyword (exact match; a list means "any of these values")
- ``*_ltks`` / ``*_tks``: text already tokenized in Python and joined by spaces (see
  ``kbgraph.parse.tokenize``), searched with BM25 over whitespace tokens
- ``*_int`` / ``*_flt``: numbers, usable in range conditions and ordering
- ``*_with_weight``: stored payload, never searched
- ``q_<dim>_vec``: dense vector (cosine similarity)

Every document carries ``id`` (unique in its tenant's index) and ``kb_id``. One index holds one
tenant; every operation is scoped to one tenant and to the knowledge bases it names, so one tenant
never sees another's rows and a knowledge base never sees its neighbours'.

Scoring (identical on every engine, so results do not depend on where a knowledge base lives):

- ``term_score``: the BM25 score of a hit divided by the best BM25 score among the text
  candidates of the same request, so it lies in [0, 1]; 0 for a hit found only by the vector query.
- ``vector_score``: cosine similarity between the query vector and the hit's stored vector,
  clipped to [0, 1]; computed for every candidate (text or vector) that has a vector.
- ``score``: ``(1 - w) * term_score + w * vector_score`` with ``w = vector_weight`` when both a text
  and a vector query are given; otherwise the one score there is. Hits under ``threshold`` are
  dropped; the rest are ordered by score (ties by id) before ``offset``/``limit`` apply.

The candidates are the top ``candidates`` BM25 matches plus the top ``candidates`` vector
neighbours (both after the filters), so hybrid search looks at the same window on both engines.
Which of several matches tied at the edge of that window get in is the engine's choice (index
order on both).

Visibility of writes (the same on every engine as far as one store object can tell):

- every read of a store object (``get``, ``get_many``, ``search``, ``search_many``, ``scan``, ``count``,
  ``aggregate``) sees every write that store object made before it, whatever its ``refresh``;
- a write with ``refresh=True`` is visible to every reader, in any process, once it returns;
- a write with ``refresh=False`` reaches other store objects (other processes) by the engine's own
  schedule (Elasticsearch: ``es_refresh_interval``; the embedded store: at once) or at the next
  ``refresh()`` of that tenant by anyone; ``get`` is realtime on every engine;
- ``delete`` and ``update`` by filter act on every matching row written before them, by any writer.

BM25's collection statistics are the field's, tenant-wide (so rows of different kinds that must not
move each other's scores write their text to different fields: records.GRAPH_TEXT), and every
engine scores with the field lengths Lucene's one-byte norms keep (exact under 24 tokens, then four
significant bits). Elasticsearch's (Lucene's) statistics also count the old copies of rewritten rows
until merges drop them, which its soft-delete retention delays: its normalized term scores may differ
from the embedded store's by several percent (10% measured right after indexing, where every graph
row had been written twice). Callers must not turn such a difference into a jump: a small change of
a term score should make a small change of what they compute from it (ramps rather than cuts, no
decision on a score near zero).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

Doc = dict[str, Any]

Op = Literal["eq", "in", "not_in", "exists", "missing", "gte", "lte", "gt", "lt"]


class StoreError(RuntimeError):
    """A storage operation failed; the message says which and why."""


class StoreUnavailable(StoreError):
    """The storage engine cannot be reached (connection refused, auth failed, timed out)."""


if TYPE_CHECKING:
    from kbgraph.store.index_files import IndexFiles


@dataclass(frozen=True)
class Condition:
    """One filter condition on a field.

    ``eq`` on a list-valued field matches when any element equals ``value``; ``in`` matches when
    the field (or any of its elements) equals any of ``value``; ``not_in`` is the negation of
    ``in`` (documents missing the field match it); ``exists``/``missing`` test presence;
    ``gte``/``lte``/``gt``/``lt`` compare numbers. The pseudo-field ``id`` addresses document ids.
    """

    field: str
    op: Op
    value: Any = None


def eq(field_name: str, value: Any) -> Condition:
    return Condition(field_name, "eq", value)


def any_of(field_name: str, values: Sequence[Any]) -> Condition:
    return Condition(field_name, "in", list(values))


def none_of(field_name: str, values: Sequence[Any]) -> Condition:
    return Condition(field_name, "not_in", list(values))


def exists(field_name: str) -> Condition:
    return Condition(field_name, "exists")


def missing(field_name: str) -> Condition:
    return Condition(field_name, "missing")


@dataclass(frozen=True)
class TextQuery:
    """BM25 over pre-tokenized fields. ``fields`` maps a token field to its boost."""

    tokens: Sequence[str]
    fields: Mapping[str, float]
    # fraction (0..1) of the distinct query tokens a document must contain to match
    minimum_should_match: float = 0.0


@dataclass(frozen=True)
class VectorQuery:
    field: str
    vector: Sequence[float]
    # the model's cosine for unrelated texts: vector_score = (cosine - floor) / (1 - floor), clipped,
    # so that models whose cosines all sit high (e5: ~0.75 for unrelated texts) weigh in the hybrid
    # score as much as those centred on 0 (the ranking by vector alone does not change)
    floor: float = 0.0


@dataclass(frozen=True)
class SearchRequest:
    kb_ids: Sequence[str]
    where: Sequence[Condition] = ()
    text: TextQuery | None = None
    vector: VectorQuery | None = None
    vector_weight: float = 0.3
    threshold: float = 0.0
    candidates: int = 100
    offset: int = 0
    limit: int = 10
    # None = all stored fields; vectors are only returned when named here
    fields: Sequence[str] | None = None
    # used when neither text nor vector is given: [(field, "asc"|"desc")], then id
    order_by: Sequence[tuple[str, str]] = ()
    # False: the caller wants the page, not how many match. A listing then counts nothing (total is
    # offset + hits returned); a scored search may count only the candidates it looked at
    count_total: bool = True
    # True: every field named is a keyword or number, which a search (scored, or a listing) may read
    # from the index with each hit's id (Elasticsearch: doc values) instead of reading its row; a
    # field without a value is left out of the row. Single-valued, but those named in ``list_fields``
    key_fields: bool = False
    # of the key fields, those holding lists of keywords: each comes as its distinct values in sorted
    # order (``key_list``), as an index keeps them (no order or repeats of the row's own)
    list_fields: Sequence[str] = ()


def key_list(values: Any) -> list[str]:
    """A list field read as a key (``SearchRequest.list_fields``): its distinct values, sorted."""
    return sorted(set(values if isinstance(values, (list, tuple)) else [values]))


def with_key_lists(result: "SearchResult", request: SearchRequest) -> "SearchResult":
    """``result`` with the list fields of a key search (``SearchRequest.list_fields``) as keys read
    from an index give them: for an engine that reads rows."""
    if request.key_fields and request.list_fields:
        for hit in result.hits:
            for name in request.list_fields:
                values = hit.doc.pop(name, None)
                if values is not None and values != [] and values != ():  # no value: left out, as an index leaves it
                    hit.doc[name] = key_list(values)
    return result


@dataclass
class Hit:
    id: str
    doc: Doc
    score: float
    term_score: float = 0.0
    vector_score: float = 0.0


@dataclass
class SearchResult:
    hits: list[Hit] = field(default_factory=list)
    # matches before offset/limit (after the threshold for scored searches)
    total: int = 0


class DocStore(ABC):
    """Storage for chunks and graph records, one index per tenant. See the module docstring."""

    engine: str = "abstract"
    # the engine works in another process (Elasticsearch): while it answers a read or indexes a write
    # this process is free, so independent work runs beside it (a query's kg and ppr parts, a refresh's
    # rewrites of rows beside its reports); an in-process engine (SQLite) works under the GIL, and one
    # thread is as fast
    remote: bool = False

    @abstractmethod
    def ensure_index(self, tenant_id: str) -> None:
        """Create the tenant's index if it does not exist. Idempotent."""

    @abstractmethod
    def drop_index(self, tenant_id: str) -> None:
        """Delete the tenant's index and everything in it. Idempotent."""

    @abstractmethod
    def index_exists(self, tenant_id: str) -> bool: ...

    @abstractmethod
    def upsert(self, tenant_id: str, kb_id: str, docs: Sequence[Doc], *, refresh: bool = True) -> int:
        """Insert or wholly replace documents by ``id``; sets ``kb_id`` on each. Returns the count.

        Raises StoreError naming the failing ids if any document could not be written; the
        others are written. ``refresh`` makes the writes visible to every reader at once; without
        it they are visible to this store object's reads (see "Visibility" in the module docstring).
        """

    @abstractmethod
    def patch(self, tenant_id: str, kb_id: str, changes: Mapping[str, Doc], *, refresh: bool = True) -> int:
        """Set the given fields on the documents named by id (a partial update); others keep theirs.

        Ids that do not exist are ignored. Returns the number of documents changed.
        """

    @abstractmethod
    def get(self, tenant_id: str, kb_ids: Sequence[str], ids: Sequence[str],
            fields: Sequence[str] | None = None) -> list[Doc]:
        """The documents with these ids (in the order asked, missing ones left out)."""

    def get_many(self, tenant_id: str, kb_ids: Sequence[str],
                 reads: Sequence[tuple[Sequence[str], Sequence[str] | None]]) -> list[list[Doc]]:
        """``get`` of each (ids, fields) read, in order, with the same results; an engine may send
        them together (Elasticsearch: one multi-get for all of them)."""
        return [self.get(tenant_id, kb_ids, ids, fields) for ids, fields in reads]

    @abstractmethod
    def delete(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = (),
               *, refresh: bool = True) -> int:
        """Delete every document of these knowledge bases matching all conditions. Returns the count."""

    @abstractmethod
    def update(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition],
               values: Doc, *, refresh: bool = True) -> int:
        """Set ``values`` on every matching document. Returns the count."""

    @abstractmethod
    def search(self, tenant_id: str, request: SearchRequest) -> SearchResult: ...

    def search_many(self, tenant_id: str, requests: Sequence[SearchRequest]) -> list[SearchResult]:
        """``search`` of each request, in order, with the same results; an engine may send them
        together (Elasticsearch: a few round trips for the whole batch instead of a few per request).
        A request that cannot be answered raises StoreError for the batch."""
        return [self.search(tenant_id, request) for request in requests]

    def vector_cosines(self, tenant_id: str, kb_ids: Sequence[str], ids: Sequence[str], field_name: str,
                       unit_vector: Sequence[float]) -> dict[str, float]:
        """The cosine between ``unit_vector`` (of length 1) and the stored vector in ``field_name`` of
        each row named, in the order named; rows missing, without that vector, or not available
        (``available_int`` 0) are left out. Computed in float32, as the engine's vector search does
        (engines agree to ~1e-7), without handing the vectors over: an engine in another process
        sends a few numbers instead of every vector."""
        vector = np.asarray(unit_vector, dtype=np.float32)
        found: dict[str, np.ndarray] = {}
        for doc in self.get(tenant_id, kb_ids, ids, fields=[field_name, "available_int"]):
            stored = doc.get(field_name)
            if stored is not None and len(stored) == len(vector) and doc.get("available_int", 1) == 1:
                found[doc["id"]] = np.asarray(stored, dtype=np.float32)
        if not found:
            return {}
        rows = np.stack(list(found.values()))
        norms = np.linalg.norm(rows, axis=1)
        norms[norms == 0] = 1.0
        return dict(zip(found, ((rows @ vector) / norms).tolist()))

    @abstractmethod
    def scan(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = (),
             fields: Sequence[str] | None = None, batch_size: int = 1000) -> Iterator[Doc]:
        """Every matching document, in id order, with no result-window limit. Rows written or deleted
        while a scan runs may or may not be seen; no row is read twice."""

    @abstractmethod
    def count(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = ()) -> int: ...

    @abstractmethod
    def aggregate(self, tenant_id: str, kb_ids: Sequence[str], field_name: str,
                  where: Sequence[Condition] = (), size: int = 100) -> list[tuple[Any, int]]:
        """(value, document count) for the most frequent values of a keyword field, most first."""

    def prepare_search(self, tenant_id: str, kb_ids: Sequence[str],
                       text_fields: Mapping[str | None, Sequence[str]]) -> None:
        """Build now what searches of these KBs would otherwise build on first use. ``text_fields``
        names, per row kind (None: chunks), the text fields searches read. An engine that indexes as
        it writes (Elasticsearch) has nothing to do; the embedded store builds its large in-memory
        indexes and keeps them on disk for the next process. Failing costs only speed."""

    def index_files(self) -> "IndexFiles | None":
        """Where search structures derived from this store may be kept between processes (a store
        on the local disk), or None."""
        return None

    @abstractmethod
    def refresh(self, tenant_id: str) -> None:
        """Make every write so far, by any writer, visible to every reader's searches."""

    def batch(self) -> AbstractContextManager[None]:
        """Group this thread's writes: an engine with transactions commits them once, at the end of
        the block (all or nothing); others (Elasticsearch) write as they go."""
        return nullcontext()

    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""


def vector_field(dim: int) -> str:
    """The name of the dense-vector field for embeddings of this size."""
    return f"q_{dim}_vec"


def rescale_cosine(cosine: float, floor: float) -> float:
    """A cosine as the contract's vector_score: (cosine - floor) / (1 - floor), clipped to [0, 1]."""
    if floor:
        cosine = (cosine - floor) / (1.0 - floor)
    return min(1.0, max(0.0, cosine))


def fuse(term_score: float, vector_score: float, weight: float, has_text: bool, has_vector: bool) -> float:
    """The combined score every engine uses (see the module docstring)."""
    if has_text and has_vector:
        return (1.0 - weight) * term_score + weight * vector_score
    return term_score if has_text else vector_score


def rescale_cosines(cosines: np.ndarray, floor: float) -> np.ndarray:
    """``rescale_cosine`` of each cosine, with the same float operations."""
    if floor:
        cosines = (cosines - floor) / (1.0 - floor)
    return np.minimum(1.0, np.maximum(0.0, cosines))


def fuse_all(term_scores: np.ndarray, vector_scores: np.ndarray, weight: float, has_text: bool,
             has_vector: bool) -> np.ndarray:
    """``fuse`` of each candidate's parts, with the same float operations."""
    if has_text and has_vector:
        return (1.0 - weight) * term_scores + weight * vector_scores
    return term_scores if has_text else vector_scores
