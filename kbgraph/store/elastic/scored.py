"""Scored searches (text, vector or both) of one batch, in at most three round trips whatever the
batch holds:

1. one ``_msearch`` with the text half and the kNN half of every request, ids and scores only;
2. one ``_msearch`` scoring the text hits each kNN window missed (a kNN request filtered to
   exactly their ids, so every candidate with a vector gets its cosine, as on the embedded store);
3. fusion in Python (``hits.fuse_hits``), then one realtime ``mget`` of every page's rows with the
   fields its request names.

Fusion needs only ids and scores, and only the page needs its rows: a chunk search looks at 1,024
text and 1,024 vector candidates, whose texts as JSON were most of its time (MuSiQue passages: 89 ms
a naive query when both halves returned their sources, see bench/README.md). The results are the
same as searching one request at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kbgraph.store.base import Hit, SearchRequest, SearchResult, StoreError
from kbgraph.store.elastic.cluster import Cluster
from kbgraph.store.elastic.hits import fuse_hits, shape_doc
from kbgraph.store.elastic.indices import VECTOR_RE
from kbgraph.store.elastic.queries import (
    MAX_NUM_CANDIDATES, MAX_RESULT_WINDOW, build_filter, hit_id, knn_search, mget_fields, msearch_lines,
    similarity_search, text_search,
)


@dataclass
class _Scored:
    """One request of the batch: what it sends and the candidates that came back."""

    request: SearchRequest
    filter: dict[str, Any]
    text: dict[str, Any] | None
    knn: dict[str, Any] | None
    text_hits: list[dict[str, Any]] = field(default_factory=list)
    vector_hits: list[dict[str, Any]] = field(default_factory=list)


def check_request(request: SearchRequest) -> None:
    """Refuse what Elasticsearch cannot answer, before anything of the batch is sent."""
    if request.candidates > MAX_RESULT_WINDOW:
        raise StoreError(f"candidates={request.candidates} exceeds Elasticsearch's window of {MAX_RESULT_WINDOW}")
    vector = request.vector
    if vector is not None:
        dims = VECTOR_RE.match(vector.field)
        if dims and vector.vector is not None and len(vector.vector) != int(dims.group(1)):
            raise StoreError(f"query vector for {vector.field} holds {len(vector.vector)} numbers, not {dims.group(1)}")


def _plan(request: SearchRequest, vector_mapped: Callable[[str], bool]) -> _Scored:
    query = build_filter(request.kb_ids, request.where)
    text = text_search(query, request.text, request.candidates) if request.text is not None else None
    vector, knn = request.vector, None
    # a zero or empty vector has no cosine, and an unmapped field no neighbours: no kNN half
    if vector is not None and vector.vector is not None and len(vector.vector) \
            and any(float(x) != 0.0 for x in vector.vector) and vector_mapped(vector.field):
        knn = knn_search(vector.field, vector.vector, request.candidates, query)
    return _Scored(request, query, text, knn)


# what an ids-only search's answer needs to hold (Elasticsearch leaves out the rest, e.g. each hit's
# index name: a third of a 1,024-hit answer)
HIT_PATHS = ["responses.hits.hits._score", "responses.hits.hits.fields.id"]


def _hits(answer: Any | None) -> list[dict[str, Any]]:
    """The hits of an ids-only search (queries.IDS_ONLY) as fusion reads them: ``_id`` and ``_score``
    (an answer without hits holds no ``hits`` once filtered by HIT_PATHS)."""
    if answer is None:
        return []
    return [{"_id": hit_id(h), "_score": h.get("_score")} for h in (answer.get("hits") or {}).get("hits", [])]


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


def _missed_similarities(cluster: Cluster, index: str, plans: Sequence[_Scored]) -> None:
    """Round trip 2: the cosine of every text hit its request's kNN window missed."""
    sent: list[_Scored] = []
    searches: list[dict[str, Any]] = []
    for plan in plans:
        if plan.knn is None or plan.request.vector is None:
            continue
        seen = {h["_id"] for h in plan.vector_hits}
        missed = [h["_id"] for h in plan.text_hits if h["_id"] not in seen]
        for start in range(0, len(missed), MAX_NUM_CANDIDATES):
            sent.append(plan)
            searches.append(similarity_search(plan.request.vector.field, plan.request.vector.vector, plan.filter,
                                              missed[start:start + MAX_NUM_CANDIDATES]))
    if not searches:
        return
    for plan, answer in zip(sent, cluster.msearch("vector scores", index, msearch_lines(index, searches),
                                                  filter_path=HIT_PATHS)):
        plan.vector_hits += _hits(answer)


def _read_pages(cluster: Cluster, index: str, pages: Sequence[tuple[SearchRequest, list[Hit]]]) -> None:
    """Round trip 3: the rows of every page (in place); a row deleted since the search leaves its page."""
    wanted = [(hit.id, request.fields) for request, page in pages for hit in page]
    if not wanted:
        return
    answer = cluster.mget(index, **mget_fields(wanted))
    docs = iter(answer["docs"] if answer is not None else [{}] * len(wanted))
    for request, page in pages:
        allowed = set(request.kb_ids)
        kept = []
        for hit in page:
            item = next(docs)
            source = item.get("_source")
            if item.get("found") and source is not None and source.get("kb_id") in allowed:
                hit.doc = shape_doc(source, hit.id, request.fields)
                kept.append(hit)
        page[:] = kept


def scored_searches(cluster: Cluster, index: str, requests: Sequence[SearchRequest],
                    vector_mapped: Callable[[str], bool]) -> list[SearchResult]:
    """``DocStore.search`` of each request (each has a text or a vector query), sent together."""
    for request in requests:
        check_request(request)
    plans = [_plan(request, vector_mapped) for request in requests]
    _candidates(cluster, index, plans)
    _missed_similarities(cluster, index, plans)
    results: list[SearchResult] = []
    pages: list[tuple[SearchRequest, list[Hit]]] = []
    for plan in plans:
        ranked = fuse_hits(plan.text_hits, plan.vector_hits, plan.request)
        page = ranked[plan.request.offset:plan.request.offset + plan.request.limit]
        pages.append((plan.request, page))
        results.append(SearchResult(hits=page, total=len(ranked)))
    _read_pages(cluster, index, pages)
    return results
