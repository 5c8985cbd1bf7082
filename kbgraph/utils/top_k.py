"""The positions of the largest few values of a long array.

``np.argpartition`` of 40k float32 scores costs up to half a millisecond, and a query takes the
best few of such arrays several times (probed vector lists, PPR masses). A strided sample gives a
floor below which none of the best can lie as long as enough values reach it; everything above it
is a few hundred values that partition in microseconds.
"""

from __future__ import annotations

import numpy as np

# values sampled to find a floor; shorter arrays are partitioned whole
_SAMPLE = 2048


def largest(values: np.ndarray, limit: int) -> np.ndarray:
    """Positions (unsorted) of the ``limit`` largest values and of every value tied with the last
    of them, so that which of equal values are kept never depends on how they were found."""
    n = len(values)
    if limit <= 0 or n == 0:
        return np.zeros(0, dtype=np.int64)
    if n <= limit:
        return np.arange(n)
    candidates = _above_sampled_floor(values, limit) if n > 4 * _SAMPLE else None
    if candidates is None:
        return np.flatnonzero(values >= _kth_largest(values, limit))
    return candidates[values[candidates] >= _kth_largest(values[candidates], limit)]


def _kth_largest(values: np.ndarray, k: int) -> float:
    return np.partition(values, len(values) - k)[len(values) - k]


def _above_sampled_floor(values: np.ndarray, limit: int) -> np.ndarray | None:
    """Positions of the values at or above a floor read off a strided sample (about twice ``limit``
    of them), or None when fewer than ``limit`` reach it (the floor then proves nothing)."""
    step = len(values) // _SAMPLE
    sample = values[::step]
    rank = min(len(sample), 2 * (limit // step) + 2)
    floor = np.partition(sample, len(sample) - rank)[len(sample) - rank]
    candidates = np.flatnonzero(values >= floor)
    return candidates if len(candidates) >= limit else None
