"""In-process caches of graph reads that change only when the knowledge base's graph does.

Entity and relation rows are written by merges, which bump the graph version in the knowledge base's
``graph_meta`` row, and the entities' score rows (PageRank, communities) by the refresh phases,
which stamp the version they ran at in the same row. So a read of those rows stays valid while that row stays the
same: the caches here are keyed by it (``GraphState``, one small get per query). Knowledge bases
without a ``graph_meta`` row (rows written by hand, as some tests do) are never cached.

Caches are per store object and bounded; each one is rebuilt from scratch once its state moves.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

from kbgraph.graph.scores import JOINED_FIELDS, join_scores
from kbgraph.search.batch import SearchBatch
from kbgraph.store.base import DocStore, SearchRequest, any_of, eq
from kbgraph.store.index_files import PERSIST_MIN_ROWS, array_strings, strings_array
from kbgraph.store.records import Entity, Relation, entity_id, entity_score_id, graph_meta_id, scored_entity_id

Node = tuple[str, str]  # (kb_id, entity key)
T = TypeVar("T")

# relations held by one adjacency cache (~0.3 KB each); 220 benchmark questions on a 300k-relation
# graph left 26k, most of them the hubs' (which are what makes caching pay)
ADJACENCY_EDGES = 100_000
# adjacency caches per store (one per set of knowledge bases searched together)
ADJACENCY_CACHES = 4
# relations one end's listing reads at once (read_relations_touching): an end with more is scanned
TOUCHING_PAGE = 1_000
# what an edge is read from
EDGE_FIELDS = ["id", "kb_id", "src_key_kwd", "tgt_key_kwd", "weight_flt"]
# cached typed listings per store
LISTING_ENTRIES = 256
# entity types a knowledge base's type list holds at most (past it, every type asked is looked up)
TYPE_BUCKETS = 10_000
# entities whose score rows (PageRank, communities) one score cache holds (~0.3 KB each)
SCORE_ROWS = 200_000


class Edge(NamedTuple):
    """A relation as the expansion walks it.

    Only strings and numbers, so that the garbage collector stops tracking cached edges: a cache of
    row dicts (and their lists) would be traversed by every full collection, ~0.15 s each on a
    large knowledge base, and would make such collections more frequent as it fills.
    """

    id: str
    src: Node
    tgt: Node
    weight: float


def relation_weight(doc: dict) -> float:
    """A relation row's weight as the expansion walks it (the walk graph's table reads it so too)."""
    return float(doc.get("weight_flt", 0.0) or 0.0)


def edge_of(doc: dict) -> Edge:
    kb = doc.get("kb_id", "")
    return Edge(doc["id"], (kb, doc.get("src_key_kwd", "")), (kb, doc.get("tgt_key_kwd", "")), relation_weight(doc))


@dataclass(frozen=True)
class GraphState:
    """What the graph_meta rows of a set of knowledge bases say: (kb, version, phase stamps) per KB."""

    kbs: tuple[tuple[str, int, str], ...]

    @property
    def versions(self) -> tuple[tuple[str, int], ...]:
        """(kb, version) per KB; -1 for a KB without a graph_meta row."""
        return tuple((kb, version) for kb, version, _ in self.kbs)

    @property
    def cacheable(self) -> bool:
        """Whether every KB has a graph_meta row, so that a change of its graph shows in this state."""
        return all(version >= 0 for _, version, _ in self.kbs)


def graph_state(store: DocStore, tenant: str, kb_ids: Sequence[str]) -> GraphState:
    found = {d.get("kb_id", ""): d for d in store.get(tenant, list(kb_ids), [graph_meta_id(kb) for kb in kb_ids],
                                                       fields=["kb_id", "version_int", "phases_with_weight"])}
    kbs = []
    for kb in sorted(set(kb_ids)):
        doc = found.get(kb)
        if doc is None:
            kbs.append((kb, -1, ""))
        else:
            phases = json.dumps(doc.get("phases_with_weight") or {}, sort_keys=True)
            kbs.append((kb, int(doc.get("version_int", 0) or 0), phases))
    return GraphState(tuple(kbs))


_caches: weakref.WeakKeyDictionary[DocStore, OrderedDict[tuple, tuple[GraphState, Any]]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def cached(store: DocStore, key: tuple, state: GraphState, build: Callable[[], T], entries: int,
           persist: type | None = None) -> T:
    """The value cached under ``key`` for this store at ``state``, else ``build()`` (kept while the
    state holds, the least recently used dropped past ``entries`` keys of this kind). A ``persist``
    type (with to_arrays/from_arrays) is also kept on disk for the next process (index_files.py)."""
    if not state.cacheable:
        return build()
    with _lock:
        per_store = _caches.setdefault(store, OrderedDict())
        held = per_store.get(key)
        if held is not None and held[0] == state:
            per_store.move_to_end(key)
            return held[1]
    value = _from_disk(store, key, state, persist) if persist is not None else None
    if value is None:
        value = build()
        if persist is not None:
            _to_disk(store, key, state, value)
    with _lock:
        per_store[key] = (state, value)
        per_store.move_to_end(key)
        same_kind = [k for k in per_store if k[0] == key[0]]
        for stale in same_kind[:max(0, len(same_kind) - entries)]:
            del per_store[stale]
    return value


def _generation(state: GraphState) -> int:
    return sum(version for _, version, _ in state.kbs)


def _from_disk(store: DocStore, key: tuple, state: GraphState, kind: type) -> Any:
    """The value a process wrote for ``key`` at exactly this ``state``, or None."""
    files = store.index_files()
    loaded = files.load_arrays(key, kind.__name__, _generation(state)) if files is not None else None
    if loaded is None or array_strings(loaded[1]["built_at"]) != [repr(state)]:
        return None
    try:
        return kind.from_arrays(loaded[1])
    except (ValueError, KeyError):
        return None


def _to_disk(store: DocStore, key: tuple, state: GraphState, value: Any) -> None:
    files = store.index_files()
    if files is not None and value.rows >= PERSIST_MIN_ROWS:
        files.save_arrays(key, type(value).__name__, _generation(state),
                          {**value.to_arrays(), "built_at": strings_array([repr(state)])})


def clear_caches() -> None:
    with _lock:
        _caches.clear()


def holds_kind(store: DocStore, tenant: str, kb_ids: Sequence[str], kind: str, state: GraphState) -> bool:
    """Whether these knowledge bases hold any row of this graph kind (community reports, mentions):
    a knowledge base built without communities need not search for reports on every query."""
    def look() -> bool:
        return bool(store.search(tenant, SearchRequest(kb_ids=list(kb_ids), where=[eq("knowledge_graph_kwd", kind)],
                                                       limit=1, fields=["id"], count_total=False)).hits)

    return cached(store, ("kind", tenant, tuple(sorted(kb_ids)), kind), state, look, LISTING_ENTRIES)


def entity_types(store: DocStore, tenant: str, kb_ids: Sequence[str], state: GraphState) -> frozenset[str] | None:
    """The entity types these knowledge bases' entity rows hold, on a remote store (None: an
    in-process store, more than ``TYPE_BUCKETS`` types, or a state that cannot be cached, where one
    aggregation a query would cost what it saves). A question's answer-type words are mostly no type
    of the graph ("university", "kind"): their PageRank listing, three reads one after the other on a
    remote store, need not be asked. The embedded store lists a type the graph lacks in 0.2-3 ms, and
    aggregates 100k entities' types in 90 ms (660 ms cold), once per graph change: not worth it there."""
    if not state.cacheable or not store.remote:
        return None

    def look() -> frozenset[str] | None:
        found = store.aggregate(tenant, list(kb_ids), "entity_type_kwd", [eq("knowledge_graph_kwd", Entity.KIND)],
                                TYPE_BUCKETS)
        return frozenset(str(value) for value, _ in found) if len(found) < TYPE_BUCKETS else None

    return cached(store, ("types", tenant, tuple(sorted(kb_ids))), state, look, LISTING_ENTRIES)


class EdgeSource(Protocol):
    """Where an adjacency takes the relations of an entity it does not hold (ppr_graph.RelationTable)."""

    def edges(self, node: Node) -> tuple[Edge, ...]: ...


class RelationAdjacency:
    """The relations touching each entity, read from the store the first time an entity is asked for
    (or taken from an ``EdgeSource``, the walk graph's relations, when it has one) and kept (up to
    ``max_edges`` edges, least recently used entities dropped first): edges are made once per entity.

    One instance belongs to one graph state: callers get it through ``relation_adjacency``.
    """

    def __init__(self, store: DocStore, tenant: str, kb_ids: Sequence[str], max_edges: int = ADJACENCY_EDGES) -> None:
        self._store, self._tenant, self._kb_ids = store, tenant, list(kb_ids)
        self._max_edges = max_edges
        self._table: EdgeSource | None = None  # ``use``
        self._edges: OrderedDict[Node, tuple[Edge, ...]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def ask(self, batch: SearchBatch, nodes: Sequence[Node]) -> None:
        """Ask ``batch`` for the relations of those of ``nodes`` not held, to go out with the
        searches the batch sends next: ``touching`` with the same batch then waits for no read of
        its own (the kg part's first hop rides with its anchors' relation searches)."""
        if self._table is not None:
            return
        with self._lock:
            missing = [n for n in dict.fromkeys(nodes) if n not in self._edges]
        if missing:
            batch.ask_all(touching_requests(self._kb_ids, missing))

    def touching(self, nodes: Sequence[Node], batch: SearchBatch | None = None) -> list[Edge]:
        """Every relation with an end in ``nodes``, each once, in id order; what is not held is read
        through ``batch`` when given (answered there when ``ask`` asked it)."""
        with self._lock:
            known = {n: self._edges[n] for n in nodes if n in self._edges}
            for node in known:
                self._edges.move_to_end(node)
        missing = [n for n in dict.fromkeys(nodes) if n not in known]
        if missing:
            table = self._table
            read = {n: table.edges(n) for n in missing} if table is not None else \
                read_relations_touching(self._store, self._tenant, self._kb_ids, missing, batch)
            known.update(read)
            self._keep(read)
        return edges_in_order(known.values())

    def use(self, table: EdgeSource) -> None:
        """Take what is not held from ``table`` (the same graph state's relations) from now on."""
        self._table = table

    def _keep(self, read: dict[Node, tuple[Edge, ...]]) -> None:
        if self._max_edges <= 0:
            return
        with self._lock:
            for node, edges in read.items():
                if node not in self._edges:
                    self._edges[node] = edges
                    self._held += len(edges)
            while self._held > self._max_edges and len(self._edges) > 1:
                _, dropped = self._edges.popitem(last=False)
                self._held -= len(dropped)


def edges_in_order(groups: Iterable[Sequence[Edge]]) -> list[Edge]:
    """The edges of all groups, each once, in id order."""
    merged = {edge.id: edge for edges in groups for edge in edges}
    return [merged[i] for i in sorted(merged)]


TOUCHING_SIDES = ("src_key_kwd", "tgt_key_kwd")


def touching_requests(kb_ids: Sequence[str], nodes: Sequence[Node]) -> list[SearchRequest]:
    """The listings of the relations with an end at one of ``nodes``, one per side, both in one
    request to the store (a round trip fewer a hop of the expansion on a remote store)."""
    keys = sorted({key for _, key in nodes})
    return [SearchRequest(kb_ids=list(kb_ids), where=[eq("knowledge_graph_kwd", Relation.KIND), any_of(side, keys)],
                          order_by=[("id", "asc")], limit=TOUCHING_PAGE, fields=EDGE_FIELDS, count_total=False)
            for side in TOUCHING_SIDES]


def read_relations_touching(store: DocStore, tenant: str, kb_ids: Sequence[str], nodes: Sequence[Node],
                            batch: SearchBatch | None = None) -> dict[Node, tuple[Edge, ...]]:
    """Entity -> the relations with an end at it (in id order), for each of ``nodes``
    (``touching_requests``, through ``batch`` when given); an end holding more than
    ``TOUCHING_PAGE`` relations is scanned."""
    requests = touching_requests(kb_ids, nodes)
    pages = [batch.result(ticket) for ticket in batch.ask_all(requests)] if batch is not None else \
        store.search_many(tenant, requests)
    out: dict[Node, dict[str, Edge]] = {node: {} for node in nodes}
    for side, request, page in zip(TOUCHING_SIDES, requests, pages):
        docs: Iterable[dict] = [h.doc for h in page.hits] if len(page.hits) < TOUCHING_PAGE else \
            store.scan(tenant, list(kb_ids), request.where, fields=EDGE_FIELDS)
        for doc in docs:
            edges = out.get((doc.get("kb_id", ""), doc.get(side, "")))
            if edges is not None:
                edges[doc["id"]] = edge_of(doc)
    return {node: tuple(edges[i] for i in sorted(edges)) for node, edges in out.items()}


def relation_adjacency(store: DocStore, tenant: str, kb_ids: Sequence[str], state: GraphState,
                       table: EdgeSource | None = None) -> RelationAdjacency:
    """The shared per-entity adjacency cache of these knowledge bases at ``state`` (a private one
    that keeps nothing and lists every time when the state cannot be cached), taking what it does
    not hold from the whole graph's ``table`` when the walk graph read it, else from the store. (A table read for the
    expansion alone cost the first kg query after every graph change 7 s at 300k relations.)"""
    if not state.cacheable:  # rows written without a graph_meta row can change under any table: list them
        return RelationAdjacency(store, tenant, kb_ids, max_edges=0)
    key = ("adjacency", tenant, tuple(sorted(kb_ids)))
    adjacency = cached(store, key, state, lambda: RelationAdjacency(store, tenant, kb_ids), ADJACENCY_CACHES)
    if table is not None:
        adjacency.use(table)
    return adjacency


class EntityScores:
    """The entities' score rows (PageRank, communities: kbgraph.graph.scores), read the first time an
    entity is asked for and kept (up to ``max_rows`` entities, least recently used dropped first):
    the rows a query ranks get their scores without a read once their score rows are known.

    One instance belongs to one graph state: callers get it through ``entity_scores``."""

    def __init__(self, store: DocStore, tenant: str, kb_ids: Sequence[str], max_rows: int = SCORE_ROWS) -> None:
        self._store, self._tenant, self._kb_ids = store, tenant, list(kb_ids)
        self._max_rows = max_rows
        self._known: OrderedDict[str, dict | None] = OrderedDict()  # None: the entity has no score row
        self._lock = threading.Lock()

    def complete(self, docs: dict[Node, dict], fetch: Sequence[Node], fields: Sequence[str]) -> None:
        """Add the entity rows of ``fetch`` (with ``fields``) to ``docs``, and give every row of
        ``docs`` its PageRank and communities: the rows and the score rows not known yet in one
        read of the store."""
        wanted = [entity_id(kb, key) for kb, key in fetch]
        rows = list(docs.values())
        with self._lock:
            known = {i: self._known[i] for i in [d["id"] for d in rows] + wanted if i in self._known}
            for row_id in known:
                self._known.move_to_end(row_id)
        unscored = [i for i in dict.fromkeys([d["id"] for d in rows] + wanted) if i not in known]
        if wanted or unscored:
            read = self._store.get(self._tenant, self._kb_ids, [*wanted, *(entity_score_id(i) for i in unscored)],
                                   fields=list(dict.fromkeys(["id", *fields, *JOINED_FIELDS])))
            own = set(wanted)
            scored = {scored_entity_id(d["id"]): d for d in read if d["id"] not in own}
            fresh = {row_id: scored.get(row_id) for row_id in unscored}
            known.update(fresh)
            self._keep(fresh)
            for doc in read:
                if doc["id"] in own:
                    docs[(doc.get("kb_id", ""), doc.get("entity_key_kwd", ""))] = doc
                    rows.append(doc)
        join_scores(rows, known)

    def _keep(self, fresh: dict[str, dict | None]) -> None:
        if self._max_rows <= 0:
            return
        with self._lock:
            self._known.update(fresh)
            while len(self._known) > self._max_rows:
                self._known.popitem(last=False)


def entity_scores(store: DocStore, tenant: str, kb_ids: Sequence[str], state: GraphState) -> EntityScores:
    """The shared score cache of these knowledge bases at ``state`` (a private reader that keeps
    nothing when the state cannot be cached). A refresh stamps its phases in the state, so a moved
    PageRank is never served from here."""
    if not state.cacheable:
        return EntityScores(store, tenant, kb_ids, max_rows=0)
    key = ("scores", tenant, tuple(sorted(kb_ids)))
    return cached(store, key, state, lambda: EntityScores(store, tenant, kb_ids), ADJACENCY_CACHES)
