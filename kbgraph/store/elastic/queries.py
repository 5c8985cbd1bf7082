"""What the store asks Elasticsearch: filters, the text query, kNN, sorts, aggregations, and the
keyword arguments of each search request (``*_search``).

Pure functions (unit-tested in tests/unit/test_elastic_requests.py against what goes over the
wire): the store picks the request, cluster.py sends it. Scores: a text query and a vector query
are two separate requests, so the two scores never mix inside Elasticsearch (see the package
docstring).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from kbgraph.store.base import Condition, SearchRequest, StoreError, TextQuery
from kbgraph.store.elastic.indices import VECTOR_RE

# index.max_result_window: from + size may not exceed it (ES "Paginate search results" page)
MAX_RESULT_WINDOW = 10_000
# kNN num_candidates may not exceed 10,000 (ES "k-nearest neighbor (kNN) search" page)
MAX_NUM_CANDIDATES = 10_000
# terms aggregations past search.max_buckets (65,536 by default) fail: ask for at most this many
MAX_AGGREGATION_BUCKETS = 10_000
# a point in time (scan) is kept open this long between two pages
PIT_KEEP_ALIVE = "2m"


def _condition_clause(cond: Condition) -> tuple[str, dict[str, Any] | None]:
    """("filter" | "must_not", clause) for one condition; clause None means "always true"."""
    if cond.field == "id":
        if cond.op == "eq":
            return "filter", {"ids": {"values": [cond.value]}}
        if cond.op in ("in", "not_in"):
            return ("filter" if cond.op == "in" else "must_not"), {"ids": {"values": list(cond.value)}}
        if cond.op == "exists":
            return "filter", None
        if cond.op == "missing":
            return "filter", {"match_none": {}}
        raise StoreError(f"condition {cond.op!r} is not supported on the id pseudo-field")
    if cond.op == "eq":
        return "filter", {"term": {cond.field: cond.value}}
    if cond.op == "in":
        return "filter", {"terms": {cond.field: list(cond.value)}}
    if cond.op == "not_in":
        return "must_not", {"terms": {cond.field: list(cond.value)}}
    if cond.op == "exists":
        return "filter", {"exists": {"field": cond.field}}
    if cond.op == "missing":
        return "must_not", {"exists": {"field": cond.field}}
    if cond.op in ("gte", "lte", "gt", "lt"):
        return "filter", {"range": {cond.field: {cond.op: cond.value}}}
    raise StoreError(f"unknown condition operator {cond.op!r}")


def checked_kbs(kb_ids: Sequence[str]) -> list[str]:
    """The knowledge bases an operation is scoped to; an empty scope is a caller's bug, never "all"."""
    if isinstance(kb_ids, str) or not kb_ids:
        raise ValueError("kb_ids must be a non-empty list of knowledge-base ids (never 'all KBs')")
    return [str(k) for k in kb_ids]


def checked_kb(kb_id: str) -> str:
    if not isinstance(kb_id, str) or not kb_id:
        raise ValueError("kb_id must be a non-empty string")
    return kb_id


def only_ids(where: Sequence[Condition]) -> list[str] | None:
    """The ids named when every condition is ``id eq/in``, else None (then a scan must find them)."""
    if not where:
        return None
    wanted: set[str] | None = None
    for cond in where:
        if cond.field != "id" or cond.op not in ("eq", "in"):
            return None
        values = {cond.value} if cond.op == "eq" else set(cond.value)
        wanted = values if wanted is None else wanted & values
    return sorted(str(v) for v in (wanted or set()))


def build_filter(kb_ids: Sequence[str], where: Sequence[Condition] = ()) -> dict[str, Any]:
    """A bool query (filter context, no scoring): the knowledge bases AND every condition."""
    clauses: dict[str, list[dict[str, Any]]] = {"filter": [{"terms": {"kb_id": list(kb_ids)}}], "must_not": []}
    for cond in where:
        occur, clause = _condition_clause(cond)
        if clause is not None:
            clauses[occur].append(clause)
    return {"bool": {key: value for key, value in clauses.items() if value}}


def distinct_tokens(tokens: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(t for t in tokens if t and not t.isspace()))


def required_tokens(fraction: float, count: int) -> int:
    """How many distinct tokens a document must contain: floor(fraction * count), at least 1
    (rounded down like an ES percentage minimum_should_match, and like the embedded store)."""
    return max(1, math.floor(fraction * count + 1e-9)) if count else 0


def build_text_query(filter_query: Mapping[str, Any], text: TextQuery) -> dict[str, Any] | None:
    """BM25 over the token fields, scored as the sum of per-field boosted BM25.

    Scoring clauses: one ``match`` per field in ``bool.should`` (should scores add up), with
    ``minimum_should_match: 1`` on the outer bool because a bool with a ``filter`` clause would
    otherwise default to 0 (ES "Boolean query" page). The contract's minimum_should_match is a
    fraction of the distinct query tokens found in *any* of the fields; it is enforced exactly
    as a filter: per token a bool.should of ``term`` queries over the fields, and a bool.should
    over tokens with an integer ``minimum_should_match`` computed here.
    """
    tokens = distinct_tokens(text.tokens)
    fields = [name for name in text.fields]
    if not tokens or not fields:
        return None
    should = [{"match": {name: {"query": " ".join(tokens), "boost": float(text.fields[name])}}} for name in fields]
    filters: list[dict[str, Any]] = [dict(filter_query)]
    need = required_tokens(text.minimum_should_match, len(tokens))
    if need > 1:
        per_token = [{"bool": {"should": [{"term": {name: token}} for name in fields]}} for token in tokens]
        filters.append({"bool": {"should": per_token, "minimum_should_match": need}})
    return {"bool": {"filter": filters, "should": should, "minimum_should_match": 1}}


def build_knn(field_name: str, vector: Sequence[float], k: int, filter_query: Mapping[str, Any],
              pool: int = 0) -> dict[str, Any]:
    """Top-level ``knn`` search option (ES "k-nearest neighbor (kNN) search" page): the filter is
    applied during the approximate search, so the k neighbours all satisfy it. ``pool``: the
    ``k`` whose ``num_candidates`` to search with (the same ones give the same nearest first, so
    the k hits are the first of that search's)."""
    k = max(1, min(k, MAX_NUM_CANDIDATES))
    num_candidates = min(max(max(k, pool) * 2, 100), MAX_NUM_CANDIDATES)
    return {"field": field_name, "query_vector": float32_vector(vector), "k": min(k, num_candidates),
            "num_candidates": num_candidates, "filter": dict(filter_query)}


# ids and scores only: no stored field is read (a hit's _id is a stored field, read from the block
# that holds its source, vector and all: 1,024 hits' _ids took 15 ms on the node, their ``id`` doc
# values 1 ms), the id comes from its doc values
IDS_ONLY: dict[str, Any] = {"source": False, "stored_fields": "_none_", "docvalue_fields": ["id"]}


def ids_and(fields: Sequence[str]) -> dict[str, Any]:
    """``IDS_ONLY``, with ``fields`` (keywords or numbers: ``SearchRequest.key_fields``) read from their doc values
    beside each hit's id."""
    return {**IDS_ONLY, "docvalue_fields": list(dict.fromkeys(["id", *fields]))}


def hit_id(hit: Mapping[str, Any]) -> str:
    """The id of a hit of an ids-only search (``IDS_ONLY``)."""
    return str(hit["_id"]) if "_id" in hit else str(hit["fields"]["id"][0])


def float32_vector(values: Sequence[float]) -> np.ndarray:
    """A vector as the float32 numbers Elasticsearch indexes; the store's JSON (json_codec.py)
    writes each with the fewest digits that read back as the same float32: half the JSON of a
    float64's 17 digits, which the node parses, keeps in ``_source`` and sends back with every row."""
    return np.ascontiguousarray(values, dtype=np.float32)


def build_sort(order_by: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    sort: list[dict[str, Any]] = []
    for name, direction in order_by:
        if direction not in ("asc", "desc"):
            raise StoreError(f"order for {name!r} must be 'asc' or 'desc', not {direction!r}")
        sort.append({name: {"order": direction}})
    sort.append({"id": {"order": "asc"}})  # _id is not sortable in 8.x: kbgraph keeps `id` as keyword
    return sort


def source_spec(fields: Sequence[str] | None) -> Any:
    """The ``_source`` filter: named fields (plus ``id``); none when only ids are wanted (``_id`` is
    the id); the whole source when every field is, its vectors dropped by the reader (hits.py).

    Elasticsearch filters a source by parsing it whole, vectors and all: leaving a row's vector out
    on the node cost 0.11 ms a row (10,771 entities of 384 dims: 1.19 s of the scan's 1.54 s), more
    than sending it (whole sources: 0.15 s on the node)."""
    if fields is None:
        return True
    if set(fields) <= {"id"}:
        return False
    return list(dict.fromkeys(["id", *fields]))


def scan_source(fields: Sequence[str] | None) -> Any:
    """A scan's ``_source`` filter: as ``source_spec``, but every field but vectors is filtered on
    the node (a scan reads many rows, and its next page is filtered while the caller works on this
    one: store._scan)."""
    return {"excludes": ["q_*_vec"]} if fields is None else source_spec(fields)


def terms_aggregation(field_name: str, size: int) -> dict[str, Any]:
    """Most frequent values first; ``size`` capped so the request stays under search.max_buckets."""
    return {"terms": {"field": field_name, "size": max(1, min(size, MAX_AGGREGATION_BUCKETS)),
                      "order": [{"_count": "desc"}, {"_key": "asc"}]}}


def text_search(filter_query: Mapping[str, Any], text: TextQuery, candidates: int,
                keys: Sequence[str] = ()) -> dict[str, Any] | None:
    """The text half of a search (None when it has no token or field): ids and BM25 scores only
    (fusion needs no more; the page's rows are read afterwards), and the ``keys`` (``ids_and``)."""
    text_query = build_text_query(filter_query, text)
    if text_query is None:
        return None
    # dfs_query_then_fetch: term statistics from all shards, so BM25 does not depend on
    # which shard a document lives on (ES "Search API", search_type)
    return {"query": text_query, "size": candidates, **ids_and(keys), "track_total_hits": False,
            "search_type": "dfs_query_then_fetch"}


def knn_search(field_name: str, vector: Sequence[float], k: int, filter_query: Mapping[str, Any],
               pool: int = 0, keys: Sequence[str] = ()) -> dict[str, Any]:
    """The vector half of a search: the ``k`` nearest neighbours passing the filter (ids and
    scores only, and the ``keys``), searched as for ``pool`` of them (``build_knn``)."""
    knn = build_knn(field_name, vector, k, filter_query, pool)
    return {"knn": knn, "size": knn["k"], **ids_and(keys), "track_total_hits": False}


def similarity_search(field_name: str, vector: Sequence[float], filter_query: Mapping[str, Any],
                      ids: Sequence[str]) -> dict[str, Any]:
    """A kNN request filtered to exactly ``ids`` (small enough for an exact search): the cosine
    of each of them that has a vector (ids and scores only)."""
    only = {"bool": {"filter": [dict(filter_query), {"ids": {"values": list(ids)}}]}}
    knn = build_knn(field_name, vector, len(ids), only)
    knn["num_candidates"] = max(knn["num_candidates"], knn["k"])
    return {"knn": knn, "size": knn["k"], **IDS_ONLY, "track_total_hits": False}


def listing_search(filter_query: Mapping[str, Any], request: SearchRequest) -> dict[str, Any]:
    """Neither text nor vector: a filtered page in field order, then id. Fields that are keys
    (``SearchRequest.key_fields``) come from their doc values, no row read: a kg query's listing of
    328 mention rows took the node 3.4-5.0 ms through ``_source`` and 1.3-2.3 ms so."""
    keys = listed_keys(request)
    rows = ids_and(keys) if keys else {"source": source_spec(request.fields)}
    return {"query": filter_query, "sort": build_sort(request.order_by), "from_": request.offset,
            "size": request.limit, **rows, "track_total_hits": request.count_total}


def listed_keys(request: SearchRequest) -> list[str]:
    """The fields a listing reads from doc values (none: it reads rows): those it names, when they
    are keys and there are some besides ``id``."""
    if not request.key_fields or not request.fields:
        return []
    return [name for name in dict.fromkeys(request.fields) if name != "id"]


def key_row(hit: Mapping[str, Any], lists: Sequence[str] = ()) -> dict[str, Any]:
    """A hit's row from the doc values it was read with (``ids_and``): one value a field, but the
    fields named in ``lists`` (``SearchRequest.list_fields``), which keep every value the index holds
    (distinct and sorted: keyword doc values); a field without a value is left out, as a row's
    missing field is; and its id."""
    row = {name: values if name in lists else values[0] if len(values) == 1 else values
           for name, values in (hit.get("fields") or {}).items()}
    row["id"] = hit_id(hit)
    return row


def scan_page(filter_query: Mapping[str, Any], size: int, source: Any,
              search_after: list[Any] | None) -> dict[str, Any]:
    """One page of a scan: sorted on ``id`` (unique in an index), the next page after the last
    id seen (search_after), so no page is read twice and none is skipped, with no result window
    and no point in time to open and close (two round trips a scan, most scans being one page)."""
    kwargs: dict[str, Any] = {"query": filter_query, "sort": [{"id": {"order": "asc"}}], "size": size,
                              "source": source, "track_total_hits": False}
    if source is False:  # ids only: each hit's sort value is its id (IDS_ONLY)
        kwargs["stored_fields"] = "_none_"
    if search_after is not None:
        kwargs["search_after"] = search_after
    return kwargs


def scan_search(pit_id: str, filter_query: Mapping[str, Any], size: int, source: Any,
                search_after: list[Any] | None) -> dict[str, Any]:
    """One page of a scan: point in time + search_after, sorted on ``id`` with ``_shard_doc`` as
    the tiebreak."""
    kwargs: dict[str, Any] = {"pit": {"id": pit_id, "keep_alive": PIT_KEEP_ALIVE}, "query": filter_query,
                              "sort": [{"id": {"order": "asc"}}, {"_shard_doc": {"order": "asc"}}],
                              "size": size, "source": source, "track_total_hits": False}
    if search_after is not None:
        kwargs["search_after"] = search_after
    return kwargs


def ids_search(kb_ids: Sequence[str], ids: Sequence[str]) -> dict[str, Any]:
    """Which of ``ids`` are rows of these knowledge bases: ids only, no stored field read (a realtime
    multi-get of their ``kb_id`` parsed every row's source, vector and all: 86 us a row on the node)."""
    query = build_filter(kb_ids, [Condition("id", "in", list(ids))])
    return {"query": query, "size": len(ids), **IDS_ONLY, "track_total_hits": False}


def aggregation_search(filter_query: Mapping[str, Any], field_name: str, size: int) -> dict[str, Any]:
    """The most frequent values of a field among the documents passing the filter."""
    return {"size": 0, "query": filter_query, "aggs": {"values": terms_aggregation(field_name, size)},
            "track_total_hits": False}


def msearch_lines(index: str, searches: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``_msearch`` body (ES "Multi search API" page): a header (index, search_type) and a body
    per search, from the keyword arguments of ``client.search`` that the ``*_search`` functions build."""
    lines: list[dict[str, Any]] = []
    for kwargs in searches:
        header: dict[str, Any] = {"index": index}
        body: dict[str, Any] = {}
        for key, value in kwargs.items():
            if key == "search_type":
                header[key] = value
            else:
                body[{"source": "_source", "from_": "from"}.get(key, key)] = value
        lines += [header, body]
    return lines


def mget_fields(ids_fields: Sequence[tuple[str, Sequence[str] | None]]) -> dict[str, Any]:
    """A realtime multi-get of documents with fields of their own (the ``docs`` form of the Multi
    get API): per id the named fields (plus ``id`` and ``kb_id``), or every field but vectors."""
    docs = []
    for doc_id, fields in ids_fields:
        spec: Any = True if fields is None else {"includes": list(dict.fromkeys(["id", "kb_id", *fields]))}
        docs.append({"_id": doc_id, "_source": spec})
    return {"docs": docs}


def mget_request(ids: Sequence[str], fields: Sequence[str] | None) -> dict[str, Any]:
    """A realtime multi-get of ``ids``: the named fields (plus ``id`` and ``kb_id``, which get
    checks), or every field but vectors. Every field, or fields with a vector among them, come as
    whole sources (the vector is most of a source, and the node would parse it all to leave a few
    fields out); the reader keeps what was asked (hits.source_doc)."""
    kwargs: dict[str, Any] = {"ids": ids}
    if fields is not None and not any(VECTOR_RE.match(name) for name in fields):
        kwargs["source_includes"] = list(dict.fromkeys(["id", "kb_id", *fields]))
    return kwargs


def mget_reads(ids_fields: Sequence[tuple[str, Sequence[str] | None]]) -> dict[str, Any]:
    """A realtime multi-get of rows read with fields of their own (several ``get`` calls as one
    request, the ``docs`` form of the Multi get API), each row's ``_source`` asked as
    ``mget_request`` asks it: the named fields (plus ``id`` and ``kb_id``), or the whole source when
    every field or a vector is wanted."""
    docs: list[dict[str, Any]] = []
    for doc_id, fields in ids_fields:
        whole = fields is None or any(VECTOR_RE.match(name) for name in fields)
        spec: Any = True if whole else {"includes": list(dict.fromkeys(["id", "kb_id", *(fields or [])]))}
        docs.append({"_id": doc_id, "_source": spec})
    return {"docs": docs}
