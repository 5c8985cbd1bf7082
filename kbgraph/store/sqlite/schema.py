"""The store's tables: the shared ones, each tenant's, their names and field codes, and upgrades.

Shared tables (``kb_*``): tenants and their tags, field codes, per-field FTS statistics, write
generations and the sequence behind them, the change log's floors and the store's own id. Each
tenant gets ``<tag>_docs``, ``<tag>_kv``, ``<tag>_vec``, one FTS5 table per text field and a change
log (see the package docstring). Files written by older versions are brought up to date when a
store opens them (``_count_fts_tokens``, ``_drop_unfiltered_kv``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid

from kbgraph.store.base import StoreError
from kbgraph.store.records import UNFILTERED_FIELDS
from kbgraph.store.sqlite.change_log import _ensure_log


def _script(conn: sqlite3.Connection, script: str) -> None:
    # executescript() would COMMIT the open transaction first
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _varints(blob: bytes) -> list[int]:
    """SQLite's big-endian varints (7 bits a byte, a 9th byte of 8), as FTS5 records use them."""
    out: list[int] = []
    i = 0
    while i < len(blob):
        value = 0
        for j in range(9):
            byte = blob[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def _count_fts_tokens(conn: sqlite3.Connection) -> None:
    """Stores written before kb_fts counted tokens: add the column and fill it from each FTS5
    table's averages record (row count, then total tokens), exact for committed data."""
    if "tokens" in {row[1] for row in conn.execute("PRAGMA table_info(kb_fts)")}:
        return
    conn.execute("ALTER TABLE kb_fts ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0")
    for tag, code in conn.execute("SELECT tag, code FROM kb_fts").fetchall():
        row = conn.execute(f"SELECT block FROM {tag}_fts{code}_data WHERE id=1").fetchone()
        values = _varints(row[0]) if row and row[0] else []
        if len(values) >= 2:
            conn.execute("UPDATE kb_fts SET tokens=? WHERE tag=? AND code=?", (values[1], tag, code))


def _drop_unfiltered_kv(conn: sqlite3.Connection, tag: str) -> None:
    """Stores written before UNFILTERED_FIELDS were kept in the body only: drop their kv rows, which
    nothing reads any more and no write would keep current."""
    names = json.dumps(sorted(UNFILTERED_FIELDS))
    for (code,) in conn.execute("SELECT code FROM kb_fields WHERE name IN (SELECT value FROM json_each(?))",
                                (names,)).fetchall():
        if conn.execute(f"SELECT 1 FROM {tag}_kv WHERE field=? LIMIT 1", (code,)).fetchone():
            conn.execute(f"DELETE FROM {tag}_kv WHERE field=?", (code,))


def _create_store_tables(conn: sqlite3.Connection) -> str:
    """The shared tables (created when missing) and upgrades of an older file; the store's id."""
    # kb_gen.n is bumped by every write to (tag, kb), kb_gen.vn only by writes that touch vectors
    _script(conn, """
        CREATE TABLE IF NOT EXISTS kb_tenants (tag TEXT PRIMARY KEY, tenant_id TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS kb_fields (code INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
        CREATE TABLE IF NOT EXISTS kb_fts (tag TEXT, code INTEGER, rows INTEGER NOT NULL DEFAULT 0,
                                           tokens INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (tag, code));
        CREATE TABLE IF NOT EXISTS kb_gen (tag TEXT, kb_id TEXT, n INTEGER, vn INTEGER,
                                           PRIMARY KEY (tag, kb_id));
        CREATE TABLE IF NOT EXISTS kb_seq (k INTEGER PRIMARY KEY, n INTEGER NOT NULL);
        INSERT OR IGNORE INTO kb_seq VALUES (0, 0);
        CREATE TABLE IF NOT EXISTS kb_log_floor (tag TEXT PRIMARY KEY, n INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS kb_store (k INTEGER PRIMARY KEY, id TEXT NOT NULL);
    """)
    conn.execute("INSERT OR IGNORE INTO kb_store VALUES (0, ?)", (uuid.uuid4().hex,))
    (store_id,) = conn.execute("SELECT id FROM kb_store WHERE k=0").fetchone()
    _count_fts_tokens(conn)
    for (tag,) in conn.execute("SELECT tag FROM kb_tenants").fetchall():
        _ensure_log(conn, tag)
        _drop_unfiltered_kv(conn, tag)
    return store_id


class Tables:
    """Mixed into SQLiteStore: tenants' tags and tables, field codes, FTS tables."""

    # ---------------------------------------------------------------- names

    @staticmethod
    def _tag_of(tenant_id: str) -> str:
        return "t" + hashlib.blake2b(str(tenant_id).encode("utf-8"), digest_size=10).hexdigest()

    def _tag(self, conn: sqlite3.Connection, tenant_id: str) -> str | None:
        tag = self._tag_of(tenant_id)
        row = conn.execute("SELECT tenant_id FROM kb_tenants WHERE tag=?", (tag,)).fetchone()
        return tag if row is not None and row[0] == tenant_id else None

    def _code(self, conn: sqlite3.Connection, name: str, create: bool = False) -> int | None:
        code = self._codes.get(name)
        if code is not None:
            return code
        row = conn.execute("SELECT code FROM kb_fields WHERE name=?", (name,)).fetchone()
        if row is None:
            if not create:
                return None
            code = conn.execute("INSERT INTO kb_fields(name) VALUES (?) RETURNING code", (name,)).fetchone()[0]
        else:
            code = row[0]
        with self._lock:
            self._codes[name] = code
        return code

    def _fts(self, conn: sqlite3.Connection, tag: str, name: str, create: bool = False) -> str | None:
        code = self._code(conn, name, create)
        if code is None:
            return None
        table = f"{tag}_fts{code}"
        if table in self._tables:
            return table
        if create:
            # FTS5 gives document frequencies only (term frequencies and lengths come from text_index):
            # no token positions and no per-row size table, which a rewritten row would update on a
            # page of its own (tables made before detail=none keep their positions; both count alike)
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5(tokens, content='', columnsize=0, "
                         f"detail=none, tokenize='ascii')")
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table}_vocab USING fts5vocab({table}, 'row')")
            conn.execute("INSERT OR IGNORE INTO kb_fts(tag, code) VALUES (?, ?)", (tag, code))
        elif conn.execute("SELECT 1 FROM kb_fts WHERE tag=? AND code=?", (tag, code)).fetchone() is None:
            return None
        with self._lock:
            self._tables.add(table)
        return table

    # ---------------------------------------------------------------- index lifecycle

    def _create(self, conn: sqlite3.Connection, tenant_id: str) -> str:
        tag = self._tag_of(tenant_id)
        row = conn.execute("SELECT tenant_id FROM kb_tenants WHERE tag=?", (tag,)).fetchone()
        if row is not None:
            if row[0] != tenant_id:
                raise StoreError(f"tenant ids {tenant_id!r} and {row[0]!r} hash to the same tables")
            return tag
        conn.execute("INSERT INTO kb_tenants VALUES (?, ?)", (tag, tenant_id))
        self._forget(tag)  # another process may have dropped an earlier index of this tenant
        _script(conn, f"""
            CREATE TABLE {tag}_docs (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, kb_id TEXT NOT NULL,
                                     kg TEXT, body TEXT NOT NULL);
            CREATE INDEX {tag}_docs_kb ON {tag}_docs(kb_id, id);
            CREATE INDEX {tag}_docs_kg ON {tag}_docs(kb_id, kg, id);
            CREATE TABLE {tag}_kv (field INTEGER NOT NULL, value NOT NULL, doc INTEGER NOT NULL,
                                   PRIMARY KEY (field, value, doc)) WITHOUT ROWID;
            CREATE INDEX {tag}_kv_doc ON {tag}_kv(doc, field, value);
            CREATE TABLE {tag}_vec (doc INTEGER NOT NULL, field INTEGER NOT NULL, kb_id TEXT NOT NULL, kg TEXT,
                                    v BLOB NOT NULL, PRIMARY KEY (doc, field));
            CREATE INDEX {tag}_vec_part ON {tag}_vec(field, kb_id, kg, doc);
        """)
        _ensure_log(conn, tag)
        return tag

    def ensure_index(self, tenant_id: str) -> None:
        with self._write() as conn:
            self._create(conn, tenant_id)

    def drop_index(self, tenant_id: str) -> None:
        with self._write() as conn:
            tag = self._tag(conn, tenant_id)
            if tag is None:
                return
            for (code,) in conn.execute("SELECT code FROM kb_fts WHERE tag=?", (tag,)).fetchall():
                conn.execute(f"DROP TABLE IF EXISTS {tag}_fts{code}_vocab")
                conn.execute(f"DROP TABLE IF EXISTS {tag}_fts{code}")
            for suffix in ("docs", "kv", "vec", "log"):
                conn.execute(f"DROP TABLE IF EXISTS {tag}_{suffix}")
            for table in ("kb_fts", "kb_gen", "kb_tenants", "kb_log_floor"):
                conn.execute(f"DELETE FROM {table} WHERE tag=?", (tag,))
        self._forget(tag)

    def index_exists(self, tenant_id: str) -> bool:
        with self._read() as conn:
            return self._tag(conn, tenant_id) is not None

    def refresh(self, tenant_id: str) -> None:
        """Writes are visible once committed; nothing to do."""
