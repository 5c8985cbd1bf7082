"""The metadata schema, created and upgraded by Alembic migrations (``kbgraph/meta/migrations/``).

``upgrade_schema`` brings a database to the newest revision, ``HEAD``: an empty one gets every
revision, one made by ``create_all`` before migrations existed (tables but no ``alembic_version``)
is adopted (stamped at the initial revision, its rows kept), one at an older revision gets the
revisions after it. It runs when a process opens the database (``open_engine``), once in the web
server's master before it forks (``kbgraph-web serve``, through
``kbgraph.meta.database.upgrade_database``), and as ``kbgraph-web db upgrade``.

Several processes or hosts starting at once never race: the upgrade runs in one transaction that
first takes a lock, PostgreSQL's transaction-level advisory lock ``LOCK_ID`` (one holder; the others
wait, then find the database at ``HEAD``), or SQLite's write lock (``BEGIN IMMEDIATE``). A database
already at ``HEAD`` is recognised by one read and no lock, without importing Alembic.

On SQLite the upgrade runs with foreign keys off (PRAGMA foreign_keys cannot change inside a
transaction): a revision that copies a table to alter it (Alembic's batch mode) drops the old one,
which with foreign keys on would cascade into deleting its children's rows.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, inspect, text

from kbgraph.meta.schemas import MetaError

log = logging.getLogger(__name__)

# the newest revision in migrations/versions (tests/integration/test_migrations.py keeps them equal)
HEAD = "0002"
# the revision a database made by create_all before migrations existed is stamped at, and its tables
INITIAL = "0001"
INITIAL_TABLES = ("tenant", "api_key", "app_user", "assistant", "chat", "knowledge_base", "chat_session", "document",
                  "task")
# PostgreSQL advisory lock id of schema upgrades: the bytes of "kbgraph" (any constant shared by every
# process of a deployment works)
LOCK_ID = int.from_bytes(b"kbgraph", "big")
MIGRATIONS = Path(__file__).with_name("migrations")
# a connection's execution option that has kbgraph.meta.database's SQLite "begin" hook take the write
# lock at once (BEGIN IMMEDIATE)
WRITE_LOCK = {"kbgraph_write": True}


def alembic_config(connection: Connection | None = None, *, url: str = "", extra_versions: list[Path] | None = None,
                   output: io.StringIO | None = None) -> Any:
    """Alembic's configuration for kbgraph's migrations (``extra_versions``: more revision folders,
    for tests), on ``connection`` or ``url``."""
    from alembic.config import Config

    config = Config(stdout=output) if output is not None else Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    folders = [MIGRATIONS / "versions", *(extra_versions or [])]
    config.set_main_option("version_locations", " ".join(str(f) for f in folders))
    config.set_main_option("path_separator", "space")
    if url:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["connection"] = connection
    return config


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at; None when it has no ``alembic_version`` table or row."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _has_tables(connection: Connection) -> list[str]:
    names = set(inspect(connection).get_table_names())
    return [t for t in INITIAL_TABLES if t in names]


@contextmanager
def _locked(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction that holds the schema lock (see the module's docstring)."""
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect().execution_options(**WRITE_LOCK) as conn:
        if sqlite:
            _foreign_keys(conn, on=False)
        try:
            with conn.begin():
                if engine.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": LOCK_ID})
                yield conn
        finally:
            if sqlite:
                _foreign_keys(conn, on=True)


def _foreign_keys(conn: Connection, *, on: bool) -> None:
    # on the DB-API connection: through SQLAlchemy the statement would open a transaction first
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")
    finally:
        cursor.close()


def upgrade_schema(engine: Engine, *, target: str = "head", extra_versions: list[Path] | None = None) -> str | None:
    """Bring the database to ``target`` (see the module's docstring); returns the revision it had."""
    if target == "head" and not extra_versions:
        with engine.connect() as conn:
            if current_revision(conn) == HEAD:
                return HEAD
    with _locked(engine) as conn:
        found = current_revision(conn)
        if found == HEAD and target == "head" and not extra_versions:
            return found  # another process upgraded it while this one waited for the lock
        from alembic import command

        config = alembic_config(conn, extra_versions=extra_versions)
        _check_known(config, found)
        if found is None and _adopt(conn):
            command.stamp(config, INITIAL)
        command.upgrade(config, target)
        return found


def _adopt(conn: Connection) -> bool:
    """Whether the database holds create_all's tables (to be stamped at INITIAL, not made again);
    a database holding only some of them is no kbgraph schema this code knows: refused."""
    present = _has_tables(conn)
    if not present:
        return False
    missing = [t for t in INITIAL_TABLES if t not in present]
    if missing:
        raise MetaError(f"the metadata database has some of kbgraph's tables but not {', '.join(missing)}, and no "
                        "alembic_version table: it cannot be adopted; point database_url at a database of its own")
    log.warning("the metadata database predates schema migrations: adopting it at revision %s", INITIAL)
    return True


def _check_known(config: Any, found: str | None) -> None:
    """A database upgraded by a newer kbgraph than this one is refused, not altered."""
    if found is None:
        return
    from alembic.script import ScriptDirectory

    try:
        ScriptDirectory.from_config(config).get_revision(found)
    except Exception:
        raise MetaError(f"the metadata database is at schema revision {found!r}, which this kbgraph does not know "
                        f"(its newest is {HEAD!r}): it was upgraded by a newer kbgraph; run that one") from None


def history(url: str = "") -> str:
    """The revisions, newest first, as ``alembic history`` prints them."""
    from alembic import command

    output = io.StringIO()
    command.history(alembic_config(url=url, output=output), verbose=False)
    return output.getvalue()


def write_revision(url: str, message: str) -> Path:
    """Write the next revision (``versions/r<NNNN>_<message>.py``): what autogenerate finds between
    the models and the database at ``url``, which must be at ``HEAD``. A person reads it before it
    is committed, and moves ``HEAD`` to it."""
    from alembic import command

    config = alembic_config(url=url)
    config.set_main_option("file_template", "r%%(rev)s_%%(slug)s")
    script = command.revision(config, message=message, autogenerate=True, rev_id=f"{int(HEAD) + 1:04d}")
    return Path(script.path)  # type: ignore[union-attr]


__all__ = ["HEAD", "INITIAL", "LOCK_ID", "WRITE_LOCK", "alembic_config", "current_revision", "history",
           "upgrade_schema", "write_revision"]
