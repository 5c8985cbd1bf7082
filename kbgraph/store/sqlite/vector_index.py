"""In-memory vectors of one vector field over one slice of a store's rows (one KB, one kind).

Small slices are searched exactly (one matrix-vector product). From ``IVF_MIN_ROWS`` rows on, a
slice also keeps an inverted-file index: k-means centroids, with the rows stored grouped by their
nearest centroid, so a query scores the centroids and then only the rows of the ``probe`` nearest
lists (a sixteenth of the slice once it is large) -- the approximation Elasticsearch makes too,
with HNSW.
A filter that leaves few rows is searched exactly over those rows.

Like ``text_index.FieldPostings``, a slice is kept current from the store's change log: changed
rows are masked out and their new vectors go to an exactly-searched tail; once the tail and the
masked rows pass a share of the slice it is compacted (vectors re-assigned to the existing
centroids, re-trained when the slice has doubled). Instances are never changed after construction,
but for a slice memory-mapped from its snapshot, whose vectors are copied into memory once it is in
use (the same numbers, read twice as fast).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from kbgraph.store.sqlite.row_set import RowSet
from kbgraph.utils.top_k import largest

IVF_MIN_ROWS = 20_000
# A scan is bound by memory bandwidth, so its cost is the rows it reads. Finer lists fit a query's
# neighbourhood more closely: on 100k all-MiniLM-L6-v2 vectors of Wikipedia text, 400 lists probed
# 25 at a time (6% of the rows) found as many of the exact top 24 (0.90) as 100 lists probed 12 at
# a time (12%), and halved the rows read.
_ROWS_PER_LIST = 250
_MIN_LISTS, _MAX_LISTS = 32, 1024
_PROBE_SHARE = 16  # probe 1/16 of the lists
_MIN_PROBE = 16  # but at least this many: a small slice's few lists each hold much of its rows
_TRAIN_SAMPLE = 40_000
_TRAIN_ROUNDS = 8
_TAIL_SHARE = 0.1
_TAIL_FLOOR = 2000
_BLOCK = 16_384  # rows per block when assigning, to bound temporary memory
_WIDEN = 4  # a filter keeping most rows: look this many times deeper, then filter
# searches of a slice memory-mapped from its snapshot after which its vectors are copied into the
# process's memory (``VectorSlice.search``): a one-off query reads only its probed lists of the file
_COPY_AFTER = 8


def _cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``matrix @ query`` on this thread alone.

    BLAS runs a product this size on all its threads; on a machine whose other cores are busy, a
    query then waits for a thread to be scheduled, which made p99 latency 2x worse in the query
    benchmark. ``vecdot`` stays on this thread and runs a SIMD dot product per row: a 300k-row
    slice's 64 probed lists took 2.1 ms (median) against einsum's 3.1 ms, on one core as on a
    loaded machine (bench/README.md, the session of 2026-12-02).
    """
    return np.vecdot(matrix, query)


def _scan(matrix: np.ndarray, spans: Sequence[slice], query: np.ndarray) -> np.ndarray:
    """Cosines of the rows in ``spans`` (in span order) with ``query``, on this thread.

    Sharing the spans out over two threads did not pay on the 2-core development machine: the scan
    is bound by memory bandwidth, which one core nearly fills. The 300k-row relation slice's probed
    lists took 1.47 ms (min) on one thread against 1.51 ms split in two, the 100k-row entity slice's
    0.31 against 0.35 ms, and the split's p90 was worse whenever other processes held a core
    (the helper thread waits for one): bench/README.md, issue 41 item 5.
    """
    if not spans:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate([_cosines(matrix[span], query) for span in spans])


def _top(rowids: np.ndarray, sims: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best rows and any tied with the last (the caller breaks ties by rowid)."""
    if len(sims) > k:
        keep = largest(sims, k)
        return rowids[keep], sims[keep]
    return rowids, sims


def _assign(matrix: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    out = np.empty(len(matrix), dtype=np.int32)
    for start in range(0, len(matrix), _BLOCK):
        out[start:start + _BLOCK] = np.argmax(matrix[start:start + _BLOCK] @ centroids.T, axis=1)
    return out


def _train(matrix: np.ndarray, lists: int, seed: int = 0) -> np.ndarray:
    """Spherical k-means on a sample: unit centroids."""
    rng = np.random.default_rng(seed)
    sample = matrix[rng.choice(len(matrix), size=min(len(matrix), _TRAIN_SAMPLE), replace=False)]
    centroids = sample[rng.choice(len(sample), size=lists, replace=False)].copy()
    for _ in range(_TRAIN_ROUNDS):
        labels = _assign(sample, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, labels, sample)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        empty = norms[:, 0] == 0
        # an empty list restarts at a random sample row
        sums[empty] = sample[rng.choice(len(sample), size=int(empty.sum()))]
        norms[empty] = 1.0
        centroids = (sums / norms).astype(np.float32)
    return centroids


class _Mapped:
    """The searches of a memory-mapped slice, counted until its copy into memory starts."""

    def __init__(self) -> None:
        self._searches = 0
        self._lock = threading.Lock()

    def count_search(self) -> bool:
        """Count one search; True exactly once, at the ``_COPY_AFTER``-th."""
        with self._lock:
            self._searches += 1
            return self._searches == _COPY_AFTER


class VectorSlice:
    """Unit vectors of one slice, searchable by cosine; see the module docstring."""

    def __init__(self, rowids: np.ndarray, matrix: np.ndarray, centroids: np.ndarray | None = None,
                 trained_rows: int = 0) -> None:
        """``matrix`` rows must be unit vectors (zero rows allowed), ``rowids`` their row ids."""
        self.dim = matrix.shape[1] if matrix.ndim == 2 else 0
        self._centroids: np.ndarray | None = None
        self._offsets: np.ndarray | None = None
        self._trained_rows = trained_rows
        if len(rowids) >= IVF_MIN_ROWS:
            lists = int(np.clip(len(rowids) // _ROWS_PER_LIST, _MIN_LISTS, _MAX_LISTS))
            if centroids is None or len(rowids) > 2 * max(trained_rows, 1) or len(centroids) * 2 < lists:
                centroids, self._trained_rows = _train(matrix, lists), len(rowids)
            labels = _assign(matrix, centroids)
            order = np.argsort(labels, kind="stable")
            rowids, matrix = rowids[order], matrix[order]
            self._centroids = centroids
            self._offsets = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=len(centroids)))])
        self._rowids = rowids
        self._matrix = matrix
        self._by_rowid = np.argsort(rowids, kind="stable")  # positions in rowid order, for lookups
        self._sorted_rowids = rowids[self._by_rowid]
        self._alive = np.ones(len(rowids), dtype=bool)
        self._dead = 0
        self._tail_rowids = np.zeros(0, dtype=np.int64)
        self._tail = np.zeros((0, self.dim), dtype=np.float32)
        self._mapped: _Mapped | None = None  # set on a slice memory-mapped from its snapshot

    # ------------------------------------------------------------------------------ on disk

    _SAVED = ("rowids", "matrix", "by_rowid", "sorted_rowids", "alive", "tail_rowids", "tail")

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The slice as arrays (store/index_files.py); ``from_arrays`` gives it back, memory-mapped."""
        arrays = {name: getattr(self, f"_{name}") for name in self._SAVED}
        arrays["shape"] = np.array([self.dim, self._trained_rows], dtype=np.int64)
        if self._centroids is not None and self._offsets is not None:
            arrays["centroids"], arrays["offsets"] = self._centroids, self._offsets
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> VectorSlice:
        new = object.__new__(cls)
        for name in cls._SAVED:
            setattr(new, f"_{name}", arrays[name])
        new.dim, new._trained_rows = (int(v) for v in arrays["shape"])
        new._centroids, new._offsets = arrays.get("centroids"), arrays.get("offsets")
        new._dead = int(len(new._alive) - np.count_nonzero(new._alive))
        new._mapped = _Mapped()
        return new

    def _read_in_after_use(self) -> None:
        """Count a search of a memory-mapped slice; at the ``_COPY_AFTER``-th, copy its vectors into
        the process's memory on a thread of their own. A probed list read through the mapping took
        twice as long as from a copy (6.5 against 3.6 ms a search of the 300k-relation slice, median
        of random queries: the copy sits in huge pages, the mapping in 4 KiB ones), and a process
        that built the slice itself holds it in memory too: the slice cache's budget counts it the
        same either way. The copy holds the same numbers, so no search answers differently."""
        mapped = self._mapped
        if mapped is None or not mapped.count_search():
            return

        def copy() -> None:
            self._matrix = np.array(self._matrix)
            self._mapped = None

        threading.Thread(target=copy, name="kbgraph-vectors-read-in", daemon=True).start()

    # ------------------------------------------------------------------------------ upkeep

    @property
    def rows(self) -> int:
        return int(len(self._rowids) - self._dead + len(self._tail_rowids))

    @property
    def read_rows(self) -> int:
        """The rows a build reads (kept on disk from PERSIST_MIN_ROWS: slice_cache.py)."""
        return self.rows

    @property
    def nbytes(self) -> int:
        return int(self._matrix.nbytes + self._tail.nbytes + 3 * self._rowids.nbytes)

    def _positions(self, rowids: np.ndarray) -> np.ndarray:
        """Base positions of those ``rowids`` held in the base matrix."""
        at = np.searchsorted(self._sorted_rowids, rowids)
        inside = at < len(self._sorted_rowids)
        at, rowids = at[inside], rowids[inside]
        return self._by_rowid[at[self._sorted_rowids[at] == rowids]]

    def updated(self, changed: np.ndarray, rowids: np.ndarray, matrix: np.ndarray) -> VectorSlice:
        """A slice in which the ``changed`` rows hold ``matrix`` (rows of ``rowids``) or are gone."""
        new = object.__new__(VectorSlice)
        new.__dict__.update(self.__dict__)
        new._mapped = _Mapped() if self._mapped is not None else None  # its own count (self may copy its own)
        new._alive = self._alive.copy()
        new._alive[self._positions(changed)] = False
        new._dead = int(len(new._alive) - np.count_nonzero(new._alive))
        keep = ~np.isin(self._tail_rowids, changed)
        new._tail_rowids = np.concatenate([self._tail_rowids[keep], rowids])
        new._tail = np.concatenate([self._tail[keep], matrix.reshape(-1, self.dim or matrix.shape[-1])])
        if not self.dim and len(matrix):
            new.dim = matrix.shape[1]
        if new._dead + len(new._tail_rowids) > max(_TAIL_FLOOR, _TAIL_SHARE * len(self._rowids)):
            return new.compacted()
        return new

    def compacted(self) -> VectorSlice:
        rowids = np.concatenate([self._rowids[self._alive], self._tail_rowids])
        matrix = np.concatenate([self._matrix[self._alive], self._tail]) if self.dim else self._matrix
        return VectorSlice(rowids, matrix, self._centroids, self._trained_rows)

    # ------------------------------------------------------------------------------ search

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best (rowids, cosines): exact on small slices, probed lists on large ones."""
        self._read_in_after_use()
        if self._centroids is None or self._offsets is None:
            positions = np.flatnonzero(self._alive) if self._dead else None
            rowids, matrix = (self._rowids, self._matrix) if positions is None else \
                (self._rowids[positions], self._matrix[positions])
            found = [(rowids, _scan(matrix, [slice(0, len(rowids))], query) if len(rowids)
                      else np.zeros(0, np.float32))]
        else:
            probe = min(len(self._centroids), max(_MIN_PROBE, len(self._centroids) // _PROBE_SHARE))
            lists = np.sort(np.argpartition(-_cosines(self._centroids, query), probe - 1)[:probe])
            spans = [slice(self._offsets[n], self._offsets[n + 1]) for n in lists]
            rowids = np.concatenate([self._rowids[span] for span in spans])
            sims = _scan(self._matrix, spans, query)
            if self._dead:
                live = np.concatenate([self._alive[span] for span in spans])
                rowids, sims = rowids[live], sims[live]
            found = [(rowids, sims)]
        if len(self._tail_rowids):
            found.append((self._tail_rowids, _cosines(self._tail, query)))
        return self._best(found, k)

    def search_within(self, query: np.ndarray, allowed: RowSet, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best among the ``allowed`` rowids: exact over them when they are few; when
        they are most of the slice, the unfiltered search's wider best list, filtered."""
        if 2 * len(allowed) >= self.rows:
            rowids, sims = self.search(query, _WIDEN * k)
            keep = allowed.holds(rowids)
            if np.count_nonzero(keep) >= k:
                return _top(rowids[keep], sims[keep], k)
        return _top(*self.cosines(query, allowed.rows), k)

    def cosines(self, query: np.ndarray, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cosines of those ``rowids`` this slice holds (rowids, cosines)."""
        positions = self._positions(rowids)
        if self._dead:
            positions = positions[self._alive[positions]]
        found = [(self._rowids[positions], _cosines(self._matrix[positions], query))] if len(positions) else []
        if len(self._tail_rowids):
            in_tail = np.isin(self._tail_rowids, rowids)
            if in_tail.any():
                found.append((self._tail_rowids[in_tail], _cosines(self._tail[in_tail], query)))
        return self._best(found, len(rowids) + len(self._tail_rowids))

    @staticmethod
    def _best(found: Sequence[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
        found = [f for f in found if len(f[0])]
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        rowids = np.concatenate([f[0] for f in found])
        sims = np.concatenate([f[1] for f in found])
        return _top(rowids, sims, k)
