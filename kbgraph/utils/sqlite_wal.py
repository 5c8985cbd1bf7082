"""A SQLite file put in WAL mode by whichever of several connections gets there first.

Processes opening a new file at once (a server's workers at their first start, or several commands
upgrading one new metadata database) can each read it as a rollback-journal file and each try to
switch it. SQLite refuses the losers "database is locked" at once, without waiting on their busy
timeout (waiting could deadlock); once the winner has switched, asking again is a plain read."""

from __future__ import annotations

import sqlite3
import time

# how long a connection keeps asking while another one switches the file
WAL_WAIT_SECONDS = 10.0


def enter_wal(conn: sqlite3.Connection | sqlite3.Cursor, wait: float = WAL_WAIT_SECONDS) -> None:
    """``PRAGMA journal_mode=WAL`` on ``conn``, asked again while another connection holds the
    switch (up to ``wait`` seconds)."""
    deadline = time.monotonic() + wait
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
