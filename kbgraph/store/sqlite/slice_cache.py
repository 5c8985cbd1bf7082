"""The store's in-memory indexes and filter sets, cached per slice and kept current.

A slice is one KB's rows of one kind for one field: its postings (term_search.py) or vectors
(vector_search.py). ``_kept_current`` reuses a cached slice at the KB's generation, updates it
with the rows the change log names, or builds it (from the newest snapshot on disk first:
kbgraph/store/index_files.py); the sets of rows passing a filter are cached until the KB is
written to (``_allowed``). Both caches are bounded.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kbgraph.store.base import Condition
from kbgraph.store.index_files import PERSIST_MIN_ROWS, IndexFiles
from kbgraph.store.sqlite.change_log import _changed_since
from kbgraph.store.sqlite.row_set import RowSet

# bytes of cached vector matrices kept per store before the least recently used are dropped
_VECTOR_CACHE_BYTES = 1 << 30
_MASK_CACHE_ENTRIES = 64
# bytes of cached text postings kept per store
_POSTINGS_CACHE_BYTES = 512 << 20


class SliceCaches:
    """Mixed into SQLiteStore: the cached slices and filter sets, and forgetting a tenant's."""

    def _kept_current(self, cache: OrderedDict[tuple[Any, ...], tuple[int, Any]], key: tuple[Any, ...],
                      conn: sqlite3.Connection, tag: str, kb: str, generation: int, build: Callable[[], Any],
                      update: Callable[[Any, np.ndarray], Any], budget: int, kind: type) -> Any:
        """One slice's cached in-memory index at ``generation``: reused as is, updated with the rows the
        change log names (``update`` may give None: rebuild instead), or built; the least recently
        used indexes are dropped past ``budget`` bytes. A process without one in memory starts from
        the newest snapshot on disk (index_files.py), and a large build is written there."""
        with self._lock:
            cached = cache.get(key)
            if cached is not None:
                cache.move_to_end(key)
        if cached is not None and cached[0] == generation:
            # held and current: nothing to add, so nothing to evict (summing the cache's bytes on
            # every search cost ~130 nbytes calls per kg query)
            return cached[1]
        if cached is None and self._index_files is not None:
            cached = self._index_files.load(key, kind, generation)
        if cached is not None and cached[0] == generation:
            index = cached[1]
        else:
            index = None
            if cached is not None:
                changed = _changed_since(conn, tag, kb, cached[0])
                if changed is not None:
                    index = update(cached[1], changed)
            if index is None:
                index = build()
                if self._index_files is not None and index.rows >= PERSIST_MIN_ROWS and self._outside_writes():
                    self._index_files.save(key, generation, index)
        with self._lock:
            cache[key] = (generation, index)
            total = sum(held.nbytes for _, held in cache.values())
            while total > budget and len(cache) > 1:
                _, (_, dropped) = cache.popitem(last=False)
                total -= dropped.nbytes
        return index

    def index_files(self) -> IndexFiles | None:
        return self._index_files

    def _allowed(self, conn: sqlite3.Connection, tag: str, kb: str, where: Sequence[Condition],
                 gen: int, only_cached: bool = False) -> RowSet | None:
        """The rowids of the KB passing every condition, cached until the KB is written to (with
        ``only_cached``, None unless cached)."""
        key = (tag, kb, repr(list(where)), gen)
        with self._lock:
            allowed = self._masks.get(key)
            if allowed is not None:
                self._masks.move_to_end(key)
                return allowed
        if only_cached:
            return None
        sql, params = self._where(conn, tag, [kb], where)
        allowed = RowSet.of(np.fromiter((r[0] for r in conn.execute(
            f"SELECT d.rowid FROM {tag}_docs d WHERE {sql}", params)), dtype=np.int64))
        with self._lock:
            self._masks[key] = allowed
            while len(self._masks) > _MASK_CACHE_ENTRIES:
                self._masks.popitem(last=False)
        return allowed

    def _forget(self, tag: str) -> None:
        with self._lock:
            self._tables = {t for t in self._tables if not t.startswith(tag + "_")}
            self._df = {t: v for t, v in self._df.items() if not t.startswith(tag + "_")}
            for cache in (self._vectors, self._masks, self._kinds, self._postings):
                for key in [k for k in cache if k[0] == tag]:
                    del cache[key]
