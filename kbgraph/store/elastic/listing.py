"""Listings past Elasticsearch's result window: any offset and limit, as on the embedded store.

A listing (a search with neither text nor vector) within the first ``MAX_RESULT_WINDOW`` rows is
one ``from``/``size`` search, and every such listing of a batch goes in one ``_msearch``
(``window_listings``: the rows of a kg query's community reports and its entities' mentions are
read in one round trip). Past it, ``from`` is refused by the cluster, so the rows
are walked in a point in time with ``search_after`` in the listing's own order (its fields, then
``id``, which is unique, so the walk never skips or repeats a row): the rows before ``offset`` are
read as sort values only (no ``_source``), then the page itself. The point in time keeps every page
of one listing on the same snapshot; its cost grows with the offset, as an OFFSET does in SQL.
"""

from __future__ import annotations

from typing import Any

from kbgraph.store.base import Hit, SearchRequest, SearchResult
from kbgraph.store.elastic.cluster import Cluster
from kbgraph.store.elastic.hits import shape_doc
from kbgraph.store.elastic.queries import (
    MAX_RESULT_WINDOW, PIT_KEEP_ALIVE, build_sort, key_row, listed_keys, listing_search, msearch_lines, source_spec,
)


def in_window(request: SearchRequest) -> bool:
    """Whether a listing's page lies within the result window (one ``from``/``size`` search)."""
    return request.offset + request.limit <= MAX_RESULT_WINDOW


def listing_result(answer: Any | None, request: SearchRequest) -> SearchResult:
    """A window listing's answer as the store returns it."""
    if answer is None:
        return SearchResult()
    if listed_keys(request):
        hits = [Hit(id=row["id"], doc=shape_doc(row, row["id"], request.fields), score=0.0)
                for row in (key_row(h, request.list_fields) for h in answer["hits"]["hits"])]
    else:
        hits = [Hit(id=h["_id"], doc=shape_doc(h.get("_source") or {}, h["_id"], request.fields), score=0.0)
                for h in answer["hits"]["hits"]]
    if request.count_total:
        return SearchResult(hits=hits, total=int(answer["hits"]["total"]["value"]))
    return SearchResult(hits=hits, total=request.offset + len(hits))


def window_listings(cluster: Cluster, index: str, listings: list[tuple[dict[str, Any], SearchRequest]]
                    ) -> list[SearchResult]:
    """Listings within the window (``in_window``; (filter query, request) each) in one round trip."""
    if not listings:
        return []
    if len(listings) == 1:
        query, request = listings[0]
        return [listing_result(cluster.search("search", index, **listing_search(query, request)), request)]
    answers = cluster.msearch("search", index, msearch_lines(index, [listing_search(q, r) for q, r in listings]))
    return [listing_result(answer, request) for answer, (_, request) in zip(answers, listings)]


def page_request(pit_id: str, query: dict[str, Any], sort: list[dict[str, Any]], size: int, source: Any,
                 after: list[Any] | None, count: bool) -> dict[str, Any]:
    """One page of a walk: ``size`` rows after ``after`` in ``sort`` order, in the point in time."""
    kwargs: dict[str, Any] = {"pit": {"id": pit_id, "keep_alive": PIT_KEEP_ALIVE}, "query": query, "sort": sort,
                              "size": size, "source": source, "track_total_hits": count}
    if after is not None:
        kwargs["search_after"] = after
    return kwargs


class _Walk:
    """Pages of one listing in one point in time."""

    def __init__(self, cluster: Cluster, index: str, pit_id: str, query: dict[str, Any],
                 request: SearchRequest) -> None:
        self.cluster, self.index, self.pit_id, self.query = cluster, index, pit_id, query
        self.sort = build_sort(request.order_by)
        self.after: list[Any] | None = None
        self.total: int | None = None
        self.want_total = request.count_total

    def page(self, size: int, source: Any) -> list[dict[str, Any]]:
        count = self.want_total and self.total is None
        answer = self.cluster.search_point_in_time(
            "listing", self.index, **page_request(self.pit_id, self.query, self.sort, size, source, self.after, count))
        self.pit_id = answer.get("pit_id", self.pit_id)
        if count:
            self.total = int(answer["hits"]["total"]["value"])
        hits: list[dict[str, Any]] = answer["hits"]["hits"]
        if hits:
            self.after = hits[-1]["sort"]
        return hits

    def skip(self, rows: int) -> bool:
        """Walk past ``rows`` rows reading only their sort values; False when fewer are there."""
        while rows > 0:
            size = min(rows, MAX_RESULT_WINDOW)
            got = len(self.page(size, False))
            rows -= got
            if got < size:
                return False
        return True

    def take(self, rows: int, source: Any) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        while len(found) < rows:
            size = min(rows - len(found), MAX_RESULT_WINDOW)
            hits = self.page(size, source)
            found += hits
            if len(hits) < size:
                break
        return found


def deep_listing(cluster: Cluster, index: str, query: dict[str, Any], request: SearchRequest) -> SearchResult:
    """The listing page ``request`` asks for, however deep (see the module docstring)."""
    opened = cluster.open_point_in_time(index, PIT_KEEP_ALIVE)
    if opened is None:
        return SearchResult()
    walk = _Walk(cluster, index, opened["id"], query, request)
    try:
        hits = walk.take(request.limit, source_spec(request.fields)) if walk.skip(request.offset) else []
        if walk.want_total and walk.total is None:
            walk.page(0, False)  # nothing was asked (limit 0, offset 0): one request for the count
    finally:
        cluster.close_point_in_time(walk.pit_id)
    rows = [Hit(id=h["_id"], doc=shape_doc(h.get("_source") or {}, h["_id"], request.fields), score=0.0)
            for h in hits]
    total = walk.total if walk.total is not None else request.offset + len(rows)
    return SearchResult(hits=rows, total=total)
