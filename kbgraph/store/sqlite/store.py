"""``SQLiteStore``: the embedded DocStore, composed of the package's parts (see its docstring).

This module holds what ties them together: the store's state (connections, locks, caches), made
in ``__init__``, and ``close``. Each mixin's methods live in the module named after their concern.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from kbgraph.config import Settings
from kbgraph.store.base import DocStore
from kbgraph.store.index_files import IndexFiles
from kbgraph.store.sqlite.connections import Connections, _ConnectionPool
from kbgraph.store.sqlite.filters import Filters
from kbgraph.store.sqlite.fusion import HybridSearch
from kbgraph.store.sqlite.index_writes import FieldIndexing
from kbgraph.store.sqlite.listing import Listing
from kbgraph.store.sqlite.reads import Reads
from kbgraph.store.sqlite.schema import Tables, _create_store_tables
from kbgraph.store.sqlite.slice_cache import SliceCaches
from kbgraph.store.sqlite.term_search import TermSearch
from kbgraph.store.sqlite.text_index import FieldPostings
from kbgraph.store.sqlite.vector_index import VectorSlice
from kbgraph.store.sqlite.vector_search import VectorSearch
from kbgraph.store.sqlite.writes import Writes


class SQLiteStore(Connections, Tables, Writes, FieldIndexing, Filters, Reads, Listing, HybridSearch, TermSearch,
                  VectorSearch, SliceCaches, DocStore):
    """See the package docstring. Safe to share between threads (a bounded pool of connections)."""

    engine = "sqlite"

    def __init__(self, path: str | Path, *, connections: int = 8) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a thread holds a connection only while it reads or writes (or inside batch()), then hands
        # it back: a server that starts a thread per request reuses a few instead of leaking one each
        self._pool = _ConnectionPool(self._open_connection, connections)
        self._held = threading.local()  # the connection this thread holds, and how deeply
        self._batch = threading.local()  # depth of batch() blocks open in this thread
        self._lock = threading.Lock()
        self._codes: dict[str, int] = {}
        self._tables: set[str] = set()  # FTS tables known to exist (saves re-parsing DDL per row)
        self._closed = False
        # (tag, kb, field code, kind) -> (vector generation, vectors of that slice)
        self._vectors: OrderedDict[tuple[Any, ...], tuple[int, VectorSlice]] = OrderedDict()
        # (tag, kb, conditions, generation) -> sorted rowids passing them
        self._masks: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
        # FTS table -> (tenant's write generation, token -> document frequency)
        self._df: dict[str, tuple[int, dict[str, int]]] = {}
        # (tag, kb, field code, kind) -> (write generation, postings of that slice)
        self._postings: OrderedDict[tuple[Any, ...], tuple[int, FieldPostings]] = OrderedDict()
        self._kinds: dict[tuple[Any, ...], tuple[int, list[str | None]]] = {}
        self._index_files: IndexFiles | None = None
        with self._write() as conn:
            store_id = _create_store_tables(conn)
        # the large slices' indexes, kept on disk for the next process: under this database's own id,
        # so a store file made anew never meets the snapshots of the one it replaced
        self._index_files = None if str(path) == ":memory:" else IndexFiles.for_store(
            Path(f"{self.path}.indexes"), store_id)

    @classmethod
    def from_settings(cls, settings: Settings) -> "SQLiteStore":
        return cls(settings.sqlite_store_path, connections=settings.store_connections)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._pool.close()
            self._vectors.clear()
            self._masks.clear()
            self._postings.clear()
            self._df.clear()


__all__ = ["SQLiteStore"]
