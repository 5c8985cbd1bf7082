"""Sorted, distinct integer ids: ``np.unique`` and ``np.union1d`` by sorting.

From numpy 2.3 on, ``np.unique`` (and ``np.union1d``, which calls it) first collects the distinct
values in a hash table. On the few thousand int64 rowids of a search's candidate lists that costs
~100-110 us against ~7 us for a sort and a neighbour comparison (numpy 2.4.6, 2,124 rowids, min of
300), and a kg query takes ~25 of them (bench/README.md, issue 41 item 5). The results are the
same arrays: the distinct values in increasing order.
"""

from __future__ import annotations

import numpy as np


def unique_ids(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for integer ids (a new array)."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    first = np.empty(len(ordered), dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]


def union_ids(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.union1d(a, b)`` for integer ids."""
    return unique_ids(np.concatenate([a, b]))
