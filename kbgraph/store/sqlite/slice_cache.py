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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from kbgraph.store.base import Condition
from kbgraph.store.index_files import PERSIST_MIN_ROWS, IndexFiles
from kbgraph.store.sqlite.change_log import _changed_since, _gen
from kbgraph.store.sqlite.fields import _VEC
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
                # by the rows read to build it: a field none of the slice's rows hold (graph rows
                # once wrote their text to the chunks' field: records.graph_text_fields) is empty,
                # and a new process would read every row again to find that out
                if self._index_files is not None and index.read_rows >= PERSIST_MIN_ROWS and self._outside_writes():
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

    def prepare_search(self, tenant_id: str, kb_ids: Sequence[str],
                       text_fields: Mapping[str | None, Sequence[str]]) -> None:
        """``DocStore.prepare_search``: every slice large enough to be kept on disk (vectors of each
        field and kind, postings of the named fields), built or caught up now and written there, so
        the first query after a large change does not build them (at 100k entities that query took
        31 s, the next process 1.7 s). The slices this process did not hold before are let go again:
        an indexing worker has no use for them."""
        if self._index_files is None:
            return
        held = self._held_slices()
        try:
            with self._read() as conn:
                tag = self._tag(conn, tenant_id)
                if tag is not None:
                    for kb in dict.fromkeys(kb_ids):
                        self._prepare_kb(conn, tag, kb, text_fields)
        finally:
            self._let_go(held)

    def _prepare_kb(self, conn: sqlite3.Connection, tag: str, kb: str,
                    text_fields: Mapping[str | None, Sequence[str]]) -> None:
        _, vgen = _gen(conn, tag, kb)
        vector_codes = [code for code, name in conn.execute("SELECT code, name FROM kb_fields") if _VEC.match(name)]
        for code in vector_codes:
            # by the (field, kb_id, kg, doc) index: no vector is read to count them
            for kind, rows in conn.execute(
                    f"SELECT kg, count(*) FROM {tag}_vec WHERE field=? AND kb_id=? GROUP BY kg", (code, kb)).fetchall():
                if rows >= PERSIST_MIN_ROWS:
                    self._vector_slice(conn, tag, kb, code, kind, vgen)
        for kind, names in text_fields.items():
            rows = conn.execute(f"SELECT count(*) FROM {tag}_docs WHERE kb_id=? AND kg IS ?", (kb, kind)).fetchone()[0]
            if rows < PERSIST_MIN_ROWS:
                continue  # built in milliseconds when a search first needs it
            for name in names:
                if self._fts(conn, tag, name) is not None:
                    self._slice_postings(conn, tag, kb, name, kind)

    def _held_slices(self) -> set[tuple[Any, ...]]:
        with self._lock:
            return set(self._vectors) | set(self._postings)

    def _let_go(self, held: set[tuple[Any, ...]]) -> None:
        with self._lock:
            for cache in (self._vectors, self._postings):
                for key in [k for k in cache if k not in held]:
                    del cache[key]

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
