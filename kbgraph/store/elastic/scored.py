"""Scored searches (text, vector or both) of one batch, in two round trips whatever the batch holds:

1. one ``_msearch`` with the text half and the kNN half of every request, ids and scores only;
2. one ``_msearch`` with, per request, the cosines of the text hits its kNN window missed (a kNN
   request filtered to exactly their ids, so every candidate with a vector gets its cosine, as on
   the embedded store) and the rows, with the fields the request names, of every candidate that can
   reach its page (``likely_page``);
3. fusion in Python (``hits.fused_page``); only when a row of a page was not read with 2 (a missed
   text hit whose cosine beat the lowest of its kNN window, which an approximate kNN search can
   leave out, or a row written since), one realtime ``mget`` of those rows.

Fusion needs only ids and scores, and only the page needs its rows: a chunk search looks at 1,024
text and 1,024 vector candidates, whose texts as JSON were most of its time (MuSiQue passages: 89 ms
a naive query when both halves returned their sources, see bench/README.md). Before its missed
cosines are known, a candidate's fused score lies between its text part alone and what it would get
with the lowest cosine of the window: the candidates whose best can reach the page's last sure place
are the ones read. A graph query makes its scored searches in steps that follow each other (seeds,
then their relations): each step's rows going with its cosines took a round trip off each of them
(bench/README.md, issue 40). The results are the same as searching one request at a time.

A page far smaller than its windows (naive's 8 chunks of 1,024 text and 1,024 vector candidates)
is first searched in narrow windows (``narrow_window``), when its caller needs no count of every
match (``count_total=False``): the node's work and the answers' size follow the hits a window
returns, not the candidates it looks at. A narrow window is the first hits of the full one (the
kNN half keeps the full one's ``num_candidates``), and its page is the full windows' whenever no
candidate it leaves out could reach it (``window_decides``); else the request is searched again in
full windows.

A search whose fields are keys (``SearchRequest.key_fields``: keywords and numbers, single-valued
but for the lists named in ``list_fields``) reads them from their doc values with each hit's id in
round trip 1, and reads no row at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import heapq
from dataclasses import dataclass, field
from typing import Any

from kbgraph.store.base import Hit, SearchRequest, SearchResult, StoreError, fuse
from kbgraph.store.elastic.cluster import Cluster
from kbgraph.store.elastic.hits import Candidate, absent_vector_score, fused_page, fused_scores, score_parts, shape_doc
from kbgraph.store.elastic.indices import VECTOR_RE
from kbgraph.store.elastic.queries import (
    MAX_NUM_CANDIDATES, MAX_RESULT_WINDOW, build_filter, hit_id, key_row, knn_search, mget_fields, msearch_lines,
    similarity_search, text_search,
)


@dataclass
class _Scored:
    """One request of the batch: what it sends and the candidates that came back."""

    request: SearchRequest
    filter: dict[str, Any]
    text: dict[str, Any] | None
    knn: dict[str, Any] | None
    window: int  # hits each half asks for: ``request.candidates``, or fewer (``narrow_window``)
    keys: list[str]  # fields read from doc values with each hit (``key_fields``), else none
    text_hits: list[Candidate] = field(default_factory=list)
    vector_hits: list[Candidate] = field(default_factory=list)  # the kNN window's, then missed cosines
    window_vectors: int = 0  # how many of vector_hits the kNN window returned
    asked_rows: set[str] = field(default_factory=set)  # ids whose rows came with round trip 2 (1: keys)
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> source, of those found


def check_request(request: SearchRequest) -> None:
    """Refuse what Elasticsearch cannot answer, before anything of the batch is sent."""
    if request.candidates > MAX_RESULT_WINDOW:
        raise StoreError(f"candidates={request.candidates} exceeds Elasticsearch's window of {MAX_RESULT_WINDOW}")
    vector = request.vector
    if vector is not None:
        dims = VECTOR_RE.match(vector.field)
        if dims and vector.vector is not None and len(vector.vector) != int(dims.group(1)):
            raise StoreError(f"query vector for {vector.field} holds {len(vector.vector)} numbers, not {dims.group(1)}")


# a narrowed window holds this many hits per place of its page, and at least MIN_WINDOW: on the
# 1,890 MuSiQue passages, 64 windows decided naive's page of 8 for 100 questions of 100 (32: 99),
# and 128 a graph query's chunk page of 32 in 83 (its 256 are searched whole)
WINDOW_PER_PLACE = 8
MIN_WINDOW = 64


def narrow_window(request: SearchRequest) -> int:
    """The hits each half of a search asks for first: its candidates, or fewer for a small page
    whose caller counts no matches beyond it."""
    if request.count_total:
        return request.candidates
    return min(request.candidates, max(MIN_WINDOW, WINDOW_PER_PLACE * (request.offset + request.limit)))


def key_fields(request: SearchRequest) -> list[str]:
    """The fields a search reads from doc values with its hits (``kb_id`` among them, which a page's
    rows are checked against): those it names, when they are keys."""
    if not request.key_fields or request.fields is None:
        return []
    return list(dict.fromkeys(["kb_id", *(name for name in request.fields if name != "id")]))


def _plan(request: SearchRequest, vector_mapped: Callable[[str], bool], window: int) -> _Scored:
    query = build_filter(request.kb_ids, request.where)
    keys = key_fields(request)
    text = text_search(query, request.text, window, keys) if request.text is not None else None
    vector, knn = request.vector, None
    # a zero or empty vector has no cosine, and an unmapped field no neighbours: no kNN half
    if vector is not None and vector.vector is not None and len(vector.vector) \
            and any(float(x) != 0.0 for x in vector.vector) and vector_mapped(vector.field):
        knn = knn_search(vector.field, vector.vector, window, query, pool=request.candidates, keys=keys)
    return _Scored(request, query, text, knn, window, keys)


# what an ids-only search's answer needs to hold (Elasticsearch leaves out the rest, e.g. each hit's
# index name: a third of a 1,024-hit answer)
HIT_PATHS = ["responses.hits.hits._score", "responses.hits.hits.fields"]


def _hits(answer: Any | None) -> list[Candidate]:
    """The hits of an ids-only search (queries.IDS_ONLY) as fusion reads them: (id, ``_score``) (an
    answer without hits holds no ``hits`` once filtered by HIT_PATHS)."""
    if answer is None:
        return []
    return [(hit_id(h), h.get("_score")) for h in (answer.get("hits") or {}).get("hits", [])]


def _key_rows(answer: Any | None, lists: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Id -> the fields an ids-only search read from doc values with it (keys: one value each, all
    of them for the list fields)."""
    rows = (key_row(hit, lists) for hit in ((answer or {}).get("hits") or {}).get("hits", []))
    return {row["id"]: row for row in rows}


def _candidates(cluster: Cluster, index: str, plans: Sequence[_Scored]) -> None:
    """Round trip 1: every text and kNN half of the batch."""
    sent: list[tuple[_Scored, str]] = []
    searches: list[dict[str, Any]] = []
    for plan in plans:
        for half, kwargs in (("text", plan.text), ("knn", plan.knn)):
            if kwargs is not None:
                sent.append((plan, half))
                searches.append(kwargs)
    if not searches:
        return
    for (plan, half), answer in zip(sent, cluster.msearch("search", index, msearch_lines(index, searches),
                                                          filter_path=HIT_PATHS)):
        if half == "text":
            plan.text_hits = _hits(answer)
        else:
            plan.vector_hits = _hits(answer)
            plan.window_vectors = len(plan.vector_hits)
        if plan.keys:  # every candidate's row is its keys, read with it
            plan.rows.update(_key_rows(answer, plan.request.list_fields))
    for plan in plans:
        if plan.keys:
            plan.asked_rows = set(plan.rows)


def _missed(plan: _Scored) -> list[str]:
    """The text hits its kNN window missed, whose cosines round trip 2 asks (none without a kNN half:
    their vector score is 0)."""
    if plan.knn is None or plan.request.vector is None:
        return []
    seen = {doc_id for doc_id, _ in plan.vector_hits}
    return [doc_id for doc_id, _ in plan.text_hits if doc_id not in seen]


def likely_page(plan: _Scored, missed: Sequence[str]) -> list[str]:
    """The candidates that can reach the request's page before the ``missed`` cosines are known: a
    missed candidate's fused score lies between its score with a cosine of 0 and its score with the
    lowest cosine of its kNN window (none nearer was missed, as an exact search would have it), every
    other candidate's is known. Those whose highest score reaches the ``offset + limit``-th lowest."""
    request = plan.request
    place = request.offset + request.limit
    if place <= 0:
        return []
    has_text, has_vector, weight = request.text is not None, request.vector is not None, request.vector_weight
    term, vector = score_parts(plan.text_hits, plan.vector_hits, request)
    absent = absent_vector_score(request)
    lows = fused_scores(term, vector, request)
    sure = heapq.nlargest(place, (low for low in lows.values() if low >= request.threshold))
    bar = sure[-1] if len(sure) == place else request.threshold
    highs = dict(lows)
    if missed:
        top = max(min(vector.values(), default=absent), absent)  # the window's lowest cosine
        highs.update({i: fuse(term.get(i, 0.0), top, weight, has_text, has_vector) for i in missed})
    return [i for i, high in highs.items() if high >= bar]


def _rows_search(request: SearchRequest, ids: Sequence[str]) -> dict[str, Any]:
    """The rows of ``ids`` with the request's fields (a search, in the view its candidates came
    from; a row of another knowledge base is none of this request's)."""
    spec: Any = True if request.fields is None else {"includes": list(dict.fromkeys(["id", "kb_id", *request.fields]))}
    query = {"bool": {"filter": [{"terms": {"kb_id": list(request.kb_ids)}}, {"ids": {"values": list(ids)}}]}}
    return {"query": query, "size": len(ids), "source": spec, "track_total_hits": False}


# rows a request may read beyond its page's last place in round trip 2 (at least; half of it when more):
# reading a row costs the node ~0.07 ms (its source parsed, vector and all, to pick the fields), and
# a kNN window of cosines as close together as the hash embedder's entity vectors give (0.45-0.58)
# bounds nothing: the seed searches' candidates that could reach their pages were 54 a page of 24
# (MuSiQue: 327 rows for 6 searches against 102, and 20 ms against 7 under load)
EXTRA_ROWS = 8

# what round trip 2's answers hold: ids-only hits and rows
ROW_PATHS = [*HIT_PATHS, "responses.hits.hits._id", "responses.hits.hits._source"]


def _cosines_and_rows(cluster: Cluster, index: str, plans: Sequence[_Scored]) -> None:
    """Round trip 2: the cosine of every text hit its request's kNN window missed, and the rows of
    every candidate that can reach its page."""
    sent: list[tuple[_Scored, bool]] = []  # (plan, whether the answer is rows)
    searches: list[dict[str, Any]] = []
    for plan in plans:
        missed = _missed(plan)
        for start in range(0, len(missed), MAX_NUM_CANDIDATES):
            assert plan.request.vector is not None
            sent.append((plan, False))
            searches.append(similarity_search(plan.request.vector.field, plan.request.vector.vector, plan.filter,
                                              missed[start:start + MAX_NUM_CANDIDATES]))
        if plan.keys:
            continue  # its rows came with its candidates
        likely = likely_page(plan, missed)
        place = plan.request.offset + plan.request.limit
        if len(likely) > place + max(EXTRA_ROWS, place // 2):
            continue  # too loose a bound: its page's rows are read once its cosines are known
        plan.asked_rows = set(likely)
        for start in range(0, len(likely), MAX_RESULT_WINDOW):
            sent.append((plan, True))
            searches.append(_rows_search(plan.request, likely[start:start + MAX_RESULT_WINDOW]))
    if not searches:
        return
    for (plan, rows), answer in zip(sent, cluster.msearch("vector scores and rows", index,
                                                          msearch_lines(index, searches), filter_path=ROW_PATHS)):
        if not rows:
            plan.vector_hits += _hits(answer)
            continue
        for hit in ((answer or {}).get("hits") or {}).get("hits", []):
            source = hit.get("_source") or {}
            plan.rows[str(source.get("id", hit.get("_id")))] = source


def window_decides(plan: _Scored) -> bool:
    """Whether the page of a narrowed window is the full windows' page: every candidate the narrow
    windows leave out (a text match past the text window, a neighbour past the kNN window) or only
    half score (a kNN hit the text window did not reach, whose text part lies between 0 and the
    window's lowest) stays under the page's last sure place, or under the threshold, at the best
    score it could have in the full windows."""
    request = plan.request
    place = request.offset + request.limit
    text_cut = plan.text is not None and len(plan.text_hits) >= plan.window
    vector_cut = plan.knn is not None and plan.window_vectors >= plan.window
    if plan.window >= request.candidates or place <= 0 or not (text_cut or vector_cut):
        return True
    has_text, has_vector, weight = request.text is not None, request.vector is not None, request.vector_weight
    term, vector = score_parts(plan.text_hits, plan.vector_hits, request)
    absent = absent_vector_score(request)
    term_low = min(term.values()) if text_cut else 0.0
    vector_low = min((vector[i] for i, _ in plan.vector_hits[:plan.window_vectors]), default=absent) \
        if vector_cut else absent
    sure: list[float] = []
    highs = [fuse(term_low, vector_low, weight, has_text, has_vector)]  # any candidate left out
    for doc_id in dict.fromkeys([*term, *vector]):
        if doc_id in term or not text_cut:
            sure.append(fuse(term.get(doc_id, 0.0), vector.get(doc_id, absent), weight, has_text, has_vector))
        else:
            highs.append(fuse(term_low, vector[doc_id], weight, has_text, has_vector))
    best = heapq.nlargest(place, (score for score in sure if score >= request.threshold))
    bar = best[-1] if len(best) == place else request.threshold
    return max(highs) < bar


def _search(cluster: Cluster, index: str, plans: Sequence[_Scored]) -> None:
    """Round trips 1 and 2 of ``plans``."""
    _candidates(cluster, index, plans)
    _cosines_and_rows(cluster, index, plans)


def _read_pages(cluster: Cluster, index: str, pages: Sequence[tuple[_Scored, list[Hit]]]) -> None:
    """The rows of every page (in place): those read with the cosines, the others (rarely any) in one
    realtime ``mget``; a row deleted since the search leaves its page."""
    wanted = [(hit.id, plan.request.fields) for plan, page in pages for hit in page if hit.id not in plan.asked_rows]
    fetched: dict[str, Any] = {}
    if wanted:
        answer = cluster.mget(index, **mget_fields(wanted))
        for (doc_id, _), item in zip(wanted, answer["docs"] if answer is not None else []):
            if item.get("found") and item.get("_source") is not None:
                fetched[doc_id] = item["_source"]
    for plan, page in pages:
        allowed = set(plan.request.kb_ids)
        kept = []
        for hit in page:
            source = plan.rows.get(hit.id) if hit.id in plan.asked_rows else fetched.get(hit.id)
            if source is not None and source.get("kb_id") in allowed:
                hit.doc = shape_doc(source, hit.id, plan.request.fields)
                kept.append(hit)
        page[:] = kept


def scored_searches(cluster: Cluster, index: str, requests: Sequence[SearchRequest],
                    vector_mapped: Callable[[str], bool]) -> list[SearchResult]:
    """``DocStore.search`` of each request (each has a text or a vector query), sent together."""
    for request in requests:
        check_request(request)
    plans = [_plan(request, vector_mapped, narrow_window(request)) for request in requests]
    _search(cluster, index, plans)
    undecided = [i for i, plan in enumerate(plans) if not window_decides(plan)]
    if undecided:
        full = [_plan(plans[i].request, vector_mapped, plans[i].request.candidates) for i in undecided]
        _search(cluster, index, full)
        for i, plan in zip(undecided, full):
            plans[i] = plan
    results: list[SearchResult] = []
    pages: list[tuple[_Scored, list[Hit]]] = []
    for plan in plans:
        page, total = fused_page(plan.text_hits, plan.vector_hits, plan.request)
        pages.append((plan, page))
        results.append(SearchResult(hits=page, total=total))
    _read_pages(cluster, index, pages)
    return results
