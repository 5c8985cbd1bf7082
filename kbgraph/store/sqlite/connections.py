"""Connections and transactions: a bounded pool, per-thread leases, reads, writes and ``batch()``.

A thread holds a connection only while it reads or writes (or inside ``batch()``); every write is
one ``BEGIN IMMEDIATE`` transaction (WAL, synchronous=NORMAL), so a killed process leaves either a
whole batch or none of it, and a read is one snapshot for the several queries of a search.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kbgraph.store.base import StoreError
from kbgraph.store.sqlite.fields import _body_kv_values
from kbgraph.utils.sqlite_wal import enter_wal


class _ConnectionPool:
    """At most ``size`` connections, opened on demand and reused; a taker waits for a free one
    (up to ``wait`` seconds) instead of opening more."""

    def __init__(self, open_connection: Callable[[], sqlite3.Connection], size: int, wait: float = 60.0) -> None:
        if size < 1:
            raise StoreError(f"a SQLite store needs at least one connection, not {size}")
        self._open, self._size, self._wait = open_connection, size, wait
        self._idle: list[sqlite3.Connection] = []
        self.opened = 0
        self._closed = False
        self._cond = threading.Condition()

    def take(self) -> sqlite3.Connection:
        with self._cond:
            if not self._cond.wait_for(lambda: self._closed or self._idle or self.opened < self._size,
                                       timeout=self._wait):
                raise StoreError(f"all {self._size} SQLite connections stayed busy for {self._wait:g} s")
            if self._closed:
                raise StoreError("the store is closed")
            if self._idle:
                return self._idle.pop()
            self.opened += 1
        try:
            return self._open()
        except BaseException:
            with self._cond:
                self.opened -= 1
                self._cond.notify()
            raise

    def give_back(self, conn: sqlite3.Connection) -> None:
        with self._cond:
            if self._closed:
                conn.close()
                self.opened -= 1
                return
            self._idle.append(conn)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for conn in self._idle:
                conn.close()
            self.opened -= len(self._idle)
            self._idle.clear()
            self._cond.notify_all()


class Connections:
    """Mixed into SQLiteStore: leases from its pool (``self._pool``), transactions, ``batch()``."""

    def _open_connection(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            enter_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA wal_autocheckpoint=8000")  # fewer, larger checkpoints (each one syncs)
            conn.execute("PRAGMA busy_timeout=60000")
            conn.execute("PRAGMA cache_size=-65536")
            conn.execute("PRAGMA temp_store=MEMORY")
            conn.create_function("kb_kv_values", 2, _body_kv_values, deterministic=True)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {self.path}: {exc}") from exc
        return conn

    @contextmanager
    def _lease(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection for the block: the one it already holds (nested reads and
        writes, batch()), else one from the pool, given back when the outermost block ends."""
        if self._closed:
            raise StoreError("the store is closed")
        held: sqlite3.Connection | None = getattr(self._held, "conn", None)
        if held is not None:
            self._held.depth += 1
            try:
                yield held
            finally:
                self._held.depth -= 1
            return
        conn = self._pool.take()
        self._held.conn, self._held.depth = conn, 1
        try:
            yield conn
        finally:
            self._held.conn, self._held.depth = None, 0
            if conn.in_transaction:  # never hand on a connection inside someone's transaction
                conn.execute("ROLLBACK")
            self._pool.give_back(conn)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Every write of this thread inside the block is one transaction: one commit (and its WAL
        pages) instead of one per operation, and all-or-nothing."""
        with self._write():
            self._batch.depth = getattr(self._batch, "depth", 0) + 1
            try:
                yield
            finally:
                self._batch.depth -= 1

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lease() as conn:
            if getattr(self._batch, "depth", 0):  # inside batch(): its transaction is ours
                yield conn
                return
            with self._transaction(conn):
                yield conn

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[None]:
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            # codes assigned inside the rolled-back transaction no longer exist, and caches built
            # on its uncommitted generations would match the next write's reused numbers
            with self._lock:
                self._codes.clear()
                self._tables.clear()
                for cache in (self._vectors, self._masks, self._kinds, self._postings, self._df):
                    cache.clear()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"SQLite write failed: {exc}") from exc
            raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        # one read transaction = one consistent snapshot for the several queries of a search
        with self._lease() as conn:
            if getattr(self._batch, "depth", 0) or conn.in_transaction:  # read the enclosing transaction
                try:
                    yield conn
                except sqlite3.Error as exc:
                    raise StoreError(f"SQLite read failed: {exc}") from exc
                return
            try:
                conn.execute("BEGIN")
                yield conn
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite read failed: {exc}") from exc
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    @property
    def open_connections(self) -> int:
        """Connections this store holds open now (idle in its pool or in use)."""
        return self._pool.opened

    def _outside_writes(self) -> bool:
        """Whether this thread reads committed rows only (not inside a write or batch() of its own),
        so a snapshot built now names a generation no rollback can take back."""
        return not getattr(self._batch, "depth", 0) and getattr(self._held, "depth", 0) <= 1
