"""The DocStore writes of the embedded store: upsert, patch, update and delete.

Each runs in one write transaction: it reads the rows it replaces, queues their index changes
(index_writes.py), writes the bodies, logs the rows it touched and bumps the KBs' generations
(change_log.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from kbgraph.store.base import Condition, Doc, StoreError
from kbgraph.store.sqlite.change_log import _bump, _log_rows
from kbgraph.store.sqlite.fields import _KG, _dumps, _is_text, _is_vec, _json_array, _kbs, _loads, _vec_blob
from kbgraph.store.sqlite.index_writes import _IndexWrites, _rewrite_rows


class Writes:
    """Mixed into SQLiteStore: the write operations of the DocStore contract."""

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
                _bump(conn, tag, touched, vectors=True)
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
                _bump(conn, tag, {kb_id}, vec)
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
                _bump(conn, tag, set(kbs), vec)
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
                _bump(conn, tag, set(kbs), vectors=True)
            return len(rows)
