"""The embedded DocStore: one SQLite file; BM25 and kNN from in-memory indexes kept in step with it.

Per tenant (``t<hash>`` tag, so any tenant string maps to a safe identifier) the file holds:

- ``<tag>_docs``: rowid, ``id`` (unique), ``kb_id``, ``kg`` (= knowledge_graph_kwd) and the document
  as JSON without its vectors;
- ``<tag>_kv``: one row per (field, value, doc) for every ``*_kwd``/``*_int``/``*_flt`` value and
  ``doc_id`` (list elements each get a row), indexed both ways, so keyword/range filters are index
  lookups instead of JSON scans. Fields no query filters on (``records.UNFILTERED_FIELDS``, e.g.
  display names) get no kv rows: a condition, ordering or aggregation on one computes the values its
  kv rows would hold from each body instead (same answer, slower);
- ``<tag>_vec``: float32 blobs per (doc, vector field), with kb and kind for cache partitions;
- ``<tag>_fts<code>``: one contentless FTS5 table per text field, so BM25 statistics (document count,
  document frequency; ``kb_fts`` keeps row and token counts) are per field, as in Elasticsearch;
- ``<tag>_log``: a change log of the rows every write touched (see ``_ensure_log``).

Text tokens are written to FTS5 hex-encoded: every token becomes a run of [0-9a-f], so FTS5's
tokenizer splits on spaces only, never folds case and never mangles CJK or punctuation; matching is
exact, like Elasticsearch's whitespace analyzer. Scores are Lucene's BM25 (idf = ln(1 + (N - n +
0.5) / (n + 0.5)), k1 1.2, b 0.75) from those statistics and per-row term frequencies held in memory
(``text_index``) per KB and kind; vectors are held in memory the same way (``vector_index``: exact
for small slices, an inverted file for large ones). A process keeps these indexes current by
reading the change log since the generation it last saw, so another process's writes cost it only
what changed.

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
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from kbgraph.store.base import (
    Condition, Doc, DocStore, Hit, SearchRequest, SearchResult, StoreError, TextQuery, VectorQuery,
)
from kbgraph.store.index_files import PERSIST_MIN_ROWS, IndexFiles
from kbgraph.store.records import UNFILTERED_FIELDS
from kbgraph.store.row_set import RowSet
from kbgraph.store.text_index import FieldPostings
from kbgraph.store.vector_index import VectorSlice
from kbgraph.utils.top_k import largest

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VEC = re.compile(r"^q_(\d+)_vec$")
_KG = "knowledge_graph_kwd"
_COLUMNS = {"id": "d.id", "kb_id": "d.kb_id", _KG: "d.kg"}
# bytes of cached vector matrices kept per store before the least recently used are dropped
_VECTOR_CACHE_BYTES = 1 << 30
_MASK_CACHE_ENTRIES = 64
# a listing ordered by a numeric field sorts up to this many matching rows in memory (else walks the index)
_SORT_IN_MEMORY = 5000
# bytes of cached text postings kept per store
_POSTINGS_CACHE_BYTES = 512 << 20
# the change log keeps about this many entries; it is trimmed every _LOG_PRUNE_EVERY writes
_LOG_KEEP = 500_000
_LOG_PRUNE_EVERY = 256
# a kv filter probe with at most this many values seeks each of them; with more it scans the row's values
_SEEK_VALUES = 4


def _is_text(name: str) -> bool:
    return name.endswith(("_ltks", "_tks"))


def _is_num(name: str) -> bool:
    return name.endswith(("_int", "_flt"))


def _is_kv(name: str) -> bool:
    return name != _KG and (name.endswith("_kwd") or _is_num(name) or name == "doc_id")


def _has_kv_rows(name: str) -> bool:
    """Whether a keyword or numeric field's values are kept in the kv table (else in the body only)."""
    return _is_kv(name) and name not in UNFILTERED_FIELDS


@lru_cache(maxsize=4096)  # asked for every field of every row written
def _is_vec(name: str) -> bool:
    return name.startswith("q_") and name.endswith("_vec")


def _kw(value: Any) -> str:
    # Elasticsearch keyword fields index scalars as their string form
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_KV, _TEXT = 1, 2
_ANY_KIND = ("any kind",)  # a postings slice over all of a KB's rows, whatever their kind


@lru_cache(maxsize=4096)
def _field_kind(name: str) -> int:
    """_KV, _TEXT or 0 (stored in the body only): how a field is indexed."""
    if not _NAME.match(name):
        return 0
    return _KV if _has_kv_rows(name) else _TEXT if _is_text(name) else 0


def _kv_values(name: str, value: Any) -> set[Any]:
    items = value if isinstance(value, list) else [value]
    if not _is_num(name) and all(type(item) is str for item in items):
        return set(items)  # the common case (ids, keys, names), without the per-item checks below
    out: set[Any] = set()
    for item in items:
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


def _body_kv_values(body: str, name: str) -> str:
    """The values a field's kv rows would hold, as a JSON array, from a document body: how filters,
    orderings and aggregations read a field kept in the body only (SQL function kb_kv_values)."""
    value = _loads(body).get(name)
    return json.dumps(list(_kv_values(name, value)) if value is not None else [])


def _plain_kv(name: str, value: Any) -> bool:
    """Whether ``value`` is already the one kv value of the field: a string of a keyword field,
    or a float or 64-bit int (not a bool) of a numeric one."""
    kind = type(value)
    if kind is str:
        return not _is_num(name)
    if kind is float:
        return _is_num(name)
    return kind is int and _is_num(name) and -(1 << 63) <= value < (1 << 63)


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
        try:
            written = orjson.dumps(body)
            # orjson writes NaN and infinities as null: only a body that reads "null" somewhere
            # (a None, a non-finite number, or those letters in a string) needs the walk
            if b"null" in written:
                _refuse_non_finite(body)
            return written.decode("utf-8")
        except orjson.JSONEncodeError:
            # integers past 64 bits: orjson neither writes them nor reads them back exactly; the
            # leading space (still JSON) tells _loads to read this body with the stdlib
            return " " + json.dumps(body, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"document {body.get('id')!r} is not plain JSON: {exc}") from None


def _json_array(values: Collection[Any]) -> str:
    """``values`` (of a mapping, its keys) as a JSON array for ``json_each(?)``: ids, rowids, field
    codes and condition values. orjson writes one in about a microsecond; ``json.dumps`` with
    options builds a fresh encoder on every call (~15 us), and a query passes a few dozen such
    arrays. Non-finite numbers and integers past 64 bits keep the stdlib's spelling."""
    try:
        written = orjson.dumps(values if type(values) is list else list(values))
    except orjson.JSONEncodeError:
        return json.dumps(list(values), ensure_ascii=False)
    # orjson writes NaN and infinities as null; the stdlib spells them out (and SQLite refuses them)
    return written.decode("utf-8") if b"null" not in written else json.dumps(list(values), ensure_ascii=False)


def _loads(text: str) -> Doc:
    return json.loads(text) if text[:1] == " " else orjson.loads(text)


def _refuse_non_finite(value: Any) -> None:
    # orjson writes NaN and infinities as null; a stored document must not change that silently
    kind = type(value)
    if kind is float:
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a JSON number")
    elif kind is dict:
        for item in value.values():
            if type(item) not in _SCALARS:
                _refuse_non_finite(item)
    elif kind is list:
        for item in value:
            if type(item) not in _SCALARS:
                _refuse_non_finite(item)


_SCALARS = frozenset({str, int, bool, type(None)})


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


def _fused(term_rows: np.ndarray, term: np.ndarray, vec_rows: np.ndarray, vec: np.ndarray,
           req: SearchRequest) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rowids, term scores, vector scores clipped to [0, 1], fused scores) of every candidate, as
    base.fuse computes them (the same float operations, array-wise). Each side's rowids are unique."""
    rowids = np.union1d(term_rows, vec_rows)
    term_scores = np.zeros(len(rowids))
    vector_scores = np.zeros(len(rowids))
    term_scores[np.searchsorted(rowids, term_rows)] = term
    if len(vec_rows):
        vector_scores[np.searchsorted(rowids, vec_rows)] = vec
        if req.vector is not None and req.vector.floor:
            vector_scores = (vector_scores - req.vector.floor) / (1.0 - req.vector.floor)
        vector_scores = np.minimum(1.0, np.maximum(0.0, vector_scores))
    has_text, has_vector = req.text is not None, req.vector is not None
    if has_text and has_vector:
        scores = (1.0 - req.vector_weight) * term_scores + req.vector_weight * vector_scores
    else:
        scores = term_scores if has_text else vector_scores
    return rowids, term_scores, vector_scores, scores


def _best_first_written(rowids: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best scores; of rows tied with the last place, the earliest written
    (as Elasticsearch takes tied hits in index order). Ordering those by id instead would read the
    id of every tied row, often hundreds when a common word matches."""
    near = largest(scores, k)
    return near[np.lexsort((rowids[near], -scores[near]))[:k]]


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for a concatenation of sorted runs (each term's
    rows come sorted): a stable sort merges such runs in about half the time of unique's quicksort."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    first = np.empty(len(ordered), dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse


def _union(sets: Sequence[RowSet]) -> RowSet:
    return sets[0] if len(sets) == 1 else RowSet.of(np.concatenate([s.rows for s in sets]))


_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_SCORES = np.zeros(0, dtype=np.float64)


def _unit(arr: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    return np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0)


def _project(body: Doc, fields: Sequence[str] | None, vectors: Mapping[str, bytes]) -> Doc:
    if fields is None:
        return body  # freshly decoded, so nobody else holds it
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


def _drop_unfiltered_kv(conn: sqlite3.Connection, tag: str) -> None:
    """Stores written before UNFILTERED_FIELDS were kept in the body only: drop their kv rows, which
    nothing reads any more and no write would keep current."""
    names = json.dumps(sorted(UNFILTERED_FIELDS))
    for (code,) in conn.execute("SELECT code FROM kb_fields WHERE name IN (SELECT value FROM json_each(?))",
                                (names,)).fetchall():
        if conn.execute(f"SELECT 1 FROM {tag}_kv WHERE field=? LIMIT 1", (code,)).fetchone():
            conn.execute(f"DELETE FROM {tag}_kv WHERE field=?", (code,))


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
        self.fts_tokens: dict[int, int] = {}
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
        for code in self.fts_rows.keys() | self.fts_tokens.keys():
            rows, tokens = self.fts_rows.get(code, 0), self.fts_tokens.get(code, 0)
            if rows or tokens:
                conn.execute("UPDATE kb_fts SET rows=rows+?, tokens=tokens+? WHERE tag=? AND code=?",
                             (rows, tokens, tag, code))
        if self.vec_clear:
            conn.executemany(f"DELETE FROM {tag}_vec WHERE doc=?", self.vec_clear)
        if self.vec_del:
            conn.executemany(f"DELETE FROM {tag}_vec WHERE doc=? AND field=?", self.vec_del)
        if self.vec_put:
            conn.executemany(f"INSERT OR REPLACE INTO {tag}_vec VALUES (?, ?, ?, ?, ?)", self.vec_put)


def _rewrite_rows(conn: sqlite3.Connection, tag: str, rows: Sequence[tuple[int, str, Any, str, Any, str]]) -> None:
    """Store new bodies of existing rows, given as (rowid, old kb, old kind, kb, kind, body).

    SQLite rewrites the entries of every index on a column named in SET, changed or not, and the
    kb/kind indexes are ordered by the random ids, so naming kb_id and kg for a row whose kb and kind
    stay the same dirties two more random pages per row: only rows that move are given them."""
    same = [(text, rowid) for rowid, old_kb, old_kind, kb, kind, text in rows if old_kb == kb and old_kind == kind]
    moved = [(kb, kind, text, rowid) for rowid, old_kb, old_kind, kb, kind, text in rows
             if old_kb != kb or old_kind != kind]
    if same:
        conn.executemany(f"UPDATE {tag}_docs SET body=? WHERE rowid=?", same)
    if moved:
        conn.executemany(f"UPDATE {tag}_docs SET kb_id=?, kg=?, body=? WHERE rowid=?", moved)
    # a row that moved to another kb changed both
    _log_rows(conn, tag, [(kb, rowid) for rowid, _, _, kb, _, _ in rows]
              + [(old_kb, rowid) for rowid, old_kb, _, kb, _, _ in rows if old_kb != kb])


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


class SQLiteStore(DocStore):
    """See the module docstring. Safe to share between threads (a bounded pool of connections)."""

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
        # kb_gen.n is bumped by every write to (tag, kb), kb_gen.vn only by writes that touch vectors
        with self._write() as conn:
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
        # the large slices' indexes, kept on disk for the next process: under this database's own id,
        # so a store file made anew never meets the snapshots of the one it replaced
        self._index_files = None if str(path) == ":memory:" else IndexFiles.for_store(
            Path(f"{self.path}.indexes"), store_id)

    # ---------------------------------------------------------------- connections and transactions

    def _open_connection(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
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

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._pool.close()
            self._vectors.clear()
            self._masks.clear()
            self._postings.clear()
            self._df.clear()

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

    def _bump(self, conn: sqlite3.Connection, tag: str, kbs: set[str], vectors: bool) -> None:
        seq = conn.execute("UPDATE kb_seq SET n=n+1 WHERE k=0 RETURNING n").fetchone()[0]
        if seq % _LOG_PRUNE_EVERY == 0:
            _prune_log(conn, tag)
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

    def _forget(self, tag: str) -> None:
        with self._lock:
            self._tables = {t for t in self._tables if not t.startswith(tag + "_")}
            self._df = {t: v for t, v in self._df.items() if not t.startswith(tag + "_")}
            for cache in (self._vectors, self._masks, self._kinds, self._postings):
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
                if _plain_kv(name, after_value):  # the common case, quickly
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
                delta, length = bool(after) - bool(before), len(after) - len(before)
                if delta or length:
                    code = self._codes[name]
                    batch.fts_rows[code] = batch.fts_rows.get(code, 0) + delta
                    batch.fts_tokens[code] = batch.fts_tokens.get(code, 0) + length

    def _index_new(self, conn: sqlite3.Connection, batch: "_IndexWrites", rowid: int, new: Doc) -> None:
        """``_index_fields`` for a row written for the first time (no old values to compare or
        delete): most rows of an indexing run are new, and this is about twice as fast per field."""
        for name, value in new.items():
            kind = _field_kind(name)
            if not kind or value is None:
                continue
            if kind == _KV:
                code = self._code(conn, name, create=True)
                if _plain_kv(name, value):
                    batch.kv_add.append((code, value, rowid))
                else:
                    batch.kv_add.extend((code, v, rowid) for v in _kv_values(name, value))
                continue
            table = self._fts(conn, batch.tag, name, create=True)
            tokens = _tokens(value)
            if tokens:
                batch.fts_add.setdefault(table, []).append((rowid, _hex(tokens)))
                code = self._codes[name]
                batch.fts_rows[code] = batch.fts_rows.get(code, 0) + 1
                batch.fts_tokens[code] = batch.fts_tokens.get(code, 0) + len(tokens)

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
                    f"SELECT rowid, id, kb_id, kg, body FROM {tag}_docs WHERE id IN (SELECT value FROM json_each(?))",
                    (_json_array(prepared),))}
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
                        self._index_new(conn, batch, rowid, body)
                    else:
                        rowid, touched_kb, old = old_row[0], old_row[2], _loads(old_row[4])
                        touched.add(touched_kb)
                        updates.append((rowid, touched_kb, old_row[3], kb_id, body.get(_KG), text))
                        self._index_fields(conn, batch, rowid, old, body, set(old) | set(body))
                    self._set_vectors(conn, batch, rowid, body, vectors, replace_all=old_row is not None)
                conn.executemany(f"INSERT INTO {tag}_docs(rowid, id, kb_id, kg, body) VALUES (?, ?, ?, ?, ?)",
                                 inserts)
                _log_rows(conn, tag, [(row[2], row[0]) for row in inserts])
                _rewrite_rows(conn, tag, updates)
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
            old = _loads(text)
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
            updates.append((rowid, old["kb_id"], old.get(_KG), old["kb_id"], new.get(_KG), _dumps(new)))
            self._index_fields(conn, batch, rowid, old, new, set(change))
            if old.get(_KG) != new.get(_KG):
                kinds.append((new.get(_KG), rowid))
                vectors_touched = True
            if vectors:
                self._set_vectors(conn, batch, rowid, new, vectors, replace_all=False)
                vectors_touched = True
        _rewrite_rows(conn, tag, updates)
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
                (_json_array(changes), kb_id)).fetchall()
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
            deleted: list[tuple[str, int]] = []
            for rowid, text in rows:
                old = _loads(text)
                deleted.append((old["kb_id"], rowid))
                self._index_fields(conn, batch, rowid, old, {}, {n for n in old if _is_text(n)})
            batch.flush(conn)
            _log_rows(conn, tag, deleted)
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
                      if _has_kv_rows(c.field) and c.op in ("eq", "in")]
            driver = min(ranked)[1] if ranked else None
        parts = [("+" if driver is not None or by_rowid else "") + "d.kb_id IN (SELECT value FROM json_each(?))"]
        params: list[Any] = [_json_array(kbs)]
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
        listed = _json_array(values)
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

        if _is_kv(name) and not _has_kv_rows(name):
            return self._body_kv_condition(name, op, listed, values, compare)

        if _is_kv(name):
            code = self._code(conn, name) or -1
            probe = f"SELECT 1 FROM {tag}_kv k WHERE k.doc=d.rowid AND k.field=?"
            if op in ("eq", "in") and driver:
                return (f"d.rowid IN (SELECT k.doc FROM {tag}_kv k WHERE k.field=? "
                        f"AND k.value IN (SELECT value FROM json_each(?)))"), [code, listed]
            if op in ("eq", "in", "not_in"):
                neg = "NOT " if op == "not_in" else ""
                # a probe runs once per candidate row: with few values, one index seek each; with
                # many, read the row's values of the field and test them against the list (unary
                # +), since a seek per listed value would rebuild and walk the whole list per row
                member = "k.value" if len(values) <= _SEEK_VALUES else "+k.value"
                return f"{neg}EXISTS ({probe} AND {member} IN (SELECT value FROM json_each(?)))", [code, listed]
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

    @staticmethod
    def _body_kv_condition(name: str, op: str, listed: str, values: list[Any], compare: str | None
                           ) -> tuple[str, list[Any]]:
        """A kv condition on a field kept in the body only: the kv probe's test, run on the values
        its kv rows would hold (kb_kv_values), so types compare exactly as in the kv table."""
        each = "SELECT 1 FROM json_each(kb_kv_values(d.body, ?)) j"
        if op in ("eq", "in", "not_in"):
            neg = "NOT " if op == "not_in" else ""
            return f"{neg}EXISTS ({each} WHERE j.value IN (SELECT value FROM json_each(?)))", [name, listed]
        if op in ("exists", "missing"):
            return f"{'NOT ' if op == 'missing' else ''}EXISTS ({each})", [name]
        return f"EXISTS ({each} WHERE j.value {compare} ?)", [name, *values]

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
                f"AND field IN (SELECT value FROM json_each(?))", (_json_array(rowids), _json_array(codes))):
            out.setdefault(doc, {})[codes[field]] = blob
        return out

    @staticmethod
    def _bodies(conn: sqlite3.Connection, tag: str, rowids: Sequence[int]) -> dict[int, Doc]:
        """Rowid -> freshly decoded body of those rows that exist."""
        if not rowids:
            return {}
        return {r: _loads(b) for r, b in conn.execute(
            f"SELECT rowid, body FROM {tag}_docs WHERE rowid IN (SELECT value FROM json_each(?))",
            (_json_array(rowids),))}

    def _load(self, conn: sqlite3.Connection, tag: str, rowids: Sequence[int],
              fields: Sequence[str] | None, bodies: Mapping[int, Doc] | None = None) -> dict[int, Doc]:
        """Rowid -> the row projected to ``fields`` (vectors read when named), for those rows that
        exist; ``bodies`` holds rows already decoded (each is handed out once)."""
        if bodies is None:
            bodies = self._bodies(conn, tag, rowids)
        found = [r for r in rowids if r in bodies]
        vecs = self._vectors_of(conn, tag, found, fields or [])
        return {r: _project(bodies[r], fields, vecs.get(r, {})) for r in found}

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
                f"AND kb_id IN (SELECT value FROM json_each(?))", (_json_array(ids), _json_array(kbs))).fetchall()
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
        # a fresh query per batch: no transaction stays open while the caller works
        with self._read() as conn:
            tag = self._tag(conn, tenant_id)
            if tag is None:
                return
            sql, params = self._where(conn, tag, kbs, where)
            rows = conn.execute(f"SELECT d.rowid, d.id, d.body FROM {tag}_docs d WHERE {sql} "
                                f"ORDER BY d.id LIMIT ?", [*params, batch_size]).fetchall()
            docs = self._load(conn, tag, [r[0] for r in rows], fields, {r[0]: _loads(r[2]) for r in rows})
            if len(rows) == batch_size:
                # more than a batch: the rest's rows in id order, found once. Paging by "id > the
                # last one" ran the whole filter and sorted what it found once per page, a cost
                # that grows with the square of the rows (150k mentions of a 50 MB file: 37 s)
                rest = conn.execute(f"SELECT d.rowid FROM {tag}_docs d WHERE {sql} AND d.id > ? ORDER BY d.id",
                                    [*params, rows[-1][1]])
                order = np.fromiter((r[0] for r in rest), dtype=np.int64)
        for rowid, _, _ in rows:
            yield docs[rowid]
        if len(rows) < batch_size:
            return
        for start in range(0, len(order), batch_size):
            page = order[start:start + batch_size].tolist()
            with self._read() as conn:
                tag = self._tag(conn, tenant_id)
                if tag is None:
                    return
                # the conditions checked again: a row changed or deleted meanwhile is left out
                sql, params = self._where(conn, tag, kbs, where, by_rowid=True)
                bodies = {r: _loads(b) for r, b in conn.execute(
                    f"SELECT d.rowid, d.body FROM {tag}_docs d WHERE d.rowid IN (SELECT value FROM json_each(?)) "
                    f"AND {sql}", [_json_array(page), *params])}
                docs = self._load(conn, tag, [r for r in page if r in bodies], fields, bodies)
            for rowid in page:
                if rowid in docs:
                    yield docs[rowid]

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
            elif _has_kv_rows(field_name):
                query = (f"SELECT k.value, count(*) AS c FROM {tag}_kv k JOIN {tag}_docs d ON d.rowid=k.doc "
                         f"WHERE k.field=? AND {sql} GROUP BY k.value")
                params = [self._code(conn, field_name) or -1, *params]
            elif _is_kv(field_name):  # kept in the body only: each body's would-be kv values
                query = (f"SELECT j.value, count(*) AS c FROM {tag}_docs d, json_each(kb_kv_values(d.body, ?)) j "
                         f"WHERE {sql} GROUP BY j.value")
                params = [field_name, *params]
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

            # the vector half first: a filter it has to resolve (the set of rows passing it) is then
            # cached for the text half, which otherwise checks its best rows against the filter in SQL
            vec_rows, vec_scores, slices = _NO_ROWS, _NO_SCORES, []
            if req.vector is not None:
                query = self._query_vector(req.vector)
                vec_rows, vec_scores, slices = self._knn(conn, tag, kbs, req.where, req.vector.field, query,
                                                         req.candidates)
            term_rows, term_scores = _NO_ROWS, _NO_SCORES
            if req.text is not None:
                term_rows, term_scores = self._bm25(conn, tag, kbs, req.where, req.text, req.candidates)
                best = float(term_scores.max()) if len(term_scores) else 0.0
                term_scores = term_scores / best if best > 0 else np.zeros(len(term_scores))
            if req.vector is not None:
                missing = term_rows[~RowSet.of(vec_rows).holds(term_rows)]
                found = [(vec_rows, vec_scores)]
                for vectors in slices:  # text candidates the kNN did not reach, from the same slices
                    if len(missing):
                        found.append(vectors.cosines(query, missing))
                vec_rows = np.concatenate([f[0] for f in found])
                vec_scores = np.concatenate([f[1] for f in found]).astype(np.float64)
            rowids, term_scores, vector_scores, scores = _fused(term_rows, term_scores, vec_rows, vec_scores, req)
            passing = np.flatnonzero(scores >= req.threshold)
            # only rows that can reach the page need their ids (ties on the page's last score are
            # ordered by id); the kNN half can bring thousands of candidates
            reach = passing
            need = req.offset + req.limit
            if need < len(passing):
                cut = -np.partition(-scores[passing], need - 1)[need - 1] if need else np.inf
                reach = passing[scores[passing] >= cut]
            # the rows that can reach the page are usually the page itself: read their bodies (which
            # hold the ids) at once, unless ties on the last score bring many more
            bodies = self._bodies(conn, tag, rowids[reach].tolist()) if len(reach) <= 2 * need else None
            ids = {r: b["id"] for r, b in bodies.items()} if bodies is not None else \
                self._ids_of(conn, tag, rowids[reach])
            ranked = sorted((-float(scores[i]), ids[int(rowids[i])], int(rowids[i]), float(term_scores[i]),
                             float(vector_scores[i])) for i in reach.tolist())
            page = ranked[req.offset:req.offset + req.limit]
            docs = self._load(conn, tag, [s[2] for s in page], req.fields, bodies)
        hits = [Hit(id=doc_id, doc=docs[rowid], score=-neg, term_score=ts, vector_score=vs)
                for neg, doc_id, rowid, ts, vs in page]
        return SearchResult(hits=hits, total=len(passing))

    def _listing(self, conn: sqlite3.Connection, tag: str, kbs: list[str], req: SearchRequest) -> SearchResult:
        sql, params = self._where(conn, tag, kbs, req.where)
        total = conn.execute(f"SELECT count(*) FROM {tag}_docs d WHERE {sql}", params).fetchone()[0] \
            if req.count_total else None
        if len(req.order_by) == 1 and _is_num(req.order_by[0][0]) and req.order_by[0][1] in ("asc", "desc"):
            rows = self._numeric_order(conn, tag, kbs, req, sql, params)
        else:
            rows = self._json_order(conn, tag, sql, params, req)
        docs = self._load(conn, tag, [r[0] for r in rows], req.fields)
        return SearchResult(hits=[Hit(id=doc_id, doc=docs[rowid], score=0.0) for rowid, doc_id in rows],
                            total=int(total) if total is not None else req.offset + len(rows))

    def _numeric_order(self, conn: sqlite3.Connection, tag: str, kbs: list[str], req: SearchRequest,
                       filter_sql: str, filter_params: list[Any]) -> list[tuple[int, str]]:
        """A page of rows ordered by one numeric field, without sorting every matching row by a
        value parsed out of its JSON: few matching rows are sorted by their indexed values; many
        are read by walking the field's (value, doc) index from the right end, stopping once the
        page and every row tied with its last value are in."""
        name, direction = req.order_by[0]
        need = req.offset + req.limit
        code = self._code(conn, name)
        found: dict[int, tuple[Any, str]] = {}
        indexed = _has_kv_rows(name)  # a field kept in the body only has no index to walk: always sorted here
        few = conn.execute(f"SELECT d.rowid, d.id FROM {tag}_docs d WHERE {filter_sql} LIMIT ?",
                           [*filter_params, _SORT_IN_MEMORY + 1 if indexed else -1]).fetchall()
        if len(few) <= _SORT_IN_MEMORY or not indexed:
            pick = max if direction == "desc" else min  # a list sorts by its max descending, min ascending, as ES
            values = self._sort_values(conn, tag, name, code, [r[0] for r in few])
            found = {rowid: (pick(values[rowid]), doc_id) for rowid, doc_id in few if rowid in values}
            missing = sorted((doc_id, rowid) for rowid, doc_id in few if rowid not in values)
            sign = -1 if direction == "desc" else 1
            ordered = sorted(found.items(), key=lambda item: (sign * item[1][0], item[1][1]))
            rows = [(rowid, doc_id) for rowid, (_, doc_id) in ordered] + [(r, i) for i, r in missing]
            return rows[req.offset:need]
        sql, params = self._where(conn, tag, kbs, req.where, by_rowid=True)
        if code is not None and need > 0:
            walk = conn.execute(
                f"SELECT d.rowid, d.id, k.value FROM {tag}_kv k CROSS JOIN {tag}_docs d ON d.rowid=k.doc "
                f"WHERE k.field=? AND {sql} ORDER BY k.value {direction.upper()}", [code, *params])
            boundary: Any = None
            for rowid, doc_id, value in walk:
                if len(found) >= need and value != boundary:
                    break
                if rowid not in found:  # a list keeps its first value met: max when descending, as ES
                    found[rowid] = (value, doc_id)
                    boundary = value
        sign = -1 if direction == "desc" else 1
        ordered = sorted(found.items(), key=lambda item: (sign * item[1][0], item[1][1]))
        rows = [(rowid, doc_id) for rowid, (_, doc_id) in ordered]
        if len(rows) < need:  # rows without the field come last, in id order
            rows += conn.execute(
                f"SELECT d.rowid, d.id FROM {tag}_docs d WHERE {sql} AND NOT EXISTS "
                f"(SELECT 1 FROM {tag}_kv k WHERE k.doc=d.rowid AND k.field=?) ORDER BY d.id LIMIT ?",
                [*params, code if code is not None else -1, need - len(rows)]).fetchall()
        return rows[req.offset:need]

    @staticmethod
    def _sort_values(conn: sqlite3.Connection, tag: str, name: str, code: int | None,
                     rowids: Sequence[int]) -> dict[int, list[Any]]:
        """Rowid -> the kv values of a numeric field (from the kv table, or the bodies)."""
        values: dict[int, list[Any]] = {}
        if _has_kv_rows(name):
            for rowid, value in conn.execute(
                    f"SELECT doc, value FROM {tag}_kv WHERE field=? AND doc IN (SELECT value FROM json_each(?))",
                    (code if code is not None else -1, _json_array(rowids))):
                values.setdefault(rowid, []).append(value)
            return values
        for rowid, held in conn.execute(
                f"SELECT rowid, kb_kv_values(body, ?) FROM {tag}_docs WHERE rowid IN (SELECT value FROM json_each(?))",
                (name, _json_array(rowids))):
            if held != "[]":
                values[rowid] = json.loads(held)
        return values

    def _json_order(self, conn: sqlite3.Connection, tag: str, sql: str, params: list[Any],
                    req: SearchRequest) -> list[tuple[int, str]]:
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
        return conn.execute(f"SELECT d.rowid, d.id FROM {tag}_docs d WHERE {sql} ORDER BY {', '.join(order)} "
                            f"LIMIT ? OFFSET ?", [*params, *order_params, req.limit, req.offset]).fetchall()

    def _bm25(self, conn: sqlite3.Connection, tag: str, kbs: list[str], where: Sequence[Condition],
              text: TextQuery, candidates: int) -> tuple[np.ndarray, np.ndarray]:
        """The top text candidates as (rowids, boosted Lucene BM25 summed over fields), unordered."""
        tokens = list(dict.fromkeys(t for tok in text.tokens for t in str(tok).split()))
        if not tokens:
            return _NO_ROWS, _NO_SCORES
        kinds = _kinds_of(where)
        found_rows: list[np.ndarray] = []
        found_scores: list[np.ndarray] = []
        found_tokens: list[np.ndarray] = []
        need = max(1, math.floor(text.minimum_should_match * len(tokens) + 1e-9))  # tokens a row must hold
        for name, boost in text.fields.items():
            _check_name(name)
            table = self._fts(conn, tag, name) if boost > 0 else None
            if table is None:
                continue
            # collection statistics are the whole field's (tenant-wide), as in Elasticsearch
            rows, total = conn.execute("SELECT rows, tokens FROM kb_fts WHERE tag=? AND code=?",
                                       (tag, self._codes[name])).fetchone()
            average = total / rows if rows else 0.0
            slices = [self._slice_postings(conn, tag, kb, name, kind)
                      for kb in kbs for kind in (kinds if kinds is not None else [_ANY_KIND])]
            frequencies = self._doc_frequencies(conn, tag, table, tokens)
            for number, token in enumerate(tokens):
                df = frequencies.get(token, 0)
                if not df:
                    continue
                idf = math.log(1.0 + (rows - df + 0.5) / (df + 0.5))
                for postings in slices:
                    term_rows, term_scores = postings.scores(token, idf, average)
                    if len(term_rows):
                        found_rows.append(term_rows)
                        found_scores.append(boost * term_scores)
                        if need > 1:
                            found_tokens.append(np.full(len(term_rows), number, dtype=np.int64))
        if not found_rows:
            return _NO_ROWS, _NO_SCORES
        rowids, where_in = _distinct(np.concatenate(found_rows))
        scores = np.bincount(where_in, weights=np.concatenate(found_scores), minlength=len(rowids))
        if need > 1:  # else every row found holds at least one of the tokens
            pairs = np.unique(where_in * len(tokens) + np.concatenate(found_tokens))
            keep = np.bincount(pairs // len(tokens), minlength=len(rowids)) >= need
            rowids, scores = rowids[keep], scores[keep]
        if not len(rowids):
            return _NO_ROWS, _NO_SCORES
        # the postings slices hold only the KBs' rows of the wanted kinds; any other condition is
        # checked on the best-scored rows first (enough when the filter keeps most rows), and
        # against the set of rows passing it when too few of those passed (a selective filter)
        if any(c.field != _KG for c in where):
            gens = {kb: self._gen(conn, tag, kb)[0] for kb in kbs}
            cached = [self._allowed(conn, tag, kb, where, gen, only_cached=True) for kb, gen in gens.items()]
            if all(allowed is not None for allowed in cached):  # e.g. left by the kNN half of a hybrid search
                passed = _union(cached)
            else:
                sql, params = self._where(conn, tag, kbs, where, by_rowid=True)
                first = np.argpartition(-scores, min(len(scores), 4 * candidates) - 1)[:4 * candidates]
                passed = RowSet.of(self._filter_rowids(conn, tag, sql, params, rowids[first]))
                if len(passed) < candidates and len(scores) > len(first):
                    passed = _union([self._allowed(conn, tag, kb, where, gen) for kb, gen in gens.items()])
            keep = passed.holds(rowids)
            rowids, scores = rowids[keep], scores[keep]
        if len(rowids) > candidates:
            keep = _best_first_written(rowids, scores, candidates)
            rowids, scores = rowids[keep], scores[keep]
        return rowids, scores

    @staticmethod
    def _ids_of(conn: sqlite3.Connection, tag: str, rowids: np.ndarray) -> dict[int, str]:
        if not len(rowids):
            return {}
        return dict(conn.execute(f"SELECT rowid, id FROM {tag}_docs WHERE rowid IN (SELECT value FROM json_each(?))",
                                 (_json_array(rowids.tolist()),)).fetchall())

    def _doc_frequencies(self, conn: sqlite3.Connection, tag: str, table: str, tokens: Sequence[str]) -> dict[str, int]:
        """Token -> number of rows holding it in one FTS table. fts5vocab counts a common token by
        reading its whole doclist (about a millisecond per 10k rows), so counts are cached until the
        tenant is next written to."""
        generation = conn.execute("SELECT max(n) FROM kb_gen WHERE tag=?", (tag,)).fetchone()[0]
        with self._lock:
            cached = self._df.get(table)
            if cached is None or cached[0] != generation:
                cached = self._df[table] = (generation, {})
        known = cached[1]
        for token in tokens:
            if token not in known:
                row = conn.execute(f"SELECT doc FROM {table}_vocab WHERE term=?", (token.encode("utf-8").hex(),)).fetchone()
                known[token] = row[0] if row else 0
        return known

    def _changed_since(self, conn: sqlite3.Connection, tag: str, kb: str, generation: int) -> np.ndarray | None:
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

    def _field_tokens(self, conn: sqlite3.Connection, tag: str, kb: str, name: str, kind: Any,
                      rowids: np.ndarray | None = None) -> Iterator[tuple[int, list[str]]]:
        """(rowid, tokens) of one text field for the KB's rows of ``kind`` (or only ``rowids``)."""
        sql = f"SELECT rowid, json_type(body, ?), json_extract(body, ?) FROM {tag}_docs WHERE kb_id=?"
        params: list[Any] = [_path(name), _path(name), kb]
        if kind is not _ANY_KIND:
            sql += " AND kg IS ?"
            params.append(kind)
        if rowids is not None:
            sql += " AND rowid IN (SELECT value FROM json_each(?))"
            params.append(_json_array(rowids.tolist()))
        for rowid, kind_of_value, value in conn.execute(sql, params):
            if kind_of_value == "array":
                value = json.loads(value)
            yield rowid, _tokens(value)

    def _slice_postings(self, conn: sqlite3.Connection, tag: str, kb: str, name: str, kind: Any) -> FieldPostings:
        """Postings of a text field over the KB's rows of one kind, kept current from the change log."""

        def update(old: FieldPostings, changed: np.ndarray) -> FieldPostings | None:
            postings = old.updated(changed, self._field_tokens(conn, tag, kb, name, kind, changed))
            return None if postings.stale else postings

        return self._kept_current(
            self._postings, (tag, kb, self._codes[name], kind), conn, tag, kb, self._gen(conn, tag, kb)[0],
            lambda: FieldPostings(self._field_tokens(conn, tag, kb, name, kind)), update, _POSTINGS_CACHE_BYTES,
            FieldPostings)

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
        if cached is None and self._index_files is not None:
            cached = self._index_files.load(key, kind, generation)
        if cached is not None and cached[0] == generation:
            index = cached[1]
        else:
            index = None
            if cached is not None:
                changed = self._changed_since(conn, tag, kb, cached[0])
                if changed is not None:
                    index = update(cached[1], changed)
            if index is None:
                index = build()
                if self._index_files is not None and index.rows >= PERSIST_MIN_ROWS and self._outside_writes():
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

    def _outside_writes(self) -> bool:
        """Whether this thread reads committed rows only (not inside a write or batch() of its own),
        so a snapshot built now names a generation no rollback can take back."""
        return not getattr(self._batch, "depth", 0) and getattr(self._held, "depth", 0) <= 1

    @staticmethod
    def _filter_rowids(conn: sqlite3.Connection, tag: str, sql: str, params: list[Any],
                       rowids: np.ndarray) -> np.ndarray:
        return np.fromiter((r[0] for r in conn.execute(
            f"SELECT d.rowid FROM {tag}_docs d WHERE d.rowid IN (SELECT value FROM json_each(?)) AND {sql}",
            [_json_array(rowids.tolist()), *params])), dtype=np.int64)

    @staticmethod
    def _query_vector(vq: VectorQuery) -> np.ndarray:
        m = _VEC.match(vq.field)
        if not m:
            raise StoreError(f"vector field {vq.field!r} is not named q_<dim>_vec")
        arr = np.asarray(vq.vector, dtype=np.float32)
        if arr.ndim != 1 or arr.shape[0] != int(m.group(1)):
            raise StoreError(f"query vector for {vq.field} needs {m.group(1)} numbers, got shape {arr.shape}")
        return _unit(arr)

    def _knn(self, conn: sqlite3.Connection, tag: str, kbs: list[str], where: Sequence[Condition], name: str,
             query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, list[VectorSlice]]:
        """The ``k`` nearest allowed rows (rowids, cosines; in no particular order) and the vector
        slices searched."""
        code = self._code(conn, name)
        if code is None:
            return _NO_ROWS, _NO_SCORES, []
        # the kind conditions choose cache partitions; any other condition narrows to allowed rows
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
        found: list[tuple[np.ndarray, np.ndarray]] = []
        slices: list[VectorSlice] = []
        for kb in kbs:
            gen, vgen = self._gen(conn, tag, kb)
            allowed = self._allowed(conn, tag, kb, where, gen) if masked else None
            for kind in self._partitions(conn, tag, kb, code, vgen, kinds):
                vectors = self._vector_slice(conn, tag, kb, code, kind, vgen)
                slices.append(vectors)
                found.append(vectors.search(query, k) if allowed is None else vectors.search_within(query, allowed, k))
        found = [f for f in found if len(f[0])]
        if not found:
            return _NO_ROWS, _NO_SCORES, slices
        rows, sims = np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found])
        if len(rows) > k:  # ties at the cut go to the lowest rowids
            near = largest(sims, k)
            order = near[np.lexsort((rows[near], -sims[near]))[:k]]
            rows, sims = rows[order], sims[order]
        return rows.astype(np.int64), sims, slices

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

    def _slice_vectors(self, conn: sqlite3.Connection, tag: str, kb: str, code: int, kind: str | None,
                       rowids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, unit matrix) of one vector field over the KB's rows of ``kind`` (or only ``rowids``)."""
        sql = f"SELECT doc, v FROM {tag}_vec WHERE field=? AND kb_id=? AND kg IS ?"
        params: list[Any] = [code, kb, kind]
        if rowids is not None:
            sql += " AND doc IN (SELECT value FROM json_each(?))"
            params.append(_json_array(rowids.tolist()))
        rows = conn.execute(sql + " ORDER BY doc", params).fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        if not rows:
            return ids, np.zeros((0, 0), dtype=np.float32)
        return ids, _unit(np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1))

    def _vector_slice(self, conn: sqlite3.Connection, tag: str, kb: str, code: int, kind: str | None,
                      vgen: int) -> VectorSlice:
        """The KB's vectors of one field and kind, kept current from the change log."""
        return self._kept_current(
            self._vectors, (tag, kb, code, kind), conn, tag, kb, vgen,
            lambda: VectorSlice(*self._slice_vectors(conn, tag, kb, code, kind)),
            lambda old, changed: old.updated(changed, *self._slice_vectors(conn, tag, kb, code, kind, changed)),
            _VECTOR_CACHE_BYTES, VectorSlice)

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


__all__ = ["SQLiteStore"]
