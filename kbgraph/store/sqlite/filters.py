"""Conditions compiled to SQL over the documents table (alias ``d``).

Columns (id, kb, kind) are compared directly, keyword and numeric fields through the kv table
(or, for fields kept in the body only, through the values their kv rows would hold), vector fields
by the presence of a vector row, any other field in the JSON body. SQLite's planner has no
statistics here, so the compiler chooses the loop driver itself (see ``_where``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from kbgraph.store.base import Condition, StoreError
from kbgraph.store.sqlite.fields import (
    _COLUMNS, _KG, _check_name, _cond_value, _has_kv_rows, _is_kv, _is_num, _is_vec, _json_array, _kw, _path,
)

# a kv filter probe with at most this many values seeks each of them; with more it scans the row's values
_SEEK_VALUES = 4


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


class Filters:
    """Mixed into SQLiteStore: ``_where`` and the SQL of each condition."""

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
            return self._column_condition(_COLUMNS[name], op, listed, values, compare)

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
    def _column_condition(col: str, op: str, listed: str, values: list[Any], compare: str | None
                          ) -> tuple[str, list[Any]]:
        """A condition on a column of the documents table (id, kb, kind)."""
        if op in ("eq", "in"):
            return f"{col} IN (SELECT value FROM json_each(?))", [listed]
        if op == "not_in":
            return f"({col} IS NULL OR {col} NOT IN (SELECT value FROM json_each(?)))", [listed]
        if op in ("exists", "missing"):
            return f"{col} IS {'NOT ' if op == 'exists' else ''}NULL", []
        return f"{col} {compare} ?", values

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
