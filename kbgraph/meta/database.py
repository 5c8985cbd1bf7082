"""The metadata database's engine and sessions: what every group of tables stands on.

``open_engine`` connects (a SQLite file set up for several processes, or a server database such as
PostgreSQL) and brings the schema to the newest revision (``kbgraph.meta.migrate``); ``Database`` holds the engine and hands out the short read
and write transactions each call of ``MetaDB`` is made of. New row ids and times come from here too.

Concurrency: read-modify-write calls lock what they change first (``SELECT ... FOR UPDATE`` on
PostgreSQL; ``BEGIN IMMEDIATE`` on SQLite, which otherwise fails with "database is locked" when a
deferred read transaction tries to upgrade after another writer committed), so two workers adding
token counts to one task never lose an update.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker

from kbgraph.meta.migrate import WRITE_LOCK, current_revision, upgrade_schema
from kbgraph.meta.schemas import MetaError
from kbgraph.utils.sqlite_wal import enter_wal

_WRITE = WRITE_LOCK


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_id() -> str:
    # uuid1 hex, as RAGFlow's ids are: its REST API validates dataset ids as UUID1
    return uuid.uuid1().hex


def _setup_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # hand transaction control to the "begin" hook below (pysqlite's own BEGIN is deferred)
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        # waiting first: several processes (gunicorn workers) open a new file at the same moment
        cursor.execute("PRAGMA busy_timeout=30000")
        enter_wal(cursor)  # several processes may open a new file at once: the first switches it
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get("kbgraph_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _server_engine(url: URL) -> Engine:
    try:
        return create_engine(url, pool_pre_ping=True)
    except ModuleNotFoundError as exc:
        # the PostgreSQL driver is the optional `postgres` extra; say so instead of a bare import error
        hint = ' (pip install "kbgraph[postgres]")' if url.get_backend_name() == "postgresql" else ""
        raise MetaError(f"the metadata database {url.render_as_string(hide_password=True)} needs the "
                        f"Python driver {exc.name!r}, which is not installed{hint}") from exc


def connect(url: str) -> Engine:
    """An engine for the metadata database at ``url``; its schema is left as it is."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise MetaError("the metadata database needs a SQLite file, not an in-memory database")
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed)
        _setup_sqlite(engine)
        return engine
    return _server_engine(parsed)


def open_engine(url: str) -> Engine:
    """Connect to the metadata database at ``url`` and bring its schema to the newest revision
    (created, adopted or upgraded: kbgraph.meta.migrate; one read when it is there already)."""
    engine = connect(url)
    try:
        upgrade_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


def upgrade_database(url: str) -> str | None:
    """Bring the database at ``url`` to the newest schema revision and close its connections (the
    web server's master runs this before forking: no connection may cross the fork). Returns the
    revision it had (None: none, it was empty or made by create_all)."""
    engine = connect(url)
    try:
        return upgrade_schema(engine)
    finally:
        engine.dispose()


def database_revision(url: str) -> str | None:
    """The schema revision of the database at ``url`` (None: not under migrations yet)."""
    engine = connect(url)
    try:
        with engine.connect() as conn:
            return current_revision(conn)
    finally:
        engine.dispose()


class Database:
    """An engine and its sessionmaker; every call is one short transaction (``_read``/``_write``)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._sqlite = engine.dialect.name == "sqlite"

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with self._sessions() as session, session.begin():
            yield session

    @contextmanager
    def _write(self) -> Iterator[Session]:
        with self._sessions() as session, session.begin():
            # the option reaches the SQLite "begin" hook: this transaction takes the write lock now
            session.connection(execution_options=_WRITE)
            yield session
