import numpy as np
import pytest

from kbgraph.store.sqlite import row_set
from kbgraph.store.sqlite.row_set import RowSet


@pytest.mark.parametrize("dense_span", [64, 0])  # 0: never a bitmap, binary search only
def test_holds_agrees_with_isin(dense_span: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(row_set, "_DENSE_SPAN", dense_span)
    rng = np.random.default_rng(dense_span)
    for low, span, count in [(0, 1000, 300), (5000, 200, 199), (10, 100_000, 50), (7, 1, 1)]:
        members = rng.choice(span, size=count, replace=False) + low
        rows = RowSet.of(np.concatenate([members, members[:5]]))  # unsorted, repeated
        assert np.array_equal(rows.rows, np.unique(members)) and len(rows) == count
        assert (rows._bitmap is not None) == (span <= dense_span * count)
        # values below, inside and beyond the span, repeated, in any order
        values = rng.integers(low - 50, low + span + 50, size=3000)
        assert np.array_equal(rows.holds(values), np.isin(values, members))
        assert rows.holds(members).all()


def test_empty_sets_and_values() -> None:
    empty = RowSet.of(np.zeros(0, dtype=np.int64))
    assert len(empty) == 0 and not empty.holds(np.array([0, 1, 2])).any()
    assert RowSet.of(np.array([3, 4])).holds(np.zeros(0, dtype=np.int64)).shape == (0,)
