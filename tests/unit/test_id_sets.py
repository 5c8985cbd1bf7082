"""utils/id_sets.py gives exactly np.unique / np.union1d of integer ids."""

from __future__ import annotations

import numpy as np
import pytest

from kbgraph.utils.id_sets import union_ids, unique_ids


@pytest.mark.parametrize("size", [0, 1, 2, 7, 2000])
def test_unique_and_union_are_numpys(size: int) -> None:
    rng = np.random.default_rng(size)
    for dtype in (np.int64, np.int32):
        a = rng.integers(-50, 3 * size + 5, size=size).astype(dtype)  # repeats and negatives
        b = rng.integers(0, 5 * size + 5, size=size // 2 + 1).astype(dtype)
        for got, expected in ((unique_ids(a), np.unique(a)), (union_ids(a, b), np.union1d(a, b))):
            assert got.dtype == expected.dtype
            assert np.array_equal(got, expected)
    held = np.array([5, 1, 5], dtype=np.int64)
    unique_ids(held)
    assert held.tolist() == [5, 1, 5]  # the input is left as it was
