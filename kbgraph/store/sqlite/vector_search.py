"""kNN over a vector field: cosines against ``vector_index.VectorSlice`` per KB, field and kind.

The kind conditions choose which slices are searched; any other condition narrows the search to
the rows passing it (a cached ``RowSet``). Vectors are stored and compared as unit vectors.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from kbgraph.store.base import Condition, StoreError, VectorQuery
from kbgraph.store.sqlite.change_log import _gen
from kbgraph.store.sqlite.fields import _KG, _NO_ROWS, _NO_SCORES, _VEC, _json_array, _kw
from kbgraph.store.sqlite.slice_cache import _VECTOR_CACHE_BYTES
from kbgraph.store.sqlite.vector_index import VectorSlice
from kbgraph.utils.top_k import largest


def _unit(arr: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    return np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0)


class VectorSearch:
    """Mixed into SQLiteStore: the vector half of ``search``."""

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
            gen, vgen = _gen(conn, tag, kb)
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

    def vector_cosines(self, tenant_id: str, kb_ids: Sequence[str], ids: Sequence[str], field_name: str,
                       unit_vector: Sequence[float]) -> dict[str, float]:
        """``DocStore.vector_cosines`` from the in-memory vector slices the searches keep (no row
        body or stored vector is read: a graph query's chains ask for a few hundred rows)."""
        if not ids:
            return {}
        query = np.asarray(unit_vector, dtype=np.float32)
        with self._read() as conn:
            tag = self._tag(conn, tenant_id)
            code = self._code(conn, field_name) if tag is not None else None
            m = _VEC.match(field_name)
            if tag is None or code is None or not m or int(m.group(1)) != len(query):
                return {}
            # the named rows by the id index first: the knowledge base's rows are many, the named few
            rowids = [r[0] for r in conn.execute(
                f"SELECT rowid FROM {tag}_docs WHERE id IN (SELECT value FROM json_each(?))", (_json_array(list(ids)),))]
            sql, params = self._where(conn, tag, list(dict.fromkeys(kb_ids)),
                                      [Condition("available_int", "not_in", [0])], by_rowid=True)
            groups: dict[tuple[str, str | None], list[tuple[int, str]]] = {}
            for rowid, doc_id, kb, kind in conn.execute(
                    f"SELECT d.rowid, d.id, d.kb_id, d.kg FROM {tag}_docs d "
                    f"WHERE d.rowid IN (SELECT value FROM json_each(?)) AND {sql}", [_json_array(rowids), *params]):
                groups.setdefault((kb, kind), []).append((rowid, doc_id))
            found: dict[str, float] = {}
            for (kb, kind), rows in groups.items():
                _, vgen = _gen(conn, tag, kb)
                vectors = self._vector_slice(conn, tag, kb, code, kind, vgen)
                rowids = np.array(sorted(r for r, _ in rows), dtype=np.int64)
                held, sims = vectors.cosines(query, rowids)
                by_rowid = dict(zip(held.tolist(), sims.tolist()))
                found.update({doc_id: by_rowid[r] for r, doc_id in rows if r in by_rowid})
        return {doc_id: found[doc_id] for doc_id in dict.fromkeys(ids) if doc_id in found}

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
