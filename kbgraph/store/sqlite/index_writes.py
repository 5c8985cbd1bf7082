"""The index rows a write changes: kv values, FTS tokens and vectors, queued and applied in bulk.

Text tokens are written to FTS5 hex-encoded (see the package docstring); a contentless FTS5 table
deletes a row by replaying the tokens that were inserted, so an update queues the old tokens'
deletion and the new ones' insertion. Everything a write queues goes to SQLite in one
``executemany`` per table and kind of statement (``_IndexWrites.flush``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from kbgraph.store.base import Doc
from kbgraph.store.sqlite.change_log import _log_rows
from kbgraph.store.sqlite.fields import _KG, _KV, _field_kind, _hex, _kv_values, _plain_kv, _same, _tokens


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


class FieldIndexing:
    """Mixed into SQLiteStore: queue the index rows of a document's fields into an ``_IndexWrites``."""

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
