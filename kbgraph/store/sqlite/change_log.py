"""Write generations and the change log: how a process learns what other writes changed.

Every write bumps a store-wide sequence number and records it as the generation of each KB it
touched (``kb_gen``: ``n`` for any write, ``vn`` for writes touching vectors), and logs the rowids
it wrote or deleted (``<tag>_log``). An in-memory index built at generation G catches up by reading
the log entries since G (``_changed_since``) instead of rebuilding; the log is trimmed to about
``_LOG_KEEP`` entries, and an index older than what was trimmed rebuilds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np

# the change log keeps about this many entries; it is trimmed every _LOG_PRUNE_EVERY writes
_LOG_KEEP = 500_000
_LOG_PRUNE_EVERY = 256


def _ensure_log(conn: sqlite3.Connection, tag: str) -> None:
    """The change log: every write notes (write sequence number, kb, rowid) for each row it wrote
    or deleted (``_log_rows``), so a process's in-memory indexes catch up on what changed instead
    of rebuilding.

    An entry carries the sequence number *before* its write's ``_bump``; a cache built at KB
    generation G therefore needs the entries with n >= G. A log created now covers nothing earlier,
    so the floor starts at the current sequence number. Stores written before kept the log with
    triggers, one statement per row; those are dropped (the writes log in bulk now)."""
    for (trigger,) in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger' AND name IN (?, ?, ?)",
                                   (f"{tag}_log_ins", f"{tag}_log_upd", f"{tag}_log_del")).fetchall():
        conn.execute(f"DROP TRIGGER {trigger}")
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (f"{tag}_log",)).fetchone():
        return
    conn.execute(f"CREATE TABLE {tag}_log (n INTEGER NOT NULL, kb_id TEXT NOT NULL, doc INTEGER NOT NULL)")
    conn.execute(f"CREATE INDEX {tag}_log_kb ON {tag}_log(kb_id, n)")
    conn.execute("INSERT OR REPLACE INTO kb_log_floor VALUES (?, (SELECT n FROM kb_seq WHERE k=0) + 1)", (tag,))


def _log_rows(conn: sqlite3.Connection, tag: str, rows: Sequence[tuple[str, int]]) -> None:
    """Log (kb, rowid) of rows a write inserts, rewrites or deletes, at the current sequence number
    (the write's ``_bump`` comes after)."""
    if rows:
        seq = conn.execute("SELECT n FROM kb_seq WHERE k=0").fetchone()[0]
        conn.executemany(f"INSERT INTO {tag}_log VALUES ({int(seq)}, ?, ?)", rows)


def _prune_log(conn: sqlite3.Connection, tag: str) -> None:
    """Keep the newest ~_LOG_KEEP log entries; caches older than what is dropped rebuild."""
    row = conn.execute(f"SELECT rowid, n FROM {tag}_log ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                       (_LOG_KEEP,)).fetchone()
    if row is None:
        return
    # entries are appended in sequence order, so everything up to this rowid has n <= row's n
    conn.execute(f"DELETE FROM {tag}_log WHERE rowid <= ?", (row[0],))
    conn.execute("INSERT INTO kb_log_floor VALUES (?, ?) ON CONFLICT(tag) DO UPDATE SET n=max(n, excluded.n)",
                 (tag, row[1] + 1))


def _bump(conn: sqlite3.Connection, tag: str, kbs: set[str], vectors: bool) -> None:
    seq = conn.execute("UPDATE kb_seq SET n=n+1 WHERE k=0 RETURNING n").fetchone()[0]
    if seq % _LOG_PRUNE_EVERY == 0:
        _prune_log(conn, tag)
    for kb in kbs:
        conn.execute(
            "INSERT INTO kb_gen VALUES (?, ?, ?, ?) ON CONFLICT(tag, kb_id) DO UPDATE SET n=excluded.n"
            + (", vn=excluded.vn" if vectors else ""), (tag, kb, seq, seq))


def _gen(conn: sqlite3.Connection, tag: str, kb: str) -> tuple[int, int]:
    row = conn.execute("SELECT n, vn FROM kb_gen WHERE tag=? AND kb_id=?", (tag, kb)).fetchone()
    return (row[0], row[1]) if row else (0, 0)


def _changed_since(conn: sqlite3.Connection, tag: str, kb: str, generation: int) -> np.ndarray | None:
    """Rowids of ``kb`` written or deleted since the KB was at ``generation``; None when the
    change log does not reach back that far (the caller rebuilds)."""
    try:
        floor = conn.execute("SELECT n FROM kb_log_floor WHERE tag=?", (tag,)).fetchone()
        if floor is None or generation < floor[0]:
            return None
        return np.fromiter((r[0] for r in conn.execute(
            f"SELECT DISTINCT doc FROM {tag}_log WHERE kb_id=? AND n >= ?", (kb, generation))), dtype=np.int64)
    except sqlite3.OperationalError:  # a store from before the change log
        return None
