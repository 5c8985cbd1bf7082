"""The Elasticsearch DocStore: one index per tenant, scoring as ``kbgraph.store.base`` defines it.

Request bodies are built by the small pure functions at the top of this module (unit-tested in
tests/unit/test_elastic_requests.py against what goes over the wire); ``ElasticStore`` sends them,
checks every answer and turns failures into ``StoreError`` / ``StoreUnavailable``.

Scores: a text query and a vector query are two separate requests, so the two scores never mix
inside Elasticsearch. ``term_score`` is each text hit's ``_score`` over the best ``_score`` of
the text window; ``vector_score`` is the cosine between the query vector and the stored vector,
read back from the kNN ``_score`` (for ``cosine`` similarity ES scores ``(1 + cosine) / 2``): text
hits the kNN window missed get theirs from a second kNN request restricted to their ids. Vectors
never travel back for scoring, so scores survive Elasticsearch >= 9.2, which leaves vectors out of
``_source``. Fusion, threshold, order and paging are then done in Python with ``base.fuse``, exactly
as the embedded store does. BM25 itself is Lucene's, whose document lengths are stored lossily
(one byte per field), so term scores agree with the embedded store's within a tolerance, not bit
for bit.

Deletion and partial update by filter scan the matching ids with a point in time and send bulk
``delete`` / ``update`` actions: they work on any cluster (``_delete_by_query`` and
``_update_by_query`` live in the reindex module, which not every deployment has) and see every
write made before them (the index is refreshed first).

Needs Elasticsearch 8.11 or later (``dense_vector`` without ``dims`` in the dynamic template).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

from elasticsearch import (
    ApiError,
    AuthenticationException,
    AuthorizationException,
    ConnectionError as EsConnectionError,
    Elasticsearch,
    NotFoundError,
    TransportError,
    helpers,
)

from es_mappings import INDEX_DEFINITION
from kbgraph.config import Settings
from kbgraph.store.base import (
    Condition,
    Doc,
    DocStore,
    Hit,
    SearchRequest,
    SearchResult,
    StoreError,
    StoreUnavailable,
    TextQuery,
    fuse,
    rescale_cosine,
)

MAPPINGS_FILE = INDEX_DEFINITION
# index.max_result_window: from + size may not exceed it (ES "Paginate search results" page)
MAX_RESULT_WINDOW = 10_000
# kNN num_candidates may not exceed 10,000 (ES "k-nearest neighbor (kNN) search" page)
MAX_NUM_CANDIDATES = 10_000
PIT_KEEP_ALIVE = "2m"
MGET_BATCH = 1000
# terms aggregations past search.max_buckets (65,536 by default) fail: ask for at most this many
MAX_AGGREGATION_BUCKETS = 10_000
# a partial update that meets a concurrent write of the same document is retried this often
RETRY_ON_CONFLICT = 3
VECTOR_RE = re.compile(r"^q_([0-9]+)_vec$")


# ---------------------------------------------------------------------------------------------
# pure request builders


def index_name(prefix: str, tenant_id: str) -> str:
    """prefix + tenant id as a legal index name: lower case, no \\ / * ? " < > | space , # :,
    not starting with - _ + or ., at most 255 bytes. When the tenant id had to change, a hash of
    the original is appended so two tenants never share an index."""
    if not tenant_id:
        raise StoreError("tenant id is empty")
    tenant = re.sub(r"[^a-z0-9_-]", "_", tenant_id.lower())
    if tenant != tenant_id:
        tenant += "-" + hashlib.blake2b(tenant_id.encode("utf-8"), digest_size=4).hexdigest()
    name = (re.sub(r"[^a-z0-9_-]", "_", prefix.lower()) + tenant).lstrip("-_+.")
    if len(name) > 255:
        name = name[:246] + "-" + hashlib.blake2b(name.encode(), digest_size=4).hexdigest()
    if not name:
        raise StoreError(f"cannot make an index name from prefix {prefix!r} and tenant {tenant_id!r}")
    return name


def load_index_body(path: Path = MAPPINGS_FILE) -> dict[str, Any]:
    try:
        body: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"Elasticsearch index definition {path} is missing (es_mappings/ ships with kbgraph)") from None
    return body


def index_body(template: Mapping[str, Any], shards: int, replicas: int, refresh_interval: str) -> dict[str, Any]:
    """The create-index body: es_mappings/index.json with the three settings filled in."""
    body = copy.deepcopy(dict(template))
    index_settings = body.setdefault("settings", {}).setdefault("index", {})
    index_settings["number_of_shards"] = shards
    index_settings["number_of_replicas"] = replicas
    index_settings["refresh_interval"] = refresh_interval
    return body


def vector_mapping(template: Mapping[str, Any], dims: int) -> dict[str, Any]:
    """The dense_vector mapping of the index template's vector rule, with ``dims`` fixed."""
    for entry in template["mappings"]["dynamic_templates"]:
        rule = next(iter(entry.values()))
        if rule["mapping"].get("type") == "dense_vector":
            return {**rule["mapping"], "dims": dims}
    raise StoreError("es_mappings/index.json has no dense_vector dynamic template")


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


def build_knn(field_name: str, vector: Sequence[float], k: int, filter_query: Mapping[str, Any]) -> dict[str, Any]:
    """Top-level ``knn`` search option (ES "k-nearest neighbor (kNN) search" page): the filter is
    applied during the approximate search, so the k neighbours all satisfy it."""
    k = max(1, min(k, MAX_NUM_CANDIDATES))
    num_candidates = min(max(k * 2, 100), MAX_NUM_CANDIDATES)
    return {"field": field_name, "query_vector": [float(x) for x in vector], "k": min(k, num_candidates),
            "num_candidates": num_candidates, "filter": dict(filter_query)}


def build_sort(order_by: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    sort: list[dict[str, Any]] = []
    for name, direction in order_by:
        if direction not in ("asc", "desc"):
            raise StoreError(f"order for {name!r} must be 'asc' or 'desc', not {direction!r}")
        sort.append({name: {"order": direction}})
    sort.append({"id": {"order": "asc"}})  # _id is not sortable in 8.x: kbgraph keeps `id` as keyword
    return sort


def source_spec(fields: Sequence[str] | None) -> Any:
    """The ``_source`` filter: named fields (plus ``id``), or everything but vectors."""
    if fields is not None:
        return list(dict.fromkeys(["id", *fields]))
    return {"excludes": ["q_*_vec"]}


def terms_aggregation(field_name: str, size: int) -> dict[str, Any]:
    """Most frequent values first; ``size`` capped so the request stays under search.max_buckets."""
    return {"terms": {"field": field_name, "size": max(1, min(size, MAX_AGGREGATION_BUCKETS)),
                      "order": [{"_count": "desc"}, {"_key": "asc"}]}}


def _finite(name: str, value: Any) -> None:
    """JSON has no NaN or infinity: Elasticsearch would reject the document, name the field here."""
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if isinstance(item, float) and not math.isfinite(item):
            raise StoreError(f"field {name!r} holds {item}, which is not a JSON number")


def clean_values(values: Mapping[str, Any]) -> Doc:
    """Field values ready to send: vectors as lists of floats, a zero-magnitude vector as null
    (ES cosine rejects it; its cosine is undefined, i.e. a vector score of 0 either way, which is
    also what a missing vector scores), non-finite numbers refused."""
    out: Doc = {}
    for name, value in values.items():
        if VECTOR_RE.match(name) and value is not None:
            vector = [float(x) for x in value]
            _finite(name, vector)
            out[name] = vector if any(x != 0.0 for x in vector) else None
            continue
        if hasattr(value, "tolist"):  # numpy arrays and scalars
            value = value.tolist()
        _finite(name, value)
        out[name] = value
    return out


def prepare_doc(doc: Mapping[str, Any], kb_id: str) -> Doc:
    """A copy ready to index: ``kb_id`` set, values cleaned (see clean_values), zero vectors left out."""
    if not isinstance(doc.get("id"), str) or not doc["id"]:
        raise StoreError(f"document without a string id: {str(dict(doc))[:200]}")
    out = {name: value for name, value in clean_values(doc).items()
           if not (VECTOR_RE.match(name) and value is None)}
    out["kb_id"] = kb_id
    return out


def bulk_index_actions(index: str, docs: Iterable[Doc]) -> list[dict[str, Any]]:
    """``index`` actions (insert or wholly replace by ``_id``) for helpers.streaming_bulk."""
    return [{"_op_type": "index", "_index": index, "_id": doc["id"], "_source": doc} for doc in docs]


def bulk_update_actions(index: str, changes: Mapping[str, Doc]) -> list[dict[str, Any]]:
    """``update`` actions with a partial ``doc`` (ES "Bulk API" page); a concurrent write of the same
    document is retried on the node rather than reported as a conflict."""
    return [{"_op_type": "update", "_index": index, "_id": doc_id, "doc": dict(values),
             "retry_on_conflict": RETRY_ON_CONFLICT} for doc_id, values in changes.items()]


def bulk_delete_actions(index: str, ids: Iterable[str]) -> list[dict[str, Any]]:
    return [{"_op_type": "delete", "_index": index, "_id": doc_id} for doc_id in ids]


def vector_fields(docs: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """{vector field: dims} named in the documents; raises when a vector's length disagrees."""
    found: dict[str, int] = {}
    for doc in docs:
        for name, value in doc.items():
            match = VECTOR_RE.match(name)
            if match and value is not None:
                dims = int(match.group(1))
                if len(value) != dims:
                    raise StoreError(f"document {doc.get('id')!r}: {name} holds {len(value)} numbers, not {dims}")
                found[name] = dims
    return found


def cosine_from_knn_score(score: float | None) -> float:
    """The cosine behind a kNN ``_score`` of a ``cosine`` dense_vector ((1 + cosine) / 2), clipped
    to [0, 1] as the contract's vector_score is."""
    if score is None:
        return 0.0
    return min(1.0, max(0.0, 2.0 * float(score) - 1.0))


def fuse_hits(text_hits: Sequence[Mapping[str, Any]], vector_hits: Sequence[Mapping[str, Any]],
              request: SearchRequest) -> list[Hit]:
    """Scored candidates (raw ES hits with ``_id``, ``_score``, ``_source``) -> fused, thresholded,
    ordered hits, before offset/limit. ``vector_hits`` are kNN hits (their ``_score`` carries the
    cosine) for every candidate that has a vector. See the module docstring of kbgraph.store.base."""
    has_text, has_vector = request.text is not None, request.vector is not None
    best = max((float(h["_score"] or 0.0) for h in text_hits), default=0.0)
    term: dict[str, float] = {}
    sources: dict[str, Doc] = {}
    for h in text_hits:
        term[h["_id"]] = float(h["_score"] or 0.0) / best if best > 0 else 0.0
        sources[h["_id"]] = dict(h.get("_source") or {})
    similarity: dict[str, float] = {}
    for h in vector_hits:
        similarity[h["_id"]] = cosine_from_knn_score(h.get("_score"))
        sources.setdefault(h["_id"], dict(h.get("_source") or {}))
    hits: list[Hit] = []
    for doc_id, source in sources.items():
        term_score = term.get(doc_id, 0.0)
        vector_score = rescale_cosine(similarity.get(doc_id, 0.0), request.vector.floor if request.vector else 0.0)
        score = fuse(term_score, vector_score, request.vector_weight, has_text, has_vector)
        if score < request.threshold:
            continue
        hits.append(Hit(id=doc_id, doc=source, score=score, term_score=term_score, vector_score=vector_score))
    hits.sort(key=lambda hit: (-hit.score, hit.id))
    return hits


def shape_doc(source: Mapping[str, Any], doc_id: str, fields: Sequence[str] | None) -> Doc:
    """What callers get: ``id`` plus the named fields, or every field but vectors."""
    if fields is None:
        doc = {k: v for k, v in source.items() if not VECTOR_RE.match(k)}
    else:
        doc = {k: source[k] for k in fields if k in source}
    doc["id"] = source.get("id", doc_id)
    return doc


def redact_url(url: str) -> str:
    """The URL without any password, for messages."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"{parts.username}:***@{host}" if parts.username else host,
                       parts.path, parts.query, parts.fragment))


# ---------------------------------------------------------------------------------------------
# the store


class ElasticStore(DocStore):
    engine = "elasticsearch"

    def __init__(self, client: Elasticsearch, url: str, *, index_prefix: str = "kbgraph_", shards: int = 1,
                 replicas: int = 0, refresh_interval: str = "1s", bulk_bytes: int = 5_000_000,
                 bulk_chunk_docs: int = 500, bulk_retries: int = 3, bulk_backoff: float = 1.0,
                 request_timeout: float = 30.0) -> None:
        self._client = client
        self._url = redact_url(url)
        self._prefix = index_prefix
        self._template = load_index_body()
        self._body = index_body(self._template, shards, replicas, refresh_interval)
        self._bulk_bytes = bulk_bytes
        self._bulk_chunk_docs = bulk_chunk_docs
        self._bulk_retries = bulk_retries
        self._bulk_backoff = bulk_backoff
        self._ready: set[str] = set()  # indices known to exist with our mapping
        self._vectors: dict[str, set[str]] = {}  # index -> vector fields known to be mapped
        self._template_put = False
        self._version: tuple[int, int] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> "ElasticStore":
        if not settings.es_url:
            raise StoreError("store is 'elasticsearch' but es_url is empty: set KBGRAPH_ES_URL, "
                             "e.g. http://elastic:PASSWORD@localhost:9200")
        # no retry of a request that timed out: the first one may still be running on the cluster
        # (a bulk write or a long search), and a second copy would only add load. Connection
        # failures and 429/502/503/504 answers, where nothing ran, are retried.
        kwargs: dict[str, Any] = {"hosts": [settings.es_url], "request_timeout": settings.es_request_timeout,
                                  "retry_on_timeout": False, "max_retries": 3}
        if settings.es_api_key:
            kwargs["api_key"] = settings.es_api_key
        elif settings.es_user:
            kwargs["basic_auth"] = (settings.es_user, settings.es_password)
        if settings.es_url.lower().startswith("https"):
            kwargs["verify_certs"] = settings.es_verify_certs
            if settings.es_ca_certs:
                kwargs["ca_certs"] = settings.es_ca_certs
        try:
            client = Elasticsearch(**kwargs)
        except ValueError as exc:
            raise StoreError(f"cannot configure the Elasticsearch client for {redact_url(settings.es_url)}: {exc}") from None
        return cls(client, settings.es_url, index_prefix=settings.es_index_prefix, shards=settings.es_shards,
                   replicas=settings.es_replicas, refresh_interval=settings.es_refresh_interval,
                   bulk_bytes=settings.es_bulk_bytes, request_timeout=settings.es_request_timeout)

    # -- errors ------------------------------------------------------------------------------

    def _fail(self, what: str, index: str, exc: Exception) -> NoReturn:
        where = f"Elasticsearch at {self._url}"
        if isinstance(exc, (AuthenticationException, AuthorizationException)):
            raise StoreUnavailable(
                f"{where} refused {what} on index {index!r} ({exc.meta.status}): check KBGRAPH_ES_USER/"
                f"KBGRAPH_ES_PASSWORD or KBGRAPH_ES_API_KEY and the user's privileges") from exc
        if isinstance(exc, ApiError):
            raise StoreError(f"{where}: {what} on index {index!r} failed: {exc.meta.status} {_reason(exc)}") from exc
        if isinstance(exc, (EsConnectionError, TransportError)):
            raise StoreUnavailable(f"{where} cannot be reached ({what} on index {index!r}): {exc}. "
                                   f"Check KBGRAPH_ES_URL and that the cluster is running") from exc
        raise StoreError(f"{where}: {what} on index {index!r} failed: {exc}") from exc

    def _call(self, what: str, target: str, fn: Any, /, **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except (ApiError, TransportError) as exc:
            self._fail(what, target, exc)

    def _read(self, what: str, target: str, fn: Any, /, **kwargs: Any) -> Any | None:
        """Like _call, but a missing index answers None (nothing stored yet) instead of failing."""
        try:
            return fn(**kwargs)
        except NotFoundError as exc:
            if _error_type(exc) == "index_not_found_exception":
                return None
            self._fail(what, target, exc)
        except (ApiError, TransportError) as exc:
            self._fail(what, target, exc)

    def _search(self, what: str, index: str, **kwargs: Any) -> Any | None:
        """A search whose answer is complete: a timed-out or partly failed search raises instead of
        passing off some shards' hits as the whole answer."""
        answer = self._read(what, index, self._client.search, index=index, **kwargs)
        if answer is not None:
            self._check_complete(what, index, answer)
        return answer

    def _check_complete(self, what: str, index: str, answer: Any) -> None:
        shards = answer.get("_shards") or {}
        if answer.get("timed_out"):
            raise StoreError(f"Elasticsearch at {self._url}: {what} on index {index!r} timed out on the cluster "
                             f"({shards.get('successful', '?')} of {shards.get('total', '?')} shards answered)")
        if shards.get("failed"):
            first = (shards.get("failures") or [{}])[0]
            reason = (first.get("reason") or {}) if isinstance(first, dict) else {}
            raise StoreError(f"Elasticsearch at {self._url}: {what} on index {index!r} failed on "
                             f"{shards['failed']} of {shards.get('total', '?')} shards: "
                             f"{reason.get('type')}: {reason.get('reason')}")

    # -- indices -----------------------------------------------------------------------------

    def index_for(self, tenant_id: str) -> str:
        return index_name(self._prefix, tenant_id)

    def _definition(self) -> dict[str, Any]:
        """The index definition for this cluster. Elasticsearch >= 9.2 leaves dense vectors out of
        ``_source`` unless told otherwise; kbgraph reads stored vectors back (a merge carries an
        unchanged row's vector over), so it keeps them there."""
        if self._cluster_version() >= (9, 2):
            body = copy.deepcopy(self._body)
            body["settings"]["index"].setdefault("mapping", {})["exclude_source_vectors"] = False
            return body
        return self._body

    def _cluster_version(self) -> tuple[int, int]:
        if self._version is None:
            answer = self._call("reading the cluster version", "/", self._client.info)
            number = str(answer["version"]["number"])
            major, minor = (re.findall(r"\d+", number) + ["0", "0"])[:2]
            self._version = (int(major), int(minor))
        return self._version

    def _put_template(self) -> None:
        """An index template for every index under our prefix, so an index auto-created by a write
        that races a drop (bulk creates a missing index) gets kbgraph's mapping, never dynamic
        defaults. More specific (longer) prefixes win where patterns overlap."""
        if self._template_put:
            return
        pattern = re.sub(r"[^a-z0-9_-]", "_", self._prefix.lower()).lstrip("-_+.") + "*"
        name = index_name(self._prefix, "template")
        self._call("putting the index template", name, self._client.indices.put_index_template, name=name,
                   index_patterns=[pattern], priority=100 + len(pattern),
                   template={"settings": self._definition()["settings"], "mappings": self._body["mappings"]},
                   meta={"managed_by": "kbgraph"})
        self._template_put = True

    def ensure_index(self, tenant_id: str) -> None:
        index = self.index_for(tenant_id)
        if index in self._ready:
            return
        self._put_template()
        if not self._call("checking the index", index, self._client.indices.exists, index=index):
            try:
                self._client.indices.create(index=index, settings=self._definition()["settings"],
                                            mappings=self._body["mappings"])
            except ApiError as exc:
                # a concurrent creator won the race: the index exists with the same definition
                if _error_type(exc) != "resource_already_exists_exception":
                    self._fail("creating the index", index, exc)
            except TransportError as exc:
                self._fail("creating the index", index, exc)
        self._ready.add(index)

    def drop_index(self, tenant_id: str) -> None:
        index = self.index_for(tenant_id)
        self._ready.discard(index)
        self._vectors.pop(index, None)
        self._read("deleting the index", index, self._client.indices.delete, index=index)

    def index_exists(self, tenant_id: str) -> bool:
        index = self.index_for(tenant_id)
        return bool(self._call("checking the index", index, self._client.indices.exists, index=index))

    def refresh(self, tenant_id: str) -> None:
        index = self.index_for(tenant_id)
        self._read("refreshing", index, self._client.indices.refresh, index=index)

    def _ensure_vectors(self, index: str, docs: Iterable[Mapping[str, Any]]) -> None:
        """Map each new q_<dims>_vec field with explicit dims before the first write of it."""
        known = self._vectors.setdefault(index, set())
        for name, dims in vector_fields(docs).items():
            if name not in known:
                self._call(f"mapping {name}", index, self._client.indices.put_mapping, index=index,
                           properties={name: vector_mapping(self._template, dims)})
                known.add(name)

    def _vector_mapped(self, index: str, name: str) -> bool:
        if name in self._vectors.get(index, set()):
            return True
        answer = self._read("reading the mapping", index, self._client.indices.get_field_mapping,
                            index=index, fields=name)
        mapped = bool(answer) and any(name in (entry.get("mappings") or {}) for entry in answer.body.values())
        if mapped:
            self._vectors.setdefault(index, set()).add(name)
        return mapped

    # -- writes ------------------------------------------------------------------------------

    def _bulk(self, what: str, index: str, actions: list[dict[str, Any]],
              refresh: bool) -> list[tuple[bool, str, dict[str, Any]]]:
        """Send actions in chunks bounded by bytes and count, retrying 429/5xx with backoff.
        ``refresh`` answers only once the writes are visible to searches (``wait_for``: the next
        scheduled refresh, no extra tiny segment per write). Returns (ok, id, item) per action."""
        results: list[tuple[bool, str, dict[str, Any]]] = []
        if not actions:
            return results
        extra: dict[str, Any] = {"refresh": "wait_for"} if refresh else {}
        try:
            for ok, item in helpers.streaming_bulk(
                    self._client, actions, chunk_size=self._bulk_chunk_docs, max_chunk_bytes=self._bulk_bytes,
                    raise_on_error=False, raise_on_exception=True, max_retries=self._bulk_retries,
                    initial_backoff=self._bulk_backoff, max_backoff=30.0, retry_on_status=(429, 502, 503, 504),
                    **extra):
                info = next(iter(item.values()))
                results.append((ok, str(info.get("_id")), info))
        except (ApiError, TransportError) as exc:
            self._fail(what, index, exc)
        return results

    def upsert(self, tenant_id: str, kb_id: str, docs: Sequence[Doc], *, refresh: bool = True) -> int:
        checked_kb(kb_id)
        if not docs:
            return 0
        self.ensure_index(tenant_id)
        index = self.index_for(tenant_id)
        prepared: dict[str, Doc] = {}
        bad: list[str] = []
        for position, doc in enumerate(docs):
            try:
                ready = prepare_doc(doc, kb_id)
            except StoreError as exc:
                bad.append(f"document {position}: {exc}")
                continue
            prepared[ready["id"]] = ready  # a repeated id: the last one wins, as on the embedded store
        try:
            self._ensure_vectors(index, prepared.values())
        except StoreError as exc:
            raise StoreError(f"nothing written to {index!r}: {exc}") from None
        results = self._bulk("bulk upsert", index, bulk_index_actions(index, list(prepared.values())), refresh)
        failed = [(doc_id, info) for ok, doc_id, info in results if not ok]
        if failed or bad:
            reasons = bad[:10] + ([_describe_failures(failed)] if failed else [])
            raise StoreError(f"Elasticsearch at {self._url}: {len(failed) + len(bad)} of {len(docs)} documents were "
                             f"not written to {index!r}: " + "; ".join(reasons))
        return len(results)

    def patch(self, tenant_id: str, kb_id: str, changes: Mapping[str, Doc], *, refresh: bool = True) -> int:
        checked_kb(kb_id)
        if not changes:
            return 0
        self.ensure_index(tenant_id)
        index = self.index_for(tenant_id)
        # only documents of this knowledge base are patched; unknown ids are ignored
        owned = {doc["id"] for doc in self.get(tenant_id, [kb_id], list(changes), fields=["kb_id"])}
        mine = {doc_id: clean_values({k: v for k, v in values.items() if k not in ("id", "kb_id")})
                for doc_id, values in changes.items() if doc_id in owned}
        mine = {doc_id: values for doc_id, values in mine.items() if values}
        if not mine:
            return 0
        self._ensure_vectors(index, ({"id": i, **v} for i, v in mine.items()))
        results = self._bulk("bulk patch", index, bulk_update_actions(index, mine), refresh)
        return self._count_written("patched", index, results)

    def _count_written(self, what: str, index: str, results: list[tuple[bool, str, dict[str, Any]]]) -> int:
        failed = [(doc_id, info) for ok, doc_id, info in results
                  if not ok and info.get("status") != 404]  # deleted meanwhile: ignored like unknown ids
        if failed:
            raise StoreError(f"Elasticsearch at {self._url}: {len(failed)} documents were not {what} in "
                             f"{index!r}: " + _describe_failures(failed))
        return sum(1 for ok, _, info in results if ok and info.get("result") != "not_found")

    def _matching_ids(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition]) -> list[str]:
        """Ids of the documents a delete/update by filter acts on. Named ids are checked with a
        realtime mget; any other filter is scanned (after a refresh: rows written just before count)."""
        named = only_ids(where)
        if named is not None:
            return [doc["id"] for doc in self.get(tenant_id, kb_ids, named, fields=[])]
        return [doc["id"] for doc in self.scan(tenant_id, kb_ids, where, fields=[])]

    def delete(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = (),
               *, refresh: bool = True) -> int:
        checked_kbs(kb_ids)
        index = self.index_for(tenant_id)
        ids = self._matching_ids(tenant_id, kb_ids, where)
        results = self._bulk("bulk delete", index, bulk_delete_actions(index, ids), refresh)
        return self._count_written("deleted", index, results)

    def update(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition], values: Doc,
               *, refresh: bool = True) -> int:
        checked_kbs(kb_ids)
        changes = clean_values({k: v for k, v in values.items() if k not in ("id", "kb_id")})
        if not changes:
            return 0
        index = self.index_for(tenant_id)
        ids = self._matching_ids(tenant_id, kb_ids, where)
        if not ids:
            return 0
        self._ensure_vectors(index, [{"id": "update", **changes}])
        results = self._bulk("bulk update", index, bulk_update_actions(index, {i: changes for i in ids}), refresh)
        return self._count_written("updated", index, results)

    # -- reads -------------------------------------------------------------------------------

    def get(self, tenant_id: str, kb_ids: Sequence[str], ids: Sequence[str],
            fields: Sequence[str] | None = None) -> list[Doc]:
        allowed = set(checked_kbs(kb_ids))
        if not ids:
            return []
        index = self.index_for(tenant_id)
        wanted = list(dict.fromkeys(ids))
        found: dict[str, Doc] = {}
        for start in range(0, len(wanted), MGET_BATCH):
            batch = wanted[start:start + MGET_BATCH]
            kwargs: dict[str, Any] = {"index": index, "ids": batch}
            if fields is None:
                kwargs["source_excludes"] = ["q_*_vec"]  # vectors only when named, as in search
            else:
                kwargs["source_includes"] = list(dict.fromkeys(["id", "kb_id", *fields]))
            answer = self._read("mget", index, self._client.mget, **kwargs)
            if answer is None:
                return []
            for item in answer["docs"]:
                source = item.get("_source")
                if item.get("found") and source is not None and source.get("kb_id") in allowed:
                    doc = dict(source) if fields is None else {k: source[k] for k in fields if k in source}
                    doc["id"] = source.get("id", item["_id"])
                    found[item["_id"]] = doc
        return [found[i] for i in wanted if i in found]

    def search(self, tenant_id: str, request: SearchRequest) -> SearchResult:
        checked_kbs(request.kb_ids)
        index = self.index_for(tenant_id)
        query = build_filter(request.kb_ids, request.where)
        if request.text is None and request.vector is None:
            return self._list(index, query, request)
        if request.candidates > MAX_RESULT_WINDOW:
            raise StoreError(f"candidates={request.candidates} exceeds Elasticsearch's window of {MAX_RESULT_WINDOW}")
        if request.vector is not None:
            dims = VECTOR_RE.match(request.vector.field)
            if dims and request.vector.vector is not None and len(request.vector.vector) != int(dims.group(1)):
                raise StoreError(f"query vector for {request.vector.field} holds {len(request.vector.vector)} "
                                 f"numbers, not {dims.group(1)}")
        source = source_spec(request.fields)
        text_hits: list[dict[str, Any]] = []
        if request.text is not None:
            text_query = build_text_query(query, request.text)
            if text_query is not None:
                # dfs_query_then_fetch: term statistics from all shards, so BM25 does not depend on
                # which shard a document lives on (ES "Search API", search_type)
                answer = self._search("text search", index, query=text_query, size=request.candidates,
                                      source=source, track_total_hits=False, search_type="dfs_query_then_fetch")
                text_hits = [] if answer is None else list(answer["hits"]["hits"])
        vector_hits: list[dict[str, Any]] = []
        vector = request.vector
        if vector is not None and vector.vector is not None and len(vector.vector) \
                and any(float(x) != 0.0 for x in vector.vector) and self._vector_mapped(index, vector.field):
            knn = build_knn(vector.field, vector.vector, request.candidates, query)
            answer = self._search("vector search", index, knn=knn, size=knn["k"], source=source,
                                  track_total_hits=False)
            vector_hits = [] if answer is None else list(answer["hits"]["hits"])
            vector_hits += self._similarity_of(index, vector.field, vector.vector, query, text_hits, vector_hits)
        ranked = fuse_hits(text_hits, vector_hits, request)
        page = ranked[request.offset:request.offset + request.limit]
        for hit in page:
            hit.doc = shape_doc(hit.doc, hit.id, request.fields)
        return SearchResult(hits=page, total=len(ranked))

    def _similarity_of(self, index: str, field_name: str, vector: Sequence[float], query: Mapping[str, Any],
                       text_hits: Sequence[Mapping[str, Any]],
                       vector_hits: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """kNN hits for the text hits the kNN window missed: a kNN request filtered to exactly their
        ids (small enough for an exact search) scores each of them that has a vector."""
        seen = {h["_id"] for h in vector_hits}
        missed = [h["_id"] for h in text_hits if h["_id"] not in seen]
        found: list[dict[str, Any]] = []
        for start in range(0, len(missed), MAX_NUM_CANDIDATES):
            batch = missed[start:start + MAX_NUM_CANDIDATES]
            only = {"bool": {"filter": [dict(query), {"ids": {"values": batch}}]}}
            knn = build_knn(field_name, vector, len(batch), only)
            knn["num_candidates"] = max(knn["num_candidates"], knn["k"])
            answer = self._search("vector scores", index, knn=knn, size=knn["k"], source=False,
                                  track_total_hits=False)
            if answer is not None:
                found += answer["hits"]["hits"]
        return found

    def _list(self, index: str, query: dict[str, Any], request: SearchRequest) -> SearchResult:
        """Neither text nor vector: a filtered listing in field order, then id."""
        if request.offset + request.limit > MAX_RESULT_WINDOW:
            raise StoreError(f"offset+limit={request.offset + request.limit} is past Elasticsearch's result window "
                             f"of {MAX_RESULT_WINDOW}; use DocStore.scan() to read everything")
        answer = self._search("search", index, query=query, sort=build_sort(request.order_by), from_=request.offset,
                              size=request.limit, source=source_spec(request.fields),
                              track_total_hits=request.count_total)
        if answer is None:
            return SearchResult()
        hits = [Hit(id=h["_id"], doc=shape_doc(h.get("_source") or {}, h["_id"], request.fields), score=0.0)
                for h in answer["hits"]["hits"]]
        if request.count_total:
            return SearchResult(hits=hits, total=int(answer["hits"]["total"]["value"]))
        return SearchResult(hits=hits, total=request.offset + len(hits))

    def scan(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = (),
             fields: Sequence[str] | None = None, batch_size: int = 1000) -> Iterator[Doc]:
        """Point in time + search_after, sorted on ``id`` with ``_shard_doc`` as the tiebreak.

        A point in time sees refreshed documents only, and the graph steps scan right after writing
        without refresh (mentions, then the rows derived from them): the index is refreshed first,
        so a scan reads every earlier write, as on the embedded store."""
        checked_kbs(kb_ids)
        self.refresh(tenant_id)
        return self._scan(tenant_id, kb_ids, where, fields, batch_size)

    def _scan(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition],
              fields: Sequence[str] | None, batch_size: int) -> Iterator[Doc]:
        index = self.index_for(tenant_id)
        size = max(1, min(batch_size, MAX_RESULT_WINDOW))
        opened = self._read("opening a point in time", index, self._client.open_point_in_time, index=index,
                            keep_alive=PIT_KEEP_ALIVE)
        if opened is None:
            return
        pit_id: str = opened["id"]
        query = build_filter(kb_ids, where)
        source = source_spec(fields)
        search_after: list[Any] | None = None
        try:
            while True:
                kwargs: dict[str, Any] = {"pit": {"id": pit_id, "keep_alive": PIT_KEEP_ALIVE}, "query": query,
                                          "sort": [{"id": {"order": "asc"}}, {"_shard_doc": {"order": "asc"}}],
                                          "size": size, "source": source, "track_total_hits": False}
                if search_after is not None:
                    kwargs["search_after"] = search_after
                answer = self._call("scan", index, self._client.search, **kwargs)
                self._check_complete("scan", index, answer)
                pit_id = answer.get("pit_id", pit_id)
                hits = answer["hits"]["hits"]
                for h in hits:
                    source_doc = h.get("_source") or {}
                    doc = dict(source_doc) if fields is None else {k: source_doc[k] for k in fields if k in source_doc}
                    doc["id"] = source_doc.get("id", h["_id"])
                    yield doc
                if len(hits) < size:
                    return
                search_after = hits[-1]["sort"]
        finally:
            try:
                self._client.close_point_in_time(id=pit_id)
            except (ApiError, TransportError):
                pass  # the PIT expires by itself after keep_alive

    def count(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = ()) -> int:
        checked_kbs(kb_ids)
        index = self.index_for(tenant_id)
        answer = self._read("count", index, self._client.count, index=index, query=build_filter(kb_ids, where))
        if answer is None:
            return 0
        self._check_complete("count", index, answer)
        return int(answer["count"])

    def aggregate(self, tenant_id: str, kb_ids: Sequence[str], field_name: str,
                  where: Sequence[Condition] = (), size: int = 100) -> list[tuple[Any, int]]:
        checked_kbs(kb_ids)
        if size <= 0:
            return []
        index = self.index_for(tenant_id)
        answer = self._search("terms aggregation", index, size=0, query=build_filter(kb_ids, where),
                              aggs={"values": terms_aggregation(field_name, size)}, track_total_hits=False)
        if answer is None:
            return []
        return [(b["key"], int(b["doc_count"])) for b in answer["aggregations"]["values"]["buckets"]]

    def close(self) -> None:
        self._client.close()


def _error_type(exc: ApiError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    return str(error.get("type", "")) if isinstance(error, dict) else ""


def _reason(exc: ApiError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    if isinstance(error, dict):
        root = (error.get("root_cause") or [error])[0]
        return f"{root.get('type', error.get('type'))}: {root.get('reason', error.get('reason'))}"
    return str(exc.message)


def _describe_failures(failed: Sequence[tuple[str, dict[str, Any]]], shown: int = 10) -> str:
    parts = []
    for doc_id, info in failed[:shown]:
        error = info.get("error")
        reason = f"{error.get('type')}: {error.get('reason')}" if isinstance(error, dict) else str(error)
        parts.append(f"{doc_id} ({info.get('status')} {reason})")
    more = f" and {len(failed) - shown} more" if len(failed) > shown else ""
    return "; ".join(parts) + more
