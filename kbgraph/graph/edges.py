"""The entity graph's edges as numpy arrays, shared by PageRank, the PPR walk and communities."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def edge_weight(weight: float) -> float:
    """Relations with no usable weight still connect their endpoints, so they count as 1."""
    return weight if weight > 0 and math.isfinite(weight) else 1.0


def edge_arrays(nodes: Iterable[str], edges: Iterable[tuple[str, str, float]]
                ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(node names sorted, sources, targets, weights): nodes are the union of ``nodes`` and the edge
    endpoints, numbered in name order (so indices, and float sums over them, are reproducible);
    self-loops are dropped and unusable weights count as 1 (``edge_weight``)."""
    edge_list = list(edges)
    sources, targets, raw = zip(*edge_list) if edge_list else ((), (), ())
    names = sorted({*nodes, *sources, *targets})
    index = {name: i for i, name in enumerate(names)}
    m = len(edge_list)
    src = np.fromiter(map(index.__getitem__, sources), dtype=np.int64, count=m)
    dst = np.fromiter(map(index.__getitem__, targets), dtype=np.int64, count=m)
    weights = np.asarray(raw, dtype=np.float64).reshape(m)
    weights[~(np.isfinite(weights) & (weights > 0))] = 1.0
    keep = src != dst
    return names, src[keep], dst[keep], weights[keep]
