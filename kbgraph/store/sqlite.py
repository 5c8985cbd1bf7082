"""The embedded DocStore: one SQLite file, FTS5 for BM25, exact kNN with numpy.

Per tenant (``t<hash>`` tag, so any tenant string maps to a safe identifier) the file holds:

- ``<tag>_docs``: rowid, ``id`` (unique), ``kb_id``, ``kg`` (= knowledge_graph_kwd) and the document
  as JSON without its vectors;
- ``<tag>_kv``: one row per (field, value, doc) for every ``*_kwd``/``*_int``/``*_flt`` value and
  ``doc_id`` (list elements each get a row), indexed both ways, so keyword/range filters are index
  lookups instead of JSON scans;
- ``<tag>_vec``: float32 blobs per (doc, vector field), with kb and kind for cache partitions;
- ``<tag>_fts<code>``: one contentless FTS5 table per text field, so BM25 statistics (document count,
  average length, document frequency) are per field, as in Elasticsearch.

Text tokens are written to FTS5 hex-encoded: every token becomes a run of [0-9a-f], so FTS5's
tokenizer splits on spaces only, never folds case and never mangles CJK or punctuation; matching is
exact, like Elasticsearch's whitespace analyzer. Scores are Lucene's BM25 (idf = ln(1 + (N - n +
0.5) / (n + 0.5))): FTS5's own bm25() clamps the idf of any term found in half the rows to ~0, so we
ask FTS5 one term at a time, divide its idf back out and apply Lucene's.

Every write runs in one ``BEGIN IMMEDIATE`` transaction (WAL, synchronous=NORMAL): a killed process
leaves either the whole batch or none of it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from kbgraph.store.base import (
    Condition, Doc, DocStore, Hit, SearchRequest, SearchResult, StoreError, TextQuery, VectorQuery, fuse,
)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VEC = re.compile(r"^q_(\d+)_vec$")
_KG = "knowledge_graph_kwd"
_COLUMNS = {"id": "d.id", "kb_id": "d.kb_id", _KG: "d.kg"}
# bytes of cached vector matrices kept per store before the least recently used are dropped
_VECTOR_CACHE_BYTES = 1 << 30
_MASK_CACHE_ENTRIES = 64


def _is_text(name: str) -> bool:
    return name.endswith(("_ltks", "_tks"))


def _is_num(name: str) -> bool:
    return name.endswith(("_int", "_flt"))


def _is_kv(name: str) -> bool:
    return name != _KG and (name.endswith("_kwd") or _is_num(name) or name == "doc_id")


def _is_vec(name: str) -> bool:
    return name.startswith("q_") and name.endswith("_vec")


def _kw(value: Any) -> str:
    # Elasticsearch keyword fields index scalars as their string form
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_KV, _TEXT = 1, 2


@lru_cache(maxsize=4096)
def _field_kind(name: str) -> int:
    """_KV, _TEXT or 0 (stored in the body only): how a field is indexed."""
    if not _NAME.match(name):
        return 0
    return _KV if _is_kv(name) else _TEXT if _is_text(name) else 0


def _kv_values(name: str, value: Any) -> set[Any]:
    out: set[Any] = set()
    for item in value if isinstance(value, list) else [value]:
        if item is None or isinstance(item, (dict, list)):
            continue
        if _is_num(name):
            if isinstance(item, bool):
                item = int(item)
            if isinstance(item, float) or isinstance(item, int) and -(1 << 63) <= item < (1 << 63):
                out.add(item)
        else:
            out.add(_kw(item))
    return out


def _cond_value(name: str, value: Any) -> Any:
    if name in _COLUMNS or (_is_kv(name) and not _is_num(name)):
        return _kw(value)
    return int(value) if isinstance(value, bool) else value


def _tokens(value: Any) -> list[str]:
    if isinstance(value, list):
        value = " ".join(str(v) for v in value)
    return value.split() if isinstance(value, str) else []


def _hex(tokens: Sequence[str]) -> str:
    return " ".join(map(bytes.hex, map(str.encode, tokens)))


def _same(a: Any, b: Any) -> bool:
    # 1 == 1.0 == True in Python, but not as keywords
    return type(a) is type(b) and a == b


def _dumps(body: Doc) -> str:
    try:
        return json.dumps(body, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"document {body.get('id')!r} is not plain JSON: {exc}") from None


def _path(name: str) -> str:
    return f'$."{name}"'


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise StoreError(f"invalid field name {name!r}")
    return name


def _kbs(kb_ids: Sequence[str]) -> list[str]:
    if isinstance(kb_ids, str) or not kb_ids:
        raise ValueError("kb_ids must be a non-empty list of knowledge-base ids (never 'all KBs')")
    return [str(k) for k in kb_ids]


def _vec_blob(name: str, value: Any) -> bytes | None:
    m = _VEC.match(name)
    if not m:
        raise StoreError(f"vector field {name!r} is not named q_<dim>_vec")
    if value is None:
        return None
    arr = np.asarray(value, dtype=np.float32)
    if arr.ndim != 1 or arr.shape[0] != int(m.group(1)):
        raise StoreError(f"field {name} needs {m.group(1)} numbers, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise StoreError(f"field {name} holds a non-finite number")
    return arr.tobytes()


def _unit(arr: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    return np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0)


def _project(body: Doc, fields: Sequence[str] | None, vectors: Mapping[str, bytes]) -> Doc:
    if fields is None:
        return dict(body)
    out: Doc = {"id": body["id"]}
    for name in fields:
        if name in body:
            out[name] = body[name]
        elif name in vectors:
            out[name] = np.frombuffer(vectors[name], dtype=np.float32).astype(float).tolist()
    return out


def _script(conn: sqlite3.Connection, script: str) -> None:
    # executescript() would COMMIT the open transaction first
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


class _IndexWrites:
    """The index rows one write changes, applied together: one executemany per table and kind
    of statement instead of several statements per document. Per document, deletions run before
    insertions, as the per-document order was."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.kv_del: list[tuple[int, int]] = []
        self.kv_del_values: list[tuple[int, int, Any]] = []
        self.kv_add: list[tuple[int, Any, int]] = []
        self.fts_del: dict[str, list[tuple[int, str]]] = {}
        self.fts_add: dict[str, list[tuple[int, str]]] = {}
        self.fts_rows: dict[int, int] = {}
        self.vec_clear: list[tuple[int]] = []
        self.vec_del: list[tuple[int, int]] = []
        self.vec_put: list[tuple[Any, ...]] = []

    def flush(self, conn: sqlite3.Connection) -> None:
        tag = self.tag
        if self.kv_del:
            conn.executemany(f"DELETE FROM {tag}_kv WHERE doc=? AND field=?", self.kv_del)
        if self.kv_del_values:
            conn.executemany(f"DELETE FROM {tag}_kv WHERE doc=? AND field=? AND value=?", self.kv_del_values)
        if self.kv_add:
            conn.executemany(f"INSERT OR IGNORE INTO {tag}_kv VALUES (?, ?, ?)", self.kv_add)
        for table, rows in self.fts_del.items():
            conn.executemany(f"INSERT INTO {table}({table}, rowid, tokens) VALUES ('delete', ?, ?)", rows)
        for table, rows in self.fts_add.items():
            conn.executemany(f"INSERT INTO {table}(rowid, tokens) VALUES (?, ?)", rows)
        for code, delta in self.fts_rows.items():
            if delta:
                conn.execute("UPDATE kb_fts SET rows=rows+? WHERE tag=? AND code=?", (delta, tag, code))
        if self.vec_clear:
            conn.executemany(f"DELETE FROM {tag}_vec WHERE doc=?", self.vec_clear)
        if self.vec_del:
            conn.executemany(f"DELETE FROM {tag}_vec WHERE doc=? AND field=?", self.vec_del)
        if self.vec_put:
            conn.executemany(f"INSERT OR REPLACE INTO {tag}_vec VALUES (?, ?, ?, ?, ?)", self.vec_put)


def _kinds_of(where: Sequence[Condition]) -> set[str | None] | None:
    """The kinds (knowledge_graph_kwd values, None for chunks) the conditions allow; None = any."""
    kinds: set[str | None] | None = None
    for cond in where:
        if cond.field == _KG and cond.op in ("eq", "in"):
            raw = cond.value if cond.op == "in" and isinstance(cond.value, (list, tuple, set, frozenset)) \
                else [cond.value]
            wanted: set[str | None] = {_kw(v) for v in raw}
            kinds = wanted if kinds is None else kinds & wanted
        elif cond.field == _KG and cond.op == "missing":
            kinds = {None} if kinds is None else kinds & {None}
    return kinds


class SQLiteStore(DocStore):
    """See the module docstring. Safe to share between threads (one connection per thread)."""

    engine = "sqlite"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._batch = threading.local()  # depth of batch() blocks open in this thread
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._codes: dict[str, int] = {}
        self._tables: set[str] = set()  # FTS tables known to exist (saves re-parsing DDL per row)
        self._closed = False
        # (tag, kb, field code, kind) -> (vector generation, rowids, unit matrix)
        self._vectors: OrderedDict[tuple[Any, ...], tuple[int, np.ndarray, np.ndarray]] = OrderedDict()
        self._masks: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
        # (tag, kb, kind) -> (write generation, rowids of that kind)
        self._kind_rows: OrderedDict[tuple[Any, ...], tuple[int, np.ndarray]] = OrderedDict()
        self._kinds: dict[tuple[Any, ...], tuple[int, list[str | None]]] = {}
        # kb_gen.n is bumped by every write to (tag, kb), kb_gen.vn only by writes that touch vectors
        with self._write() as conn:
            _script(conn, """
                CREATE TABLE IF NOT EXISTS kb_tenants (tag TEXT PRIMARY KEY, tenant_id TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS kb_fields (code INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
                CREATE TABLE IF NOT EXISTS kb_fts (tag TEXT, code INTEGER, rows INTEGER NOT NULL DEFAULT 0,
                                                   PRIMARY KEY (tag, code));
                CREATE TABLE IF NOT EXISTS kb_gen (tag TEXT, kb_id TEXT, n INTEGER, vn INTEGER,
                                                   PRIMARY KEY (tag, kb_id));
                CREATE TABLE IF NOT EXISTS kb_seq (k INTEGER PRIMARY KEY, n INTEGER NOT NULL);
                INSERT OR IGNORE INTO kb_seq VALUES (0, 0);
            """)

    # ---------------------------------------------------------------- connections and transactions

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError("the store is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA wal_autocheckpoint=8000")  # fewer, larger checkpoints (each one syncs)
                conn.execute("PRAGMA busy_timeout=60000")
                conn.execute("PRAGMA cache_size=-65536")
                conn.execute("PRAGMA temp_store=MEMORY")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open SQLite store {self.path}: {exc}") from exc
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

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
        conn = self._conn()
        if getattr(self._batch, "depth", 0):  # inside batch(): its transaction is ours
            yield conn
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            # codes assigned inside the rolled-back transaction no longer exist
            with self._lock:
                self._codes.clear()
                self._tables.clear()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"SQLite write failed: {exc}") from exc
            raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        # one read transaction = one consistent snapshot for the several queries of a search
        conn = self._conn()
        if getattr(self._batch, "depth", 0):  # inside batch(): read its own writes
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

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._conns:
                conn.close()
            self._conns.clear()
            self._vectors.clear()
            self._masks.clear()
            self._kind_rows.clear()

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
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5(tokens, content='', tokenize='ascii')")
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table}_vocab USING fts5vocab({table}, 'row')")
            conn.execute("INSERT OR IGNORE INTO kb_fts(tag, code) VALUES (?, ?)", (tag, code))
        elif conn.execute("SELECT 1 FROM kb_fts WHERE tag=? AND code=?", (tag, code)).fetchone() is None:
            return None
        with self._lock:
            self._tables.add(table)
        return table

    def _bump(self, conn: sqlite3.Connection, tag: str, kbs: set[str], vectors: bool) -> None:
        seq = conn.execute("UPDATE kb_seq SET n=n+1 WHERE k=0 RETURNING n").fetchone()[0]
        for kb in kbs:
            conn.execute(
                "INSERT INTO kb_gen VALUES (?, ?, ?, ?) ON CONFLICT(tag, kb_id) DO UPDATE SET n=excluded.n"
                + (", vn=excluded.vn" if vectors else ""), (tag, kb, seq, seq))

    def _gen(self, conn: sqlite3.Connection, tag: str, kb: str) -> tuple[int, int]:
        row = conn.execute("SELECT n, vn FROM kb_gen WHERE tag=? AND kb_id=?", (tag, kb)).fetchone()
        return (row[0], row[1]) if row else (0, 0)

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
            for suffix in ("docs", "kv", "vec"):
                conn.execute(f"DROP TABLE IF EXISTS {tag}_{suffix}")
            for table in ("kb_fts", "kb_gen", "kb_tenants"):
                conn.execute(f"DELETE FROM {table} WHERE tag=?", (tag,))
        self._forget(tag)

    def _forget(self, tag: str) -> None:
        with self._lock:
            self._tables = {t for t in self._tables if not t.startswith(tag + "_")}
            for cache in (self._vectors, self._masks, self._kinds, self._kind_rows):
                for key in [k for k in cache if k[0] == tag]:
                    del cache[key]

    def index_exists(self, tenant_id: str) -> bool:
        with self._read() as conn:
            return self._tag(conn, tenant_id) is not None

    def refresh(self, tenant_id: str) -> None:
        """Writes are visible once committed; nothing to do."""

    # ---------------------------------------------------------------- writing

    def _prepare(self, doc: Doc, kb_id: str) -> tuple[Doc, str, dict[str, bytes | None]]:
        if not isinstance(doc, Mapping):
            raise StoreError("not a mapping")
        doc_id = doc.get("id")
        if not isinstance(doc_id, str) or not doc_id:
            raise StoreError("missing or empty 'id'")
        body: Doc = {}
        vectors: dict[str, bytes | None] = {}
        for name, value in doc.items():
            if _is_vec(name):
                vectors[name] = _vec_blob(name, value)
            else:
                body[name] = value
        body["kb_id"] = kb_id
        kind = body.get(_KG)
        if kind is not None and not isinstance(kind, str):
            raise StoreError(f"{_KG} must be a string")
        return body, _dumps(body), vectors

    def _index_fields(self, conn: sqlite3.Connection, batch: "_IndexWrites", rowid: int, old: Doc, new: Doc,
                      names: set[str]) -> None:
        """Queue the kv and FTS changes that bring the named fields from ``old`` to ``new``."""
        for name in names:
            kind = _field_kind(name)
            if not kind:
                continue
            before_value, after_value = old.get(name), new.get(name)
            if _same(before_value, after_value):
                continue
            if kind == _KV:
                code = self._code(conn, name, create=True)
                if name in old and name in new:
                    # a list that gained one value (a document id, a chunk id) rewrites one row,
                    # not all of them: this keeps a merge's writes from growing with an entity
                    before_values, after_values = _kv_values(name, before_value), _kv_values(name, after_value)
                    batch.kv_del_values.extend((rowid, code, v) for v in before_values - after_values)
                    batch.kv_add.extend((code, v, rowid) for v in after_values - before_values)
                    continue
                if name in old:
                    batch.kv_del.append((rowid, code))
                if type(after_value) is str and not _is_num(name):  # the common case, quickly
                    batch.kv_add.append((code, after_value, rowid))
                else:
                    batch.kv_add.extend((code, v, rowid) for v in _kv_values(name, after_value))
            else:
                table = self._fts(conn, batch.tag, name, create=True)
                before, after = _tokens(before_value), _tokens(after_value)
                if before:
                    # contentless FTS5 deletes by replaying the exact tokens that were inserted
                    batch.fts_del.setdefault(table, []).append((rowid, _hex(before)))
                if after:
                    batch.fts_add.setdefault(table, []).append((rowid, _hex(after)))
                delta = bool(after) - bool(before)
                if delta:
                    code = self._codes[name]
                    batch.fts_rows[code] = batch.fts_rows.get(code, 0) + delta

    def _set_vectors(self, conn: sqlite3.Connection, batch: "_IndexWrites", rowid: int, body: Doc,
                     vectors: Mapping[str, bytes | None], replace_all: bool) -> None:
        if replace_all:
            batch.vec_clear.append((rowid,))
        for name, blob in vectors.items():
            code = self._code(conn, name, create=True)
            if blob is None:
                batch.vec_del.append((rowid, code))
            else:
                batch.vec_put.append((rowid, code, body["kb_id"], body.get(_KG), blob))

    def upsert(self, tenant_id: str, kb_id: str, docs: Sequence[Doc], *, refresh: bool = True) -> int:
        if not isinstance(kb_id, str) or not kb_id:
            raise ValueError("kb_id must be a non-empty string")
        prepared: dict[str, tuple[Doc, str, dict[str, bytes | None]]] = {}
        failures: list[str] = []
        for i, doc in enumerate(docs):
            try:
                body, text, vectors = self._prepare(doc, kb_id)
                prepared[body["id"]] = (body, text, vectors)  # a repeated id: the last one wins
            except StoreError as exc:
                label = doc.get("id") if isinstance(doc, Mapping) and doc.get("id") else f"#{i}"
                failures.append(f"{label}: {exc}")
        if prepared:
            with self._write() as conn:
                tag = self._create(conn, tenant_id)
                existing = {row[1]: row for row in conn.execute(
                    f"SELECT rowid, id, kb_id, body FROM {tag}_docs WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps(list(prepared)),))}
                touched = {kb_id}
                batch = _IndexWrites(tag)
                # rowids as SQLite would choose them (max + 1), assigned here so that inserts
                # can go in one executemany; the write lock is held, so nobody else takes them
                next_rowid = conn.execute(f"SELECT coalesce(max(rowid), 0) FROM {tag}_docs").fetchone()[0] + 1
                inserts: list[tuple[Any, ...]] = []
                updates: list[tuple[Any, ...]] = []
                for doc_id, (body, text, vectors) in prepared.items():
                    old_row = existing.get(doc_id)
                    if old_row is None:
                        rowid, next_rowid = next_rowid, next_rowid + 1
                        inserts.append((rowid, doc_id, kb_id, body.get(_KG), text))
                        old: Doc = {}
                    else:
                        rowid, touched_kb, old = old_row[0], old_row[2], json.loads(old_row[3])
                        touched.add(touched_kb)
                        updates.append((kb_id, body.get(_KG), text, rowid))
                    self._index_fields(conn, batch, rowid, old, body, set(old) | set(body))
                    self._set_vectors(conn, batch, rowid, body, vectors, replace_all=old_row is not None)
                conn.executemany(f"INSERT INTO {tag}_docs(rowid, id, kb_id, kg, body) VALUES (?, ?, ?, ?, ?)",
                                 inserts)
                conn.executemany(f"UPDATE {tag}_docs SET kb_id=?, kg=?, body=? WHERE rowid=?", updates)
                batch.flush(conn)
                self._bump(conn, tag, touched, vectors=True)
        if failures:
            raise StoreError(f"{len(failures)} document(s) not written: " + "; ".join(failures[:20]))
        return len(prepared)

    def _change(self, conn: sqlite3.Connection, tag: str, rows: list[tuple[int, str]],
                changes: Sequence[Doc]) -> tuple[int, bool]:
        """Apply partial changes to (rowid, body) rows. Returns (changed, vectors touched)."""
        vectors_touched = False
        batch = _IndexWrites(tag)
        updates: list[tuple[Any, ...]] = []
        kinds: list[tuple[Any, ...]] = []
        for (rowid, text), change in zip(rows, changes):
            old = json.loads(text)
            vectors: dict[str, bytes | None] = {}
            new = dict(old)
            for name, value in change.items():
                if name == "id" and value != old["id"] or name == "kb_id" and value != old["kb_id"]:
                    raise StoreError(f"cannot change {name} of {old['id']!r} in place; upsert a new document")
                if _is_vec(name):
                    vectors[name] = _vec_blob(name, value)
                else:
                    new[name] = value
            if new.get(_KG) is not None and not isinstance(new.get(_KG), str):
                raise StoreError(f"{_KG} must be a string")
            updates.append((new.get(_KG), _dumps(new), rowid))
            self._index_fields(conn, batch, rowid, old, new, set(change))
            if old.get(_KG) != new.get(_KG):
                kinds.append((new.get(_KG), rowid))
                vectors_touched = True
            if vectors:
                self._set_vectors(conn, batch, rowid, new, vectors, replace_all=False)
                vectors_touched = True
        conn.executemany(f"UPDATE {tag}_docs SET kg=?, body=? WHERE rowid=?", updates)
        conn.executemany(f"UPDATE {tag}_vec SET kg=? WHERE doc=?", kinds)
        batch.flush(conn)
        return len(rows), vectors_touched

    def patch(self, tenant_id: str, kb_id: str, changes: Mapping[str, Doc], *, refresh: bool = True) -> int:
        if not isinstance(kb_id, str) or not kb_id:
            raise ValueError("kb_id must be a non-empty string")
        if not changes:
            return 0
        with self._write() as conn:
            tag = self._tag(conn, tenant_id)
            if tag is None:
                return 0
            found = conn.execute(
                f"SELECT id, rowid, body FROM {tag}_docs WHERE id IN (SELECT value FROM json_each(?)) AND kb_id=?",
                (json.dumps(list(changes)), kb_id)).fetchall()
            count, vec = self._change(conn, tag, [(r[1], r[2]) for r in found], [changes[r[0]] for r in found])
            if count:
                self._bump(conn, tag, {kb_id}, vec)
            return count

    def update(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition], values: Doc,
               *, refresh: bool = True) -> int:
        kbs = _kbs(kb_ids)
        if not values:
            return 0
        with self._write() as conn:
            tag = self._tag(conn, tenant_id)
            if tag is None:
                return 0
            sql, params = self._where(conn, tag, kbs, where)
            rows = conn.execute(f"SELECT d.rowid, d.body FROM {tag}_docs d WHERE {sql}", params).fetchall()
            count, vec = self._change(conn, tag, rows, [values] * len(rows))
            if count:
                self._bump(conn, tag, set(kbs), vec)
            return count

    def delete(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = (),
               *, refresh: bool = True) -> int:
        kbs = _kbs(kb_ids)
        with self._write() as conn:
            tag = self._tag(conn, tenant_id)
            if tag is None:
                return 0
            sql, params = self._where(conn, tag, kbs, where)
            rows = conn.execute(f"SELECT d.rowid, d.body FROM {tag}_docs d WHERE {sql}", params).fetchall()
            batch = _IndexWrites(tag)
            for rowid, text in rows:
                old = json.loads(text)
                self._index_fields(conn, batch, rowid, old, {}, {n for n in old if _is_text(n)})
            batch.flush(conn)
            ids = [(r[0],) for r in rows]
            for table, column in (("kv", "doc"), ("vec", "doc"), ("docs", "rowid")):
                conn.executemany(f"DELETE FROM {tag}_{table} WHERE {column}=?", ids)
            if rows:
                self._bump(conn, tag, set(kbs), vectors=True)
            return len(rows)

    # ---------------------------------------------------------------- filters

    def _where(self, conn: sqlite3.Connection, tag: str, kbs: Sequence[str], where: Sequence[Condition],
               drive: bool = True, by_rowid: bool = False) -> tuple[str, list[Any]]:
        """SQL over alias ``d`` for the kb scope and all conditions.

        SQLite's planner has no statistics here, so we choose: with ``drive``, one selective kv
        condition becomes ``rowid IN (...)`` (the loop driver) and the kb test loses its index
        (unary +); every other kv condition is a correlated probe of the (doc, field) index.
        """
        driver: int | None = None
        if drive and not by_rowid and not any(c.field == "id" and c.op in ("eq", "in") for c in where):
            ranked = [(_is_num(c.field), i) for i, c in enumerate(where)
                      if _is_kv(c.field) and c.op in ("eq", "in")]
            driver = min(ranked)[1] if ranked else None
        parts = [("+" if driver is not None or by_rowid else "") + "d.kb_id IN (SELECT value FROM json_each(?))"]
        params: list[Any] = [json.dumps(list(kbs))]
        for i, cond in enumerate(where):
            sql, p = self._condition(conn, tag, cond, i == driver)
            parts.append(sql)
            params.extend(p)
        return " AND ".join(parts), params

    def _condition(self, conn: sqlite3.Connection, tag: str, cond: Condition, driver: bool) -> tuple[str, list[Any]]:
        name, op, value = cond.field, cond.op, cond.value
        _check_name(name)
        values: list[Any] = []
        if op in ("in", "not_in"):
            raw = value if isinstance(value, (list, tuple, set, frozenset)) else [value]
            values = [_cond_value(name, v) for v in raw]
        elif op in ("eq", "gte", "lte", "gt", "lt"):
            if isinstance(value, (list, dict)):
                raise StoreError(f"condition {op} on {name} needs a scalar value")
            values = [_cond_value(name, value)]
        elif op not in ("exists", "missing"):
            raise StoreError(f"unknown condition operator {op!r}")
        listed = json.dumps(values, ensure_ascii=False)
        compare = {"gte": ">=", "lte": "<=", "gt": ">", "lt": "<"}.get(op)

        if name in _COLUMNS:
            col = _COLUMNS[name]
            if op in ("eq", "in"):
                return f"{col} IN (SELECT value FROM json_each(?))", [listed]
            if op == "not_in":
                return f"({col} IS NULL OR {col} NOT IN (SELECT value FROM json_each(?)))", [listed]
            if op in ("exists", "missing"):
                return f"{col} IS {'NOT ' if op == 'exists' else ''}NULL", []
            return f"{col} {compare} ?", values

        if _is_vec(name):
            if op not in ("exists", "missing"):
                raise StoreError(f"vector field {name} only supports exists/missing conditions")
            code = self._code(conn, name)
            neg = "" if op == "exists" else "NOT "
            return f"{neg}EXISTS (SELECT 1 FROM {tag}_vec v WHERE v.doc=d.rowid AND v.field=?)", [code or -1]

        if _is_kv(name):
            code = self._code(conn, name) or -1
            probe = f"SELECT 1 FROM {tag}_kv k WHERE k.doc=d.rowid AND k.field=?"
            if op in ("eq", "in") and driver:
                return (f"d.rowid IN (SELECT k.doc FROM {tag}_kv k WHERE k.field=? "
                        f"AND k.value IN (SELECT value FROM json_each(?)))"), [code, listed]
            if op in ("eq", "in", "not_in"):
                neg = "NOT " if op == "not_in" else ""
                return f"{neg}EXISTS ({probe} AND k.value IN (SELECT value FROM json_each(?)))", [code, listed]
            if op in ("exists", "missing"):
                return f"{'NOT ' if op == 'missing' else ''}EXISTS ({probe})", [code]
            return f"EXISTS ({probe} AND k.value {compare} ?)", [code, *values]

        # any other field: read the JSON body (json_each treats a scalar as a one-element list)
        each = "SELECT 1 FROM json_each(d.body, ?) j WHERE j.type != 'null'"
        if op in ("eq", "in", "not_in"):
            neg = "NOT " if op == "not_in" else ""
            return f"{neg}EXISTS ({each} AND j.value IN (SELECT value FROM json_each(?)))", [_path(name), listed]
        if op in ("exists", "missing"):
            return f"{'NOT ' if op == 'missing' else ''}EXISTS ({each})", [_path(name)]
        return f"EXISTS ({each} AND j.value {compare} ?)", [_path(name), *values]

    # ---------------------------------------------------------------- reading

    def _vectors_of(self, conn: sqlite3.Connection, tag: str, rowids: Sequence[int],
                    names: Sequence[str]) -> dict[int, dict[str, bytes]]:
        out: dict[int, dict[str, bytes]] = {}
        codes = {self._code(conn, n): n for n in names if _is_vec(n)}
        codes.pop(None, None)
        if not codes or not rowids:
            return out
        for doc, field, blob in conn.execute(
                f"SELECT doc, field, v FROM {tag}_vec WHERE doc IN (SELECT value FROM json_each(?)) "
                f"AND field IN (SELECT value FROM json_each(?))", (json.dumps(list(rowids)), json.dumps(list(codes)))):
            out.setdefault(doc, {})[codes[field]] = blob
        return out

    def _load(self, conn: sqlite3.Connection, tag: str, rowids: Sequence[int],
              fields: Sequence[str] | None) -> dict[int, Doc]:
        rows = conn.execute(f"SELECT rowid, body FROM {tag}_docs WHERE rowid IN (SELECT value FROM json_each(?))",
                            (json.dumps(list(rowids)),)).fetchall()
        vecs = self._vectors_of(conn, tag, [r[0] for r in rows], fields or [])
        return {r[0]: _project(json.loads(r[1]), fields, vecs.get(r[0], {})) for r in rows}

    def get(self, tenant_id: str, kb_ids: Sequence[str], ids: Sequence[str],
            fields: Sequence[str] | None = None) -> list[Doc]:
        kbs = _kbs(kb_ids)
        if not ids:
            return []
        with self._read() as conn:
            tag = self._tag(conn, tenant_id)
            if tag is None:
                return []
            rows = conn.execute(
                f"SELECT id, rowid FROM {tag}_docs WHERE id IN (SELECT value FROM json_each(?)) "
                f"AND kb_id IN (SELECT value FROM json_each(?))", (json.dumps(list(ids)), json.dumps(kbs))).fetchall()
            by_id = dict(rows)
            docs = self._load(conn, tag, list(by_id.values()), fields)
        out, seen = [], set()
        for doc_id in ids:
            if doc_id in by_id and doc_id not in seen:
                seen.add(doc_id)
                out.append(docs[by_id[doc_id]])
        return out

    def count(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = ()) -> int:
        kbs = _kbs(kb_ids)
        with self._read() as conn:
            tag = self._tag(conn, tenant_id)
            if tag is None:
                return 0
            sql, params = self._where(conn, tag, kbs, where)
            return int(conn.execute(f"SELECT count(*) FROM {tag}_docs d WHERE {sql}", params).fetchone()[0])

    def scan(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = (),
             fields: Sequence[str] | None = None, batch_size: int = 1000) -> Iterator[Doc]:
        kbs = _kbs(kb_ids)
        batch_size = max(1, batch_size)
        after = ""
        while True:
            # a fresh query per batch: no transaction stays open while the caller works
            with self._read() as conn:
                tag = self._tag(conn, tenant_id)
                if tag is None:
                    return
                sql, params = self._where(conn, tag, kbs, where)
                rows = conn.execute(f"SELECT d.rowid, d.id FROM {tag}_docs d WHERE {sql} AND d.id > ? "
                                    f"ORDER BY d.id LIMIT ?", [*params, after, batch_size]).fetchall()
                docs = self._load(conn, tag, [r[0] for r in rows], fields)
            for rowid, _ in rows:
                if rowid in docs:
                    yield docs[rowid]
            if len(rows) < batch_size:
                return
            after = rows[-1][1]

    def aggregate(self, tenant_id: str, kb_ids: Sequence[str], field_name: str,
                  where: Sequence[Condition] = (), size: int = 100) -> list[tuple[Any, int]]:
        kbs = _kbs(kb_ids)
        _check_name(field_name)
        with self._read() as conn:
            tag = self._tag(conn, tenant_id)
            if tag is None:
                return []
            sql, params = self._where(conn, tag, kbs, where, drive=False)
            if field_name in _COLUMNS:
                col = _COLUMNS[field_name]
                query = (f"SELECT {col}, count(*) AS c FROM {tag}_docs d WHERE {sql} AND {col} IS NOT NULL "
                         f"GROUP BY {col}")
            elif _is_kv(field_name):
                query = (f"SELECT k.value, count(*) AS c FROM {tag}_kv k JOIN {tag}_docs d ON d.rowid=k.doc "
                         f"WHERE k.field=? AND {sql} GROUP BY k.value")
                params = [self._code(conn, field_name) or -1, *params]
            else:
                query = (f"SELECT j.value, count(DISTINCT d.rowid) AS c FROM {tag}_docs d, json_each(d.body, ?) j "
                         f"WHERE j.type NOT IN ('null', 'object', 'array') AND {sql} GROUP BY j.value")
                params = [_path(field_name), *params]
            rows = conn.execute(f"{query} ORDER BY c DESC, 1 LIMIT ?", [*params, size]).fetchall()
        return [(value, int(n)) for value, n in rows]

    # ---------------------------------------------------------------- search

    def search(self, tenant_id: str, request: SearchRequest) -> SearchResult:
        req = request
        kbs = _kbs(req.kb_ids)
        if req.offset < 0 or req.limit < 0 or req.candidates < 1:
            raise StoreError("offset and limit must be >= 0 and candidates >= 1")
        for name in req.fields or ():
            _check_name(name)
        with self._read() as conn:
            tag = self._tag(conn, tenant_id)
            if tag is None:
                return SearchResult()
            if req.text is None and req.vector is None:
                return self._listing(conn, tag, kbs, req)

            term: dict[int, float] = {}
            ids: dict[int, str] = {}
            if req.text is not None:
                for rowid, doc_id, score in self._bm25(conn, tag, kbs, req.where, req.text, req.candidates):
                    term[rowid], ids[rowid] = score, doc_id
                best = max(term.values(), default=0.0)
                term = {r: (s / best if best > 0 else 0.0) for r, s in term.items()}
            vec: dict[int, float] = {}
            if req.vector is not None:
                query = self._query_vector(req.vector)
                vec = self._knn(conn, tag, kbs, req.where, req.vector.field, query, req.candidates)
                missing = [r for r in term if r not in vec]
                vec.update(self._cosines(conn, tag, missing, req.vector.field, query))
                unknown = [r for r in vec if r not in ids]
                if unknown:
                    ids.update(conn.execute(
                        f"SELECT rowid, id FROM {tag}_docs WHERE rowid IN (SELECT value FROM json_each(?))",
                        (json.dumps(unknown),)).fetchall())
            scored = []
            for rowid in set(term) | set(vec):
                ts, vs = term.get(rowid, 0.0), min(1.0, max(0.0, vec.get(rowid, 0.0)))
                score = fuse(ts, vs, req.vector_weight, req.text is not None, req.vector is not None)
                if score >= req.threshold:
                    scored.append((-score, ids[rowid], rowid, ts, vs))
            scored.sort()
            page = scored[req.offset:req.offset + req.limit]
            docs = self._load(conn, tag, [s[2] for s in page], req.fields)
        hits = [Hit(id=doc_id, doc=docs[rowid], score=-neg, term_score=ts, vector_score=vs)
                for neg, doc_id, rowid, ts, vs in page]
        return SearchResult(hits=hits, total=len(scored))

    def _listing(self, conn: sqlite3.Connection, tag: str, kbs: list[str], req: SearchRequest) -> SearchResult:
        sql, params = self._where(conn, tag, kbs, req.where)
        total = conn.execute(f"SELECT count(*) FROM {tag}_docs d WHERE {sql}", params).fetchone()[0]
        order: list[str] = []
        order_params: list[Any] = []
        for name, direction in req.order_by:
            _check_name(name)
            if direction not in ("asc", "desc"):
                raise StoreError(f"order direction must be 'asc' or 'desc', not {direction!r}")
            if name in _COLUMNS:
                expr = _COLUMNS[name]
            else:
                expr = "json_extract(d.body, ?)"
                order_params.append(_path(name))
            # missing values last in either direction, as Elasticsearch sorts them
            order.append(f"({expr}) IS NULL, {expr} {direction.upper()}")
            if expr.endswith("?)"):
                order_params.append(_path(name))
        order.append("d.id")
        rows = conn.execute(f"SELECT d.rowid, d.id FROM {tag}_docs d WHERE {sql} ORDER BY {', '.join(order)} "
                            f"LIMIT ? OFFSET ?", [*params, *order_params, req.limit, req.offset]).fetchall()
        docs = self._load(conn, tag, [r[0] for r in rows], req.fields)
        return SearchResult(hits=[Hit(id=doc_id, doc=docs[rowid], score=0.0) for rowid, doc_id in rows],
                            total=int(total))

    def _bm25(self, conn: sqlite3.Connection, tag: str, kbs: list[str], where: Sequence[Condition],
              text: TextQuery, candidates: int) -> list[tuple[int, str, float]]:
        """The top text candidates as (rowid, id, boosted Lucene BM25 summed over fields)."""
        tokens = list(dict.fromkeys(t for tok in text.tokens for t in str(tok).split()))
        if not tokens:
            return []
        parts: list[np.ndarray] = []  # rows of (rowid, boosted score, token number)
        for name, boost in text.fields.items():
            _check_name(name)
            table = self._fts(conn, tag, name) if boost > 0 else None
            if table is None:
                continue
            rows = conn.execute("SELECT rows FROM kb_fts WHERE tag=? AND code=?",
                                (tag, self._codes[name])).fetchone()[0]
            for number, token in enumerate(tokens):
                encoded = token.encode("utf-8").hex()
                df_row = conn.execute(f"SELECT doc FROM {table}_vocab WHERE term=?", (encoded,)).fetchone()
                if df_row is None:
                    continue
                df = df_row[0]
                # FTS5 multiplies by max(1e-6, ln((N-n+.5)/(n+.5))); Lucene by ln(1+(N-n+.5)/(n+.5))
                fts_idf = max(1e-6, math.log((rows - df + 0.5) / (df + 0.5)))
                factor = boost * math.log(1.0 + (rows - df + 0.5) / (df + 0.5)) / fts_idf
                hits = conn.execute(f"SELECT rowid, -bm25({table}), {number} FROM {table} WHERE {table} MATCH ?",
                                    (f'"{encoded}"',)).fetchall()
                if hits:
                    part = np.array(hits, dtype=np.float64)
                    part[:, 1] *= factor
                    parts.append(part)
        if not parts:
            return []
        table_ = np.concatenate(parts)
        rowids, where_in = np.unique(table_[:, 0].astype(np.int64), return_inverse=True)
        scores = np.bincount(where_in, weights=table_[:, 1], minlength=len(rowids))
        pairs = np.unique(where_in * len(tokens) + table_[:, 2].astype(np.int64))
        matched = np.bincount(pairs // len(tokens), minlength=len(rowids))
        need = max(1, math.floor(text.minimum_should_match * len(tokens) + 1e-9))
        keep = matched >= need
        rowids, scores = rowids[keep], scores[keep]
        if not len(rowids):
            return []
        kinds = _kinds_of(where)
        if kinds is not None:
            # rows of another kind cannot pass: drop them with one vectorized lookup, so a search
            # for a rare kind over a text field all kinds share does not send every matching row
            # of the common kinds through SQL below (the filter still runs on what is left)
            allowed = np.concatenate([self._kind_rowids(conn, tag, kb, kind) for kb in kbs for kind in kinds])
            keep = np.isin(rowids, allowed)
            rowids, scores = rowids[keep], scores[keep]
            if not len(rowids):
                return []
        # kb scope and filters: one query over the best-scored rows first (enough when the filter
        # keeps most rows), then over the rest only if too few of those passed
        sql, params = self._where(conn, tag, kbs, where, by_rowid=True)
        order = np.argsort(-scores, kind="stable")
        first = order[:4 * candidates]
        passed = self._filter_rowids(conn, tag, sql, params, rowids[first])
        if len(passed) < candidates and len(order) > len(first):
            passed = np.concatenate([passed, self._filter_rowids(conn, tag, sql, params, rowids[order[len(first):]])])
        keep = np.isin(rowids, passed)
        rowids, scores = rowids[keep], scores[keep]
        if len(rowids) > candidates:
            # everything tied with the last place comes along, so ties are then broken by id
            cut = -np.partition(-scores, candidates - 1)[candidates - 1]
            keep = scores >= cut
            rowids, scores = rowids[keep], scores[keep]
        ids = dict(conn.execute(f"SELECT rowid, id FROM {tag}_docs WHERE rowid IN (SELECT value FROM json_each(?))",
                                (json.dumps(rowids.tolist()),)).fetchall())
        ranked = sorted((-float(s), ids[int(r)], int(r)) for r, s in zip(rowids, scores))
        return [(r, doc_id, -neg) for neg, doc_id, r in ranked[:candidates]]

    def _kind_rowids(self, conn: sqlite3.Connection, tag: str, kb: str, kind: str | None) -> np.ndarray:
        """Rowids of one kind of row in one knowledge base, cached until the KB is written to."""
        gen = self._gen(conn, tag, kb)[0]
        key = (tag, kb, kind)
        with self._lock:
            cached = self._kind_rows.get(key)
            if cached is not None and cached[0] == gen:
                self._kind_rows.move_to_end(key)
                return cached[1]
        rows = np.fromiter((r[0] for r in conn.execute(
            f"SELECT rowid FROM {tag}_docs WHERE kb_id=? AND kg IS ?", (kb, kind))), dtype=np.int64)
        with self._lock:
            self._kind_rows[key] = (gen, rows)
            while len(self._kind_rows) > _MASK_CACHE_ENTRIES:
                self._kind_rows.popitem(last=False)
        return rows

    @staticmethod
    def _filter_rowids(conn: sqlite3.Connection, tag: str, sql: str, params: list[Any],
                       rowids: np.ndarray) -> np.ndarray:
        return np.fromiter((r[0] for r in conn.execute(
            f"SELECT d.rowid FROM {tag}_docs d WHERE d.rowid IN (SELECT value FROM json_each(?)) AND {sql}",
            [json.dumps(rowids.tolist()), *params])), dtype=np.int64)

    @staticmethod
    def _query_vector(vq: VectorQuery) -> np.ndarray:
        m = _VEC.match(vq.field)
        if not m:
            raise StoreError(f"vector field {vq.field!r} is not named q_<dim>_vec")
        arr = np.asarray(vq.vector, dtype=np.float32)
        if arr.ndim != 1 or arr.shape[0] != int(m.group(1)):
            raise StoreError(f"query vector for {vq.field} needs {m.group(1)} numbers, got shape {arr.shape}")
        return _unit(arr)

    def _cosines(self, conn: sqlite3.Connection, tag: str, rowids: list[int], name: str,
                 query: np.ndarray) -> dict[int, float]:
        vecs = self._vectors_of(conn, tag, rowids, [name])
        if not vecs:
            return {}
        matrix = np.frombuffer(b"".join(v[name] for v in vecs.values()), dtype=np.float32).reshape(len(vecs), -1)
        return dict(zip(vecs, (_unit(matrix) @ query).tolist()))

    def _knn(self, conn: sqlite3.Connection, tag: str, kbs: list[str], where: Sequence[Condition], name: str,
             query: np.ndarray, k: int) -> dict[int, float]:
        code = self._code(conn, name)
        if code is None:
            return {}
        # the kind conditions choose cache partitions; any other condition needs a row mask
        kinds: set[str | None] | None = None
        masked = False
        for cond in where:
            if cond.field == _KG and cond.op in ("eq", "in"):
                raw = cond.value if cond.op == "in" else [cond.value]
                wanted = {_kw(v) for v in raw}
                kinds = wanted if kinds is None else kinds & wanted
            elif cond.field == _KG and cond.op == "missing":
                kinds = {None} if kinds is None else kinds & {None}
            else:
                masked = True
        best_rows: list[np.ndarray] = []
        best_sims: list[np.ndarray] = []
        for kb in kbs:
            gen, vgen = self._gen(conn, tag, kb)
            for kind in self._partitions(conn, tag, kb, code, vgen, kinds):
                rowids, matrix = self._matrix(conn, tag, kb, code, kind, vgen)
                if not len(rowids):
                    continue
                sims = matrix @ query
                if masked:
                    mask = self._mask(conn, tag, kb, code, kind, where, gen, rowids)
                    rowids, sims = rowids[mask], sims[mask]
                if len(sims) > k:
                    top = np.argpartition(-sims, k - 1)[:k]
                    rowids, sims = rowids[top], sims[top]
                best_rows.append(rowids)
                best_sims.append(sims)
        if not best_rows:
            return {}
        rows, sims = np.concatenate(best_rows), np.concatenate(best_sims)
        order = np.lexsort((rows, -sims))[:k]
        return {int(rows[i]): float(sims[i]) for i in order}

    def _partitions(self, conn: sqlite3.Connection, tag: str, kb: str, code: int, vgen: int,
                    kinds: set[str | None] | None) -> list[str | None]:
        key = (tag, kb, code)
        cached = self._kinds.get(key)
        if cached is None or cached[0] != vgen:
            found = [r[0] for r in conn.execute(
                f"SELECT DISTINCT kg FROM {tag}_vec WHERE field=? AND kb_id=?", (code, kb))]
            cached = (vgen, found)
            with self._lock:
                self._kinds[key] = cached
        return [k for k in cached[1] if kinds is None or k in kinds]

    def _matrix(self, conn: sqlite3.Connection, tag: str, kb: str, code: int, kind: str | None,
                vgen: int) -> tuple[np.ndarray, np.ndarray]:
        key = (tag, kb, code, kind)
        with self._lock:
            cached = self._vectors.get(key)
            if cached is not None and cached[0] == vgen:
                self._vectors.move_to_end(key)
                return cached[1], cached[2]
        rows = conn.execute(f"SELECT doc, v FROM {tag}_vec WHERE field=? AND kb_id=? AND kg IS ? ORDER BY doc",
                            (code, kb, kind)).fetchall()
        rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        if rows:
            matrix = _unit(np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1))
        else:
            matrix = np.zeros((0, 1), dtype=np.float32)
        with self._lock:
            self._vectors[key] = (vgen, rowids, matrix)
            total = sum(m.nbytes for _, _, m in self._vectors.values())
            while total > _VECTOR_CACHE_BYTES and len(self._vectors) > 1:
                _, (_, _, old) = self._vectors.popitem(last=False)
                total -= old.nbytes
        return rowids, matrix

    def _mask(self, conn: sqlite3.Connection, tag: str, kb: str, code: int, kind: str | None,
              where: Sequence[Condition], gen: int, rowids: np.ndarray) -> np.ndarray:
        key = (tag, kb, code, kind, repr(list(where)), gen)
        with self._lock:
            mask = self._masks.get(key)
            if mask is not None and len(mask) == len(rowids):
                self._masks.move_to_end(key)
                return mask
        sql, params = self._where(conn, tag, [kb], where)
        allowed = np.fromiter((r[0] for r in conn.execute(f"SELECT d.rowid FROM {tag}_docs d WHERE {sql}", params)),
                              dtype=np.int64)
        mask = np.isin(rowids, allowed)
        with self._lock:
            self._masks[key] = mask
            while len(self._masks) > _MASK_CACHE_ENTRIES:
                self._masks.popitem(last=False)
        return mask


__all__ = ["SQLiteStore"]
