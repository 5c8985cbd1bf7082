"""BM25 over the text fields: Lucene's formula from FTS5 statistics and in-memory postings.

FTS5 gives each field's row count, token count and document frequencies (tenant-wide, as in
Elasticsearch); per-row term frequencies and lengths come from ``text_index.FieldPostings``, one
per KB, field and kind, kept current by the slice caches.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from kbgraph.store.base import Condition, TextQuery
from kbgraph.store.sqlite.change_log import _gen
from kbgraph.store.sqlite.fields import _KG, _NO_ROWS, _NO_SCORES, _check_name, _json_array, _path, _tokens
from kbgraph.store.sqlite.filters import _kinds_of
from kbgraph.store.sqlite.row_set import RowSet
from kbgraph.store.sqlite.slice_cache import _POSTINGS_CACHE_BYTES
from kbgraph.store.sqlite.text_index import FieldPostings
from kbgraph.utils.top_k import largest

_ANY_KIND = ("any kind",)  # a postings slice over all of a KB's rows, whatever their kind


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


class TermSearch:
    """Mixed into SQLiteStore: the text half of ``search``."""

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
            slices = [self._slice_postings(conn, tag, kb, name, kind)
                      for kb in kbs for kind in (kinds if kinds is not None else [_ANY_KIND])]
            if all(postings.empty for postings in slices):
                continue  # e.g. graph rows and the chunks' field, which older graph rows held
            # collection statistics are the whole field's (tenant-wide), as in Elasticsearch
            rows, total = conn.execute("SELECT rows, tokens FROM kb_fts WHERE tag=? AND code=?",
                                       (tag, self._codes[name])).fetchone()
            average = total / rows if rows else 0.0
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
        # checked by _passing
        if any(c.field != _KG for c in where):
            rowids, scores = self._passing(conn, tag, kbs, where, rowids, scores, candidates)
        if len(rowids) > candidates:
            keep = _best_first_written(rowids, scores, candidates)
            rowids, scores = rowids[keep], scores[keep]
        return rowids, scores

    def _passing(self, conn: sqlite3.Connection, tag: str, kbs: list[str], where: Sequence[Condition],
                 rowids: np.ndarray, scores: np.ndarray, candidates: int) -> tuple[np.ndarray, np.ndarray]:
        """The scored rows that pass every condition: checked on the best-scored rows first (enough
        when the filter keeps most rows), and against the set of rows passing it when too few of
        those passed (a selective filter)."""
        gens = {kb: _gen(conn, tag, kb)[0] for kb in kbs}
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
        return rowids[keep], scores[keep]

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
            self._postings, (tag, kb, self._codes[name], kind), conn, tag, kb, _gen(conn, tag, kb)[0],
            lambda: FieldPostings(self._field_tokens(conn, tag, kb, name, kind)), update, _POSTINGS_CACHE_BYTES,
            FieldPostings)

    @staticmethod
    def _filter_rowids(conn: sqlite3.Connection, tag: str, sql: str, params: list[Any],
                       rowids: np.ndarray) -> np.ndarray:
        return np.fromiter((r[0] for r in conn.execute(
            f"SELECT d.rowid FROM {tag}_docs d WHERE d.rowid IN (SELECT value FROM json_each(?)) AND {sql}",
            [_json_array(rowids.tolist()), *params])), dtype=np.int64)
