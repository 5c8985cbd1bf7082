"""Global PageRank of the knowledge-base entity graph (a prior for kg retrieval and report ordering).

Plain numpy, like every graph computation of kbgraph (scipy is not a dependency): the refresh runs
this once per graph version, on graphs a few times smaller than the ones retrieval walks.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from kbgraph.graph.edges import edge_arrays


def _directed_entries(nodes: Iterable[str], edges: Iterable[tuple[str, str, float]]
                      ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(sorted node names, sources, targets, weights): each undirected edge in both directions, in a
    canonical order, so that float sums do not depend on the order the edges came in."""
    names, src, dst, weights = edge_arrays(nodes, edges)
    both_src, both_dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    both_weights = np.concatenate([weights, weights])
    order = np.lexsort((both_weights, both_src, both_dst))
    return names, both_src[order], both_dst[order], both_weights[order]


def weighted_pagerank(edges: Iterable[tuple[str, str, float]], nodes: Iterable[str],
                      damping: float = 0.85, max_iter: int = 200, tol: float = 1e-10) -> dict[str, float]:
    """Entity key -> PageRank over the undirected weighted graph; isolated nodes included, sums to 1.

    Parallel edges add up; a node's walk leaves along its edges in proportion to their weights.
    """
    names, src, dst, weights = _directed_entries(nodes, edges)
    n = len(names)
    if n == 0:
        return {}
    strength = np.bincount(src, weights=weights, minlength=n)
    dangling = strength <= 0
    share = weights / strength[src]  # the probability of each directed step
    uniform = np.full(n, 1.0 / n)
    scores = uniform.copy()
    for _ in range(max_iter):
        # isolated nodes have nowhere to send their mass; spreading it uniformly keeps the sum at 1
        lost = scores[dangling].sum()
        received = np.bincount(dst, weights=share * scores[src], minlength=n)
        new = damping * received + (1.0 - damping + damping * lost) * uniform
        delta = np.abs(new - scores).sum()
        scores = new
        if delta < tol:
            break
    scores /= scores.sum()
    return dict(zip(names, scores.tolist()))
