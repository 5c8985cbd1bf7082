"""A set of store rowids that answers "which of these rows are in it?" for thousands of rows at once.

A filtered search asks that of every candidate list: a kNN's thousands of hits against the rows
passing the filter. Binary search in the sorted rowids costs ~85 ns a row (each probe misses the
cache); a bitmap over the set's span costs ~1 ns, and the set is cached with its filter, so the
bitmap is built once. Sets scattered thinly over a wide span keep to binary search.
"""

from __future__ import annotations

import numpy as np

from kbgraph.utils.id_sets import unique_ids

# a bitmap is kept while the span is at most this many times the number of rows (a byte per rowid
# of the span, so at most this many bytes per row held)
_DENSE_SPAN = 64


class RowSet:
    """Sorted, distinct rowids (``rows``) and a membership test (``holds``). Never changed after
    construction."""

    __slots__ = ("rows", "_low", "_bitmap")

    def __init__(self, rows: np.ndarray) -> None:
        """``rows`` must be sorted and distinct."""
        self.rows = rows
        self._low = int(rows[0]) if len(rows) else 0
        span = int(rows[-1]) - self._low + 1 if len(rows) else 0
        self._bitmap: np.ndarray | None = None
        if len(rows) and span <= _DENSE_SPAN * len(rows):
            self._bitmap = np.zeros(span, dtype=bool)
            self._bitmap[rows - self._low] = True

    @classmethod
    def of(cls, rowids: np.ndarray) -> RowSet:
        """The set of any rowids (unsorted, repeated)."""
        return cls(unique_ids(rowids))

    def __len__(self) -> int:
        return len(self.rows)

    def holds(self, values: np.ndarray) -> np.ndarray:
        """Whether each of ``values`` is in the set (a boolean array as long as ``values``)."""
        if not len(values) or not len(self.rows):
            return np.zeros(len(values), dtype=bool)
        if self._bitmap is not None:
            at = values - self._low
            inside = (at >= 0) & (at < len(self._bitmap))
            held = np.zeros(len(values), dtype=bool)
            held[inside] = self._bitmap[at[inside]]
            return held
        at = np.minimum(np.searchsorted(self.rows, values), len(self.rows) - 1)
        return self.rows[at] == values
