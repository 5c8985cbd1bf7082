"""The graph the ppr mode walks: a set of knowledge bases' entities and relations with their chunks
added as nodes (every entity linked to the chunks that mention it), numbered for the walk.

It is read from the store once per knowledge base set and graph version and cached in-process; a
changed graph (new ``graph_meta`` version) rebuilds it on the next query. Beside the embedded store
it is also written to disk (store/index_files.py), so a new process maps it instead of reading
every row.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kbgraph.graph.ppr import SparseGraph
from kbgraph.search.graph_cache import EDGE_FIELDS, Edge, Node, graph_state, relation_weight
from kbgraph.store.base import DocStore, eq, missing
from kbgraph.store.index_files import PERSIST_MIN_ROWS, array_strings, strings_array
from kbgraph.store.records import Entity, Relation


class RelationTable:
    """Every relation of the walk graph as the kg expansion walks it (``graph_cache.Edge``), indexed
    by its ends in the graph's own numbering.

    Read in the scan the graph is built from, and kept (and persisted) with it, so a question's hops
    read no listing: on the 100k-entity benchmark, a question asked for the first time spent ~2.4 ms
    of a kg query reading the relations touching its entities, 0.5 ms with the table. Only numbers
    and fixed-width ids: a new process maps them, and an edge is made when it is first asked for
    (the adjacency cache keeps it).
    """

    def __init__(self, graph: SparseGraph, ids: np.ndarray, src: np.ndarray, tgt: np.ndarray, weights: np.ndarray,
                 offsets: np.ndarray, touching: np.ndarray) -> None:
        self._graph = graph
        self._ids, self._src, self._tgt, self._weights = ids, src, tgt, weights
        self._offsets, self._touching = offsets, touching

    @classmethod
    def of(cls, graph: SparseGraph, ids: Sequence[str], sources: Sequence[str], targets: Sequence[str],
           weights: Sequence[float]) -> RelationTable:
        """From each relation's id, end nodes (``entity_node`` names) and weight, in any order."""
        count = len(ids)
        # UTF-8 bytes sort as their strings do (code point order; lone surrogates, which text read with
        # surrogateescape holds, pass too): the relations in id order
        names = np.array([i.encode("utf-8", "surrogatepass") for i in ids], dtype=np.bytes_) if count \
            else np.zeros(0, "S1")
        order = np.argsort(names, kind="stable")
        src = np.fromiter(map(graph.index.__getitem__, sources), dtype=np.int64, count=count)[order]
        tgt = np.fromiter(map(graph.index.__getitem__, targets), dtype=np.int64, count=count)[order]
        # each relation listed under both its ends (once under an end it has twice), in id order
        number = np.arange(count, dtype=np.int64)
        loop = src == tgt
        by_end = np.concatenate([src, tgt[~loop]])
        relation = np.concatenate([number, number[~loop]])
        offsets = np.zeros(graph.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(by_end, minlength=graph.size), out=offsets[1:])
        return cls(graph, names[order], src, tgt, np.asarray(weights, dtype=np.float64).reshape(count)[order],
                   offsets, relation[np.lexsort((relation, by_end))])

    def __len__(self) -> int:
        return len(self._ids)

    def edges(self, node: Node) -> tuple[Edge, ...]:
        """The relations with an end at ``node``, in id order."""
        at = self._graph.index.get(entity_node(*node))
        if at is None:
            return ()
        return tuple(Edge(self._ids[i].decode("utf-8", "surrogatepass"), self._end(int(self._src[i])),
                          self._end(int(self._tgt[i])), float(self._weights[i]))
                     for i in self._touching[self._offsets[at]:self._offsets[at + 1]].tolist())

    def _end(self, at: int) -> Node:
        _, kb, key = self._graph.nodes[at].split("\x1f", 2)
        return kb, key

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"ids": self._ids, "src": self._src, "tgt": self._tgt, "weights": self._weights,
                "offsets": self._offsets, "touching": self._touching}

    @classmethod
    def from_arrays(cls, graph: SparseGraph, arrays: dict[str, np.ndarray]) -> RelationTable:
        return cls(graph, *(np.asarray(arrays[name]) for name in ("ids", "src", "tgt", "weights", "offsets",
                                                                   "touching")))


_TABLE = "relation_table_"  # the prefix of the relation table's arrays in a persisted graph


@dataclass
class EntityGraph:
    """The walkable graph of a set of knowledge bases at given graph versions."""

    versions: tuple[tuple[str, int], ...]
    graph: SparseGraph
    chunk_nodes: np.ndarray  # node indices of the chunk nodes
    chunk_ids: list[str]  # chunk id of each chunk node, same order
    chunk_index: dict[str, int]  # chunk id -> position in chunk_nodes
    mentions: dict[str, int]  # entity node -> number of chunks citing it
    entity_nodes: np.ndarray  # node indices of the entity nodes
    # the relations the graph was built from, by end, for the kg expansion (None: a graph persisted
    # before it was kept)
    relations: RelationTable | None = None
    # worked out from the above on first use, never persisted: the chains' view, vector samples
    derived: dict = field(default_factory=dict, repr=False, compare=False)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """For store/index_files.py: a new process maps the graph instead of reading every row."""
        arrays = {f"graph_{name}": array for name, array in self.graph.to_arrays().items()}
        arrays.update(versions=strings_array([json.dumps(self.versions)]), chunk_nodes=self.chunk_nodes,
                      chunk_ids=strings_array(self.chunk_ids), mention_nodes=strings_array(list(self.mentions)),
                      mention_counts=np.fromiter(self.mentions.values(), dtype=np.int64, count=len(self.mentions)),
                      entity_nodes=self.entity_nodes)
        if self.relations is not None:
            arrays.update({f"{_TABLE}{name}": a for name, a in self.relations.to_arrays().items()})
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> EntityGraph:
        graph = SparseGraph.from_arrays({name[6:]: a for name, a in arrays.items() if name.startswith("graph_")})
        chunk_ids = array_strings(arrays["chunk_ids"])
        versions = tuple(tuple(v) for v in json.loads(array_strings(arrays["versions"])[0]))
        kept = {name[len(_TABLE):]: a for name, a in arrays.items() if name.startswith(_TABLE)}
        return cls(versions=versions, graph=graph, chunk_nodes=np.asarray(arrays["chunk_nodes"]), chunk_ids=chunk_ids,
                   chunk_index={c: i for i, c in enumerate(chunk_ids)},
                   mentions=dict(zip(array_strings(arrays["mention_nodes"]), arrays["mention_counts"].tolist())),
                   entity_nodes=np.asarray(arrays["entity_nodes"]),
                   relations=RelationTable.from_arrays(graph, kept) if kept else None)


def entity_node(kb_id: str, key: str) -> str:
    return f"e\x1f{kb_id}\x1f{key}"


def chunk_node(chunk_id: str) -> str:
    return f"c\x1f{chunk_id}"


def build_entity_graph(store: DocStore, tenant: str, kb_ids: Sequence[str], versions: tuple[tuple[str, int], ...],
                       chunk_link_weight: float = 1.0) -> EntityGraph:
    nodes: list[str] = []
    edges: list[tuple[str, str, float]] = []
    mentions: dict[str, int] = {}
    chunks: set[str] = set()
    for doc in store.scan(tenant, list(kb_ids), [eq("knowledge_graph_kwd", Entity.KIND)],
                          fields=["kb_id", "entity_key_kwd", "chunk_ids_kwd"]):
        node = entity_node(doc.get("kb_id", ""), doc.get("entity_key_kwd", ""))
        nodes.append(node)
        cited = list(doc.get("chunk_ids_kwd") or [])
        mentions[node] = len(cited)
        for cid in cited:
            chunks.add(cid)
            edges.append((node, chunk_node(cid), chunk_link_weight))
    ids: list[str] = []
    sources: list[str] = []
    targets: list[str] = []
    weights: list[float] = []
    for doc in store.scan(tenant, list(kb_ids), [eq("knowledge_graph_kwd", Relation.KIND)], fields=EDGE_FIELDS):
        kb = doc.get("kb_id", "")
        ids.append(doc["id"])
        sources.append(entity_node(kb, doc.get("src_key_kwd", "")))
        targets.append(entity_node(kb, doc.get("tgt_key_kwd", "")))
        weights.append(relation_weight(doc))
    edges.extend(zip(sources, targets, weights))
    graph = SparseGraph.from_edges(nodes, edges, hubs_first=True, dtype=np.float32)
    chunk_ids = sorted(chunks)
    chunk_nodes = np.fromiter((graph.index[chunk_node(c)] for c in chunk_ids), dtype=np.int64, count=len(chunk_ids))
    # in name order, whatever the walk's numbering, so that equal masses rank by name
    entity_nodes = np.array([graph.index[n] for n in sorted(graph.index) if n.startswith("e\x1f")], dtype=np.int64)
    return EntityGraph(versions=versions, graph=graph, chunk_nodes=chunk_nodes, chunk_ids=chunk_ids,
                       chunk_index={c: i for i, c in enumerate(chunk_ids)}, mentions=mentions,
                       entity_nodes=entity_nodes, relations=RelationTable.of(graph, ids, sources, targets, weights))


_cache: weakref.WeakKeyDictionary[DocStore, dict[tuple, EntityGraph]] = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


def graph_versions(store: DocStore, tenant: str, kb_ids: Sequence[str]) -> tuple[tuple[str, int], ...]:
    return graph_state(store, tenant, kb_ids).versions


def entity_graph(store: DocStore, tenant: str, kb_ids: Sequence[str], chunk_link_weight: float = 1.0,
                 versions: tuple[tuple[str, int], ...] | None = None) -> EntityGraph:
    """The cached graph for these knowledge bases, rebuilt when any of their versions (read when not
    given) moved."""
    versions = versions if versions is not None else graph_versions(store, tenant, kb_ids)
    key = (tenant, tuple(sorted(kb_ids)), chunk_link_weight)
    with _cache_lock:
        per_store = _cache.setdefault(store, {})
        cached = per_store.get(key)
    if cached is not None and cached.versions == versions:
        return cached
    built = _graph_from_disk(store, key, versions)
    if built is None:
        built = build_entity_graph(store, tenant, kb_ids, versions, chunk_link_weight)
        _graph_to_disk(store, key, versions, built)
    with _cache_lock:
        per_store[key] = built
    return built


def walked_relations(store: DocStore, tenant: str, kb_ids: Sequence[str],
                     versions: tuple[tuple[str, int], ...]) -> RelationTable | None:
    """The relations of the walk graph this process holds for these knowledge bases at ``versions``
    (None when it holds none: nothing is read or built here)."""
    kbs = tuple(sorted(kb_ids))
    with _cache_lock:
        held = [graph for (t, k, _), graph in _cache.get(store, {}).items()
                if t == tenant and k == kbs and graph.versions == versions]
    return next((g.relations for g in held if g.relations is not None), None)


def prepare_entity_graph(store: DocStore, tenant: str, kb_ids: Sequence[str], chunk_link_weight: float = 1.0) -> None:
    """The walk graph of these KBs written to disk for the processes that will query them
    (search/prepare.py), unless it is there already; this process does not keep it."""
    versions = graph_versions(store, tenant, kb_ids)
    key = (tenant, tuple(sorted(kb_ids)), chunk_link_weight)
    if store.index_files() is None or not _persistable(versions) or _graph_from_disk(store, key, versions):
        return
    # its nodes are the entities and the chunks they cite: a smaller graph is built in milliseconds
    nodes_at_most = sum(store.count(tenant, list(kb_ids), [where]) for where in
                        (eq("knowledge_graph_kwd", Entity.KIND), missing("knowledge_graph_kwd")))
    if nodes_at_most < PERSIST_MIN_ROWS:
        return
    _graph_to_disk(store, key, versions, build_entity_graph(store, tenant, kb_ids, versions, chunk_link_weight))


def _graph_from_disk(store: DocStore, key: tuple, versions: tuple[tuple[str, int], ...]) -> EntityGraph | None:
    files = store.index_files()
    if files is None or not _persistable(versions):
        return None
    loaded = files.load(key, EntityGraph, sum(v for _, v in versions))
    return loaded[1] if loaded is not None and loaded[1].versions == versions else None


def _graph_to_disk(store: DocStore, key: tuple, versions: tuple[tuple[str, int], ...], graph: EntityGraph) -> None:
    files = store.index_files()
    if files is not None and _persistable(versions) and graph.graph.size >= PERSIST_MIN_ROWS:
        files.save(key, sum(v for _, v in versions), graph)


def _persistable(versions: tuple[tuple[str, int], ...]) -> bool:
    # a graph without a graph_meta row (version -1) can change without its version moving
    return all(version > 0 for _, version in versions)


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
