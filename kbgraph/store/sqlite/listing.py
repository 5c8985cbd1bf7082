"""Searches with neither text nor vector: a filtered page in field order, then id.

A page ordered by one numeric field avoids sorting every matching row by a value parsed out of
its JSON (``_numeric_order``); any other order sorts in SQL on the JSON values (``_json_order``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from kbgraph.store.base import Hit, SearchRequest, SearchResult, StoreError
from kbgraph.store.sqlite.fields import _COLUMNS, _check_name, _has_kv_rows, _is_num, _json_array, _path

# a listing ordered by a numeric field sorts up to this many matching rows in memory (else walks the index)
_SORT_IN_MEMORY = 5000


class Listing:
    """Mixed into SQLiteStore: the listing half of ``search``."""

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
