"""``search``: the vector half, then the text half, fused into one ranked page.

The fusion is ``base.fuse``'s (the same float operations, array-wise in ``_fused``), so a hybrid
search ranks exactly as on Elasticsearch; a search with neither half is a listing (listing.py).
"""

from __future__ import annotations

import numpy as np

from kbgraph.store.base import Hit, SearchRequest, SearchResult, StoreError, fuse_all, rescale_cosines, with_key_lists
from kbgraph.store.sqlite.fields import _NO_ROWS, _NO_SCORES, _check_name, _kbs
from kbgraph.store.sqlite.row_set import RowSet
from kbgraph.utils.id_sets import union_ids


def _fused(term_rows: np.ndarray, term: np.ndarray, vec_rows: np.ndarray, vec: np.ndarray,
           req: SearchRequest) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rowids, term scores, vector scores clipped to [0, 1], fused scores) of every candidate, as
    base.fuse computes them (``base.fuse_all``, the same float operations array-wise). Each side's rowids are unique."""
    rowids = union_ids(term_rows, vec_rows)
    term_scores = np.zeros(len(rowids))
    vector_scores = np.zeros(len(rowids))
    term_scores[np.searchsorted(rowids, term_rows)] = term
    if len(vec_rows):
        vector_scores[np.searchsorted(rowids, vec_rows)] = vec
        vector_scores = rescale_cosines(vector_scores, req.vector.floor if req.vector is not None else 0.0)
    scores = fuse_all(term_scores, vector_scores, req.vector_weight, req.text is not None, req.vector is not None)
    return rowids, term_scores, vector_scores, scores


class HybridSearch:
    """Mixed into SQLiteStore: ``search`` of the DocStore contract."""

    def search(self, tenant_id: str, request: SearchRequest) -> SearchResult:
        return with_key_lists(self._search(tenant_id, request), request)

    def _search(self, tenant_id: str, request: SearchRequest) -> SearchResult:
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
