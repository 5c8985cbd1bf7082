"""Reads of the embedded store: get, count, scan, aggregate, and rows loaded by rowid.

Rows come back projected to the fields asked for; vectors are read from the vector table only
when named.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from kbgraph.store.base import Condition, Doc
from kbgraph.store.sqlite.fields import (
    _COLUMNS, _check_name, _has_kv_rows, _is_kv, _is_vec, _json_array, _kbs, _loads, _path,
)


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


class Reads:
    """Mixed into SQLiteStore: the read operations of the DocStore contract, and row loading."""

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

    @staticmethod
    def _ids_of(conn: sqlite3.Connection, tag: str, rowids: np.ndarray) -> dict[int, str]:
        if not len(rowids):
            return {}
        return dict(conn.execute(f"SELECT rowid, id FROM {tag}_docs WHERE rowid IN (SELECT value FROM json_each(?))",
                                 (_json_array(rowids.tolist()),)).fetchall())
