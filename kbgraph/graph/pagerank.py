"""Global PageRank of the knowledge-base entity graph (a prior for kg retrieval and report ordering)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from kbgraph.graph.ppr import SparseGraph


def pagerank_vector(graph: SparseGraph, damping: float = 0.85, max_iter: int = 200,
                    tol: float = 1e-10) -> np.ndarray:
    n = graph.size
    if n == 0:
        return np.zeros(0)
    uniform = np.full(n, 1.0 / n)
    scores = uniform.copy()
    for _ in range(max_iter):
        # isolated nodes have nowhere to send their mass; spreading it uniformly keeps the sum at 1
        lost = scores[graph.dangling].sum()
        new = damping * graph.step(scores) + (1.0 - damping + damping * lost) * uniform
        delta = np.abs(new - scores).sum()
        scores = new
        if delta < tol:
            break
    return scores / scores.sum()


def weighted_pagerank(edges: Iterable[tuple[str, str, float]], nodes: Iterable[str],
                      damping: float = 0.85) -> dict[str, float]:
    """Entity key -> PageRank over the undirected weighted graph; isolated nodes included, sums to 1."""
    graph = SparseGraph.from_edges(nodes, edges)
    scores = pagerank_vector(graph, damping=damping)
    return dict(zip(graph.nodes, scores.tolist()))
