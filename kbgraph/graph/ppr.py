"""Personalized PageRank over the entity graph (the `ppr` retrieval mode, HippoRAG-style).

Building a ``SparseGraph`` costs a pass over every relation; do it once per knowledge base and graph
version and cache it (the caller's job). One PPR is then a handful of sparse mat-vec products.

Tried for the `ppr` mode on a 130k-node / 958k-entry graph and left out: a local push (Andersen-Chung-
Lang, synchronous rounds) gave the converged top-8 chunks of all 100 questions only at a threshold
(1e-7 x degree) where it cost 2.5x this walk, and at 1e-6 it was faster but changed 3 of them, as
mass reaches most of a small-world graph within a few hops; Chebyshev acceleration did not pay either
(the error left after a few steps lies in eigenvalues well inside [-d, d]).

The sparse products are numpy only (scipy, 140 MB installed, is not a dependency): see ``_RowPlan``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import DTypeLike

from kbgraph.graph.edges import edge_arrays


# a step from the touched rows alone pays while they hold under 1/_SPARSE_SHARE of the graph's
# entries: slicing them out and collecting the next touched set costs far more per entry than a
# whole-graph product (measured on a 958k-entry graph: 1/32 beat 1/10, 1/3 and no local steps at all)
_SPARSE_SHARE = 32

# rows with at most this many entries are summed as columns of a (degree x rows) block, rows with
# more by np.add.reduceat (whose per-row cost only pays on long rows); see _RowPlan
_SHORT_ROW = 16

# entries per pass of a product: gathered values, entries and sums of one piece stay in the cache
_PIECE = 1 << 15


@dataclass(frozen=True)
class CSR:
    """A sparse matrix in compressed sparse rows (the layout scipy and the index files use): row i's
    column numbers are ``indices[indptr[i]:indptr[i + 1]]``, in increasing order, its values the
    same slice of ``data``."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]

    @property
    def nnz(self) -> int:
        return len(self.data)

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def row_numbers(self) -> np.ndarray:
        """The row of every entry."""
        return np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))

    def row_sums(self) -> np.ndarray:
        return np.bincount(self.row_numbers(), weights=self.data, minlength=self.shape[0])

    def toarray(self) -> np.ndarray:
        dense = np.zeros(self.shape, dtype=self.dtype)
        dense[self.row_numbers(), self.indices] = self.data
        return dense

    def __matmul__(self, vector: np.ndarray) -> np.ndarray:
        return _RowPlan(self, np.arange(self.shape[0]), short_row=0).product(vector)

    def equals(self, other: CSR) -> bool:
        return (self.shape == other.shape and np.array_equal(self.indptr, other.indptr)
                and np.array_equal(self.indices, other.indices) and np.array_equal(self.data, other.data))


def _index_dtype(*sizes: int) -> type:
    return np.int32 if max(sizes, default=0) < 2**31 else np.int64


def _csr(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, n: int) -> CSR:
    """An n x n CSR of entries with distinct (row, column) pairs."""
    order = np.argsort(rows * n + cols, kind="stable")
    index_dtype = _index_dtype(n, len(values))
    indptr = np.zeros(n + 1, dtype=index_dtype)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return CSR(values[order], cols[order].astype(index_dtype), indptr, (n, n))


class _RowPlan:
    """``matrix @ x`` for a set of its rows, laid out so that numpy computes it in few, cache-sized passes.

    A product gathers ``x`` at every entry's column (``np.take``), multiplies by the entries and sums
    each row. Two things make that slow in numpy, and the layout avoids both: ``np.add.reduceat``
    costs per row, and most rows of an entity graph are short (median degree ~4); and each of the
    three passes over a whole graph's entries goes through memory. So rows are taken longest first:
    the long ones are summed by reduceat; each run of rows with the same short length k is stored
    entry by entry (a k x rows block, summed by np.add.reduce in k-1 vector adds); and the entries are
    cut into pieces of ~``_PIECE`` that go through all three passes while they sit in the cache. On a
    130k-node / 958k-entry graph a product costs ~1.6x scipy's compiled loop (gather + multiply +
    reduceat over the whole graph: ~4x).
    """

    def __init__(self, matrix: CSR, rows: np.ndarray, short_row: int = _SHORT_ROW) -> None:
        lengths = np.diff(matrix.indptr)[rows].astype(np.int64)
        # the product computes row rows[order[i]] i-th; on a hubs-first graph order is the identity
        self.order = np.argsort(-lengths, kind="stable")
        self.in_order = bool(np.array_equal(self.order, np.arange(len(rows))))
        lengths = lengths[self.order]
        starts = matrix.indptr[:-1][rows[self.order]].astype(np.int64)
        positions: list[np.ndarray] = []
        # (first entry, entries, first row, rows, reduceat offsets of its rows or the rows' common length)
        self.pieces: list[tuple[int, int, int, int, np.ndarray | int]] = []
        long_rows = int(np.searchsorted(-lengths, -short_row, side="left"))
        row = 0
        while row < long_rows:  # consecutive long rows holding up to _PIECE entries (or one longer row)
            ends = np.cumsum(lengths[row:long_rows])
            count = max(1, int(np.searchsorted(ends, _PIECE, side="right")))
            offsets = np.concatenate([[0], ends[:count - 1]])
            positions.append(np.repeat(starts[row:row + count] - offsets, lengths[row:row + count])
                             + np.arange(int(ends[count - 1])))
            self._add_piece(int(ends[count - 1]), row, count, offsets.astype(np.intp))
            row += count
        for length in range(min(short_row, int(lengths[row:].max(initial=0))), 0, -1):
            stop = int(np.searchsorted(-lengths, -length, side="right"))
            step = max(1, _PIECE // length)
            for first in range(row, stop, step):
                count = min(step, stop - first)
                positions.append((starts[first:first + count][None, :] + np.arange(length)[:, None]).ravel())
                self._add_piece(length * count, first, count, length)
            row = stop
        taken = np.concatenate(positions) if positions else np.zeros(0, dtype=np.int64)
        # kept narrow (int32 below 2**31 nodes): a step reads every entry's column, and np.take wants
        # intp, so each piece is widened into a small buffer that stays in the cache. On the
        # 958k-entry benchmark graph a step from a cold cache took 1.19-1.32 ms against 1.52-1.62
        # with intp columns (min of 40; the same from a warm cache), and the plan holds 3.8 MB less
        self.indices = matrix.indices[taken]
        self.data = matrix.data[taken]
        self.rows = len(rows)

    def _add_piece(self, entries: int, row: int, count: int, sums: np.ndarray | int) -> None:
        first = self.pieces[-1][0] + self.pieces[-1][1] if self.pieces else 0
        self.pieces.append((first, entries, row, count, sums))

    def product(self, x: np.ndarray) -> np.ndarray:
        """``(matrix @ x)[rows]``."""
        dtype = np.result_type(x, self.data)
        x = np.asarray(x, dtype=dtype)
        out = np.zeros(self.rows, dtype=dtype)
        longest = max((p[1] for p in self.pieces), default=0)
        buffer = np.empty(longest, dtype=dtype)
        columns = np.empty(longest, dtype=np.intp)
        for entry, entries, row, count, sums in self.pieces:
            terms, wide = buffer[:entries], columns[:entries]
            wide[...] = self.indices[entry:entry + entries]
            # mode="wrap" skips take's per-element bounds check (~1.6x faster); every index is in range
            x.take(wide, out=terms, mode="wrap")
            np.multiply(terms, self.data[entry:entry + entries], out=terms)
            if isinstance(sums, int):
                np.add.reduce(terms.reshape(sums, count), axis=0, out=out[row:row + count])
            else:
                out[row:row + count] = np.add.reduceat(terms, sums)
        if self.in_order:
            return out
        ordered = np.empty_like(out)
        ordered[self.order] = out
        return ordered


@dataclass
class SparseGraph:
    """An undirected weighted graph as a row-normalized transition matrix.

    ``matrix[i, j]`` is the probability of stepping from node i to node j. ``transposed`` is the same
    matrix transposed, kept as CSR because PageRank multiplies by the transpose on every step.
    """

    nodes: list[str]
    index: dict[str, int]
    matrix: CSR
    transposed: CSR
    dangling: np.ndarray  # indices of nodes with no edges: their walk mass must be re-spread
    # the plan of whole-graph steps, made on the first one
    _plan: _RowPlan | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def size(self) -> int:
        return len(self.nodes)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The graph as arrays, for store/index_files.py; ``from_arrays`` gives it back."""
        from kbgraph.store.index_files import strings_array

        arrays = {"nodes": strings_array(self.nodes), "dangling": self.dangling}
        for name, m in (("matrix", self.matrix), ("transposed", self.transposed)):
            arrays.update({f"{name}_data": m.data, f"{name}_indices": m.indices, f"{name}_indptr": m.indptr})
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "SparseGraph":
        from kbgraph.store.index_files import array_strings

        nodes = array_strings(arrays["nodes"])
        n = len(nodes)
        matrix, transposed = (CSR(arrays[f"{name}_data"], arrays[f"{name}_indices"], arrays[f"{name}_indptr"], (n, n))
                              for name in ("matrix", "transposed"))
        return cls(nodes, {name: i for i, name in enumerate(nodes)}, matrix, transposed, np.asarray(arrays["dangling"]))

    def step(self, scores: np.ndarray) -> np.ndarray:
        """``transposed @ scores``: the mass each node receives in one step of a walk.

        On one thread: split by rows over the two cores of the development machine, a step on the
        130k-node / 958k-entry graph of bench/query_latency.py took as long as whole on one core
        (0.69-0.77 ms against 0.64-0.69 ms, min of 30; the product is bound by memory), and longer
        whenever another process held the second core (bench/README.md, issue 41 item 5)."""
        if self._plan is None:
            self._plan = _RowPlan(self.transposed, np.arange(self.size))
        return self._plan.product(scores)

    def step_from(self, support: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``step(scores)`` when only the ``support`` nodes hold mass, reading only their rows; and
        which nodes those rows reach (a boolean mask)."""
        starts = self.matrix.indptr[support]
        counts = self.matrix.indptr[support + 1] - starts
        # the positions of the support rows' entries in the matrix, row after row
        entries = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        targets = self.matrix.indices[entries]
        sent = self.matrix.data[entries] * np.repeat(scores[support], counts)
        received = np.bincount(targets, weights=sent, minlength=self.size).astype(self.matrix.dtype)
        reached = np.zeros(self.size, dtype=bool)
        reached[targets] = True
        return received, reached

    @classmethod
    def from_edges(cls, nodes: Iterable[str], edges: Iterable[tuple[str, str, float]],
                   hubs_first: bool = False, dtype: DTypeLike = np.float64) -> "SparseGraph":
        """Nodes are the union of ``nodes`` and edge endpoints; parallel edges add up, self-loops are dropped.

        Nodes are numbered in name order, or with ``hubs_first`` by decreasing number of neighbours
        (ties in name order): a walk then reads the scores of the busiest nodes from a few cache
        lines, which makes a mat-vec on a preferential-attachment graph ~1.4x faster. Walks run in
        ``dtype``: float32 reads half the bytes per step (~25% faster) and moves each score by less
        than 1e-7 of the total mass, far below what stopping a walk at a tolerance of 1e-3 leaves.
        """
        ordered, src, dst, wts = edge_arrays(nodes, edges)
        n = len(ordered)
        # each node pair summed once, so both directions carry the very same weight
        pairs, at = np.unique(np.minimum(src, dst) * n + np.maximum(src, dst), return_inverse=True)
        weights = np.bincount(at.ravel(), weights=wts, minlength=len(pairs))
        low, high = pairs // n, pairs % n
        rows, cols, values = np.concatenate([low, high]), np.concatenate([high, low]), np.concatenate([weights, weights])
        if hubs_first:
            order = np.argsort(-np.bincount(rows, minlength=n), kind="stable")
            renumber = np.empty(n, dtype=np.int64)
            renumber[order] = np.arange(n)
            ordered, rows, cols = [ordered[i] for i in order], renumber[rows], renumber[cols]
        adjacency = _csr(rows, cols, values, n)
        strength = adjacency.row_sums()
        dangling = strength <= 0
        inverse = np.zeros(n)
        inverse[~dangling] = 1.0 / strength[~dangling]
        # the adjacency is symmetric: its transpose has the same rows, each entry divided by its column's strength
        matrix = CSR((adjacency.data * inverse[adjacency.row_numbers()]).astype(dtype), adjacency.indices,
                     adjacency.indptr, (n, n))
        transposed = CSR((adjacency.data * inverse[adjacency.indices]).astype(dtype), adjacency.indices,
                         adjacency.indptr, (n, n))
        return cls(ordered, {name: i for i, name in enumerate(ordered)}, matrix, transposed, np.flatnonzero(dangling))


def _l1_norm_in_place(values: np.ndarray) -> float:
    """The sum of absolute values; ``values`` is overwritten (no second vector is allocated)."""
    return float(np.abs(values, out=values).sum())


def ppr_vector(graph: SparseGraph, seeds: dict[str, float], damping: float = 0.5, max_iter: int = 30,
               tol: float = 1e-4) -> np.ndarray:
    """The PPR score of every node (sums to 1), or an all-zero vector when no seed is in the graph.

    ``damping`` is the probability of following an edge rather than jumping back to a seed; HippoRAG
    uses 0.5, which keeps mass within a few hops of the seeds. ``tol`` bounds the L1 change of one
    step; at 0.5 the default stops after ~14 steps, and the top 100 match a fully converged run.
    """
    # the restart vector as (seed nodes, weights): a few dozen entries of a vector of 100k+
    found = {key: weight for key, weight in seeds.items() if weight > 0 and key in graph.index}
    scores = np.zeros(graph.size, dtype=graph.matrix.dtype)
    if not found:
        return scores
    nodes = np.fromiter(map(graph.index.__getitem__, found), dtype=np.int64, count=len(found))
    seed_nodes, at = np.unique(nodes, return_inverse=True)
    restart = np.bincount(at, weights=list(found.values()), minlength=len(seed_nodes))
    total = restart.sum()
    if total <= 0:
        return scores
    restart /= total
    scores[seed_nodes] = restart
    support: np.ndarray | None = seed_nodes  # the nodes holding mass, while few enough to step from alone
    for _ in range(max_iter):
        if support is not None:
            entries = graph.matrix.indptr[support + 1] - graph.matrix.indptr[support]
            if int(entries.sum()) * _SPARSE_SHARE < graph.matrix.nnz:
                new, reached = graph.step_from(support, scores)
                reached[seed_nodes] = True  # every edge weight is positive: the reached nodes hold the mass
                support = np.flatnonzero(reached)
            else:
                support = None
        if support is None:
            new = graph.step(scores)
        new *= damping
        # mass that reached a node with no edges goes back to the seeds rather than leaking away
        lost = scores[graph.dangling].sum() if len(graph.dangling) else 0.0
        new[seed_nodes] += (1.0 - damping + damping * lost) * restart
        np.subtract(scores, new, out=scores)
        delta = _l1_norm_in_place(scores)
        scores = new
        if delta < tol:
            break
    return scores


def personalized_pagerank(adjacency: SparseGraph, seeds: dict[str, float], damping: float = 0.5,
                          max_iter: int = 30, tol: float = 1e-4, top_k: int | None = 1000) -> dict[str, float]:
    """Node key -> PPR score for the ``top_k`` best nodes (all non-zero nodes when None), best first.

    Only the top of the ranking is materialised because building a 100k-entry dict costs more than
    the PageRank itself.
    """
    scores = ppr_vector(adjacency, seeds, damping=damping, max_iter=max_iter, tol=tol)
    nonzero = np.flatnonzero(scores > 0)
    if top_k is not None and len(nonzero) > top_k:
        part = np.argpartition(-scores[nonzero], top_k - 1)[:top_k]
        nonzero = nonzero[part]
    # ties broken by node index (= sorted key) so equal scores come out in a reproducible order
    order = nonzero[np.lexsort((nonzero, -scores[nonzero]))]
    nodes = adjacency.nodes
    return {nodes[i]: float(scores[i]) for i in order}
