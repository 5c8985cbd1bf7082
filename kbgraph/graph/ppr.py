"""Personalized PageRank over the entity graph (the `ppr` retrieval mode, HippoRAG-style).

Building a ``SparseGraph`` costs a pass over every relation; do it once per knowledge base and graph
version and cache it (the caller's job). One PPR is then a handful of sparse mat-vec products.

Tried for the `ppr` mode on a 130k-node / 958k-entry graph and left out: a local push (Andersen-Chung-
Lang, synchronous rounds) gave the converged top-8 chunks of all 100 questions only at a threshold
(1e-7 x degree) where it cost 2.5x this walk, and at 1e-6 it was faster but changed 3 of them, as
mass reaches most of a small-world graph within a few hops; Chebyshev acceleration did not pay either
(the error left after a few steps lies in eigenvalues well inside [-d, d]).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from numpy.typing import DTypeLike

from kbgraph import parallel
from kbgraph.graph.edges import edge_arrays


# a step from the touched rows alone pays while they hold under 1/_SPARSE_SHARE of the graph's
# entries: slicing them out and collecting the next touched set costs far more per entry than a
# whole-graph product (measured on a 958k-entry graph: 1/32 beat 1/10, 1/3 and no local steps at all)
_SPARSE_SHARE = 32

# a whole-graph step is split by rows over the cores (scipy's product runs without the GIL) once
# a graph holds enough entries that a step outlasts handing work to a thread (~30 us)
_PARALLEL_MIN_ENTRIES = 200_000


def _row_blocks(matrix: sp.csr_matrix, parts: int) -> list[sp.csr_matrix]:
    """``matrix`` cut into ``parts`` consecutive row blocks holding about equal numbers of entries."""
    bounds = np.searchsorted(matrix.indptr, np.linspace(0, matrix.nnz, parts + 1)[1:-1])
    edges = [0, *sorted(set(int(b) for b in bounds)), matrix.shape[0]]
    return [matrix[a:b] for a, b in zip(edges, edges[1:]) if b > a]


@dataclass
class SparseGraph:
    """An undirected weighted graph as a row-normalized transition matrix.

    ``matrix[i, j]`` is the probability of stepping from node i to node j. ``transposed`` is the same
    matrix transposed, kept as CSR because PageRank multiplies by the transpose on every step.
    """

    nodes: list[str]
    index: dict[str, int]
    matrix: sp.csr_matrix
    transposed: sp.csr_matrix
    dangling: np.ndarray  # indices of nodes with no edges: their walk mass must be re-spread
    # (thread count, row blocks of ``transposed``) for split steps, made on the first one
    _blocks: tuple[int, list[sp.csr_matrix]] | None = field(default=None, init=False, repr=False, compare=False)

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
        matrix, transposed = (sp.csr_matrix((arrays[f"{name}_data"], arrays[f"{name}_indices"], arrays[f"{name}_indptr"]),
                                            shape=(n, n)) for name in ("matrix", "transposed"))
        return cls(nodes, {name: i for i, name in enumerate(nodes)}, matrix, transposed, np.asarray(arrays["dangling"]))

    def step(self, scores: np.ndarray) -> np.ndarray:
        """``transposed @ scores``: the mass each node receives in one step of a walk. On a large
        graph the rows are split over the cores (``parallel``), which nearly halves a step on two."""
        if parallel.THREADS < 2 or self.transposed.nnz < _PARALLEL_MIN_ENTRIES:
            return self.transposed @ scores
        if self._blocks is None or self._blocks[0] != parallel.THREADS:
            self._blocks = (parallel.THREADS, _row_blocks(self.transposed, parallel.THREADS))
        return np.concatenate(parallel.run_parts([lambda b=block: b @ scores for block in self._blocks[1]]))

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
        index = {name: i for i, name in enumerate(ordered)}
        n = len(ordered)
        rows = np.concatenate([src, dst])
        cols = np.concatenate([dst, src])
        vals = np.concatenate([wts, wts])
        adjacency = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
        adjacency.sum_duplicates()
        if hubs_first:
            ordered, adjacency = _hubs_first(ordered, adjacency)
            index = {name: i for i, name in enumerate(ordered)}
        strength = np.asarray(adjacency.sum(axis=1)).ravel()
        dangling = strength <= 0
        inverse = np.zeros(n)
        inverse[~dangling] = 1.0 / strength[~dangling]
        matrix = sp.csr_matrix(sp.diags(inverse) @ adjacency, dtype=dtype)
        transposed = sp.csr_matrix(matrix.T)
        return cls(ordered, index, matrix, transposed, np.flatnonzero(dangling))


def _hubs_first(names: list[str], adjacency: sp.csr_matrix) -> tuple[list[str], sp.csr_matrix]:
    """The names and the adjacency renumbered by decreasing degree, ties kept in name order."""
    order = np.argsort(-np.diff(adjacency.indptr), kind="stable")
    renumbered = sp.csr_matrix(adjacency[order][:, order])
    renumbered.sort_indices()
    return [names[i] for i in order], renumbered


# below this many nodes numpy's two passes cost microseconds, less than importing scipy.linalg
# (~80 ms) would add to a new process's first query
_BLAS_L1_MIN = 50_000


def _l1_norm(values: np.ndarray) -> float:
    """The sum of absolute values: on a large walk vector in one BLAS pass (numpy's abs and then sum
    read it twice, ~6x slower); scipy.linalg is imported on the first large walk only."""
    if len(values) < _BLAS_L1_MIN:
        return float(np.abs(values).sum())
    from scipy.linalg import blas

    return float((blas.sasum if values.dtype == np.float32 else blas.dasum)(values))


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
        delta = _l1_norm(scores)
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
