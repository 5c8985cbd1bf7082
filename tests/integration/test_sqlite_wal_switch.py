"""A connection that opens a new SQLite file while another one holds its write lock, as happens when
several processes open a new metadata database or store at once: SQLite refuses the switch to WAL
"database is locked" at once, whatever the busy timeout; kbgraph asks again until the other is done.

(CI once failed tests/integration/test_migrations.py on this: one of six processes upgrading a new
metadata database was refused.)"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from sqlalchemy import text

from kbgraph.meta.database import connect
from kbgraph.store.sqlite.store import SQLiteStore


def _hold_write_lock(path: Path, seconds: float) -> threading.Thread:
    """Another connection in a write transaction on ``path`` (still a rollback-journal file) for
    ``seconds``: what a process switching the same new file to WAL looks like to the others."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other_process (x)")
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(seconds, lambda: (holder.execute("COMMIT"), holder.close()))
    release.start()
    return release


def test_sqlite_alone_refuses_the_switch_at_once(tmp_path: Path) -> None:
    # the behaviour the retry answers: without it a 30 s busy timeout does not help
    path = tmp_path / "raw.db"
    release = _hold_write_lock(path, 0.3)
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            refused = ""
        except sqlite3.OperationalError as exc:
            refused = str(exc)
        assert refused == "database is locked"
    finally:
        release.join()
        conn.close()


def _open_metadata_database(path: Path) -> None:
    engine = connect(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    finally:
        engine.dispose()


def _open_store(path: Path) -> None:
    SQLiteStore(path).close()


@pytest.mark.parametrize("open_file", [_open_metadata_database, _open_store], ids=["metadata", "store"])
def test_a_file_opened_during_another_switch_waits_for_it(tmp_path: Path, open_file: Callable[[Path], None]) -> None:
    path = tmp_path / "new.db"
    release = _hold_write_lock(path, 0.3)
    try:
        open_file(path)
    finally:
        release.join()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
