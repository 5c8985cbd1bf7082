"""The Elasticsearch DocStore: one index per tenant, scoring as ``kbgraph.store.base`` defines it.

Request bodies are built by the small pure functions at the top of this module (unit-tested in
tests/unit/test_elastic_requests.py against what goes over the wire); ``ElasticStore`` sends them,
checks every answer and turns failures into ``StoreError`` / ``StoreUnavailable``.

Scores: a text query and a vector query are two separate requests, so the two scores never mix
inside Elasticsearch. ``term_score`` is each text hit's ``_score`` over the best ``_score`` of
the text window; ``vector_score`` is the cosine between the query vector and the stored vector,
computed here in Python (the kNN ``_score`` is only used to pick the window). Fusion, threshold,
order and paging are then done in Python with ``base.fuse``, exactly as the embedded store does.

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
)

MAPPINGS_FILE = INDEX_DEFINITION
# index.max_result_window: from + size may not exceed it (ES "Paginate search results" page)
MAX_RESULT_WINDOW = 10_000
# kNN num_candidates may not exceed 10,000 (ES "k-nearest neighbor (kNN) search" page)
MAX_NUM_CANDIDATES = 10_000
PIT_KEEP_ALIVE = "2m"
MGET_BATCH = 1000
LONG_REQUEST_TIMEOUT = 600.0  # delete/update by query wait for completion, bounded by this
VECTOR_RE = re.compile(r"^q_([0-9]+)_vec$")
UPDATE_SCRIPT = "for (def entry : params['doc'].entrySet()) { ctx._source[entry.getKey()] = entry.getValue(); }"


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


def source_spec(fields: Sequence[str] | None, extra: Sequence[str] = (), with_vectors: bool = False) -> Any:
    """The ``_source`` filter: named fields (plus ``id`` and ``extra``), or everything but vectors."""
    if fields is not None:
        return list(dict.fromkeys(["id", *fields, *extra]))
    if with_vectors:
        return True
    return {"excludes": ["q_*_vec"]}


def terms_aggregation(field_name: str, size: int) -> dict[str, Any]:
    return {"terms": {"field": field_name, "size": size, "order": [{"_count": "desc"}, {"_key": "asc"}]}}


def update_script(values: Mapping[str, Any]) -> dict[str, Any]:
    return {"source": UPDATE_SCRIPT, "lang": "painless", "params": {"doc": dict(values)}}


def prepare_doc(doc: Mapping[str, Any], kb_id: str) -> Doc:
    """A copy ready to index: ``kb_id`` set, zero-magnitude vectors dropped (ES cosine rejects
    them; their cosine is undefined, i.e. a vector score of 0 either way)."""
    if not isinstance(doc.get("id"), str) or not doc["id"]:
        raise StoreError(f"document without a string id: {str(dict(doc))[:200]}")
    out: Doc = {}
    for name, value in doc.items():
        if VECTOR_RE.match(name) and value is not None and not any(float(x) != 0.0 for x in value):
            continue
        out[name] = value
    out["kb_id"] = kb_id
    return out


def bulk_index_actions(index: str, docs: Iterable[Doc]) -> list[dict[str, Any]]:
    """``index`` actions (insert or wholly replace by ``_id``) for helpers.streaming_bulk."""
    return [{"_op_type": "index", "_index": index, "_id": doc["id"], "_source": doc} for doc in docs]


def bulk_update_actions(index: str, changes: Mapping[str, Doc]) -> list[dict[str, Any]]:
    """``update`` actions with a partial ``doc`` (ES "Bulk API" page)."""
    return [{"_op_type": "update", "_index": index, "_id": doc_id, "doc": dict(values)}
            for doc_id, values in changes.items()]


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


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity clipped to [0, 1]; 0 when either vector is empty or zero."""
    if len(a) != len(b) or not a:
        return 0.0
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    if norm == 0.0:
        return 0.0
    return min(1.0, max(0.0, dot / norm))


def fuse_hits(text_hits: Sequence[Mapping[str, Any]], vector_hits: Sequence[Mapping[str, Any]],
              request: SearchRequest) -> list[Hit]:
    """Scored candidates (raw ES hits with ``_id``, ``_score``, ``_source``) -> fused, thresholded,
    ordered hits, before offset/limit. See the module docstring of kbgraph.store.base."""
    has_text, has_vector = request.text is not None, request.vector is not None
    best = max((float(h["_score"] or 0.0) for h in text_hits), default=0.0)
    term: dict[str, float] = {}
    sources: dict[str, Doc] = {}
    for h in text_hits:
        term[h["_id"]] = float(h["_score"] or 0.0) / best if best > 0 else 0.0
        sources[h["_id"]] = dict(h.get("_source") or {})
    for h in vector_hits:
        sources.setdefault(h["_id"], dict(h.get("_source") or {}))
    hits: list[Hit] = []
    for doc_id, source in sources.items():
        term_score = term.get(doc_id, 0.0)
        vector_score = 0.0
        if request.vector is not None:
            stored = source.get(request.vector.field)
            if stored:
                vector_score = cosine(request.vector.vector, stored)
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
        self._long_timeout = max(request_timeout, LONG_REQUEST_TIMEOUT)
        self._ready: set[str] = set()  # indices known to exist with our mapping
        self._vectors: dict[str, set[str]] = {}  # index -> vector fields known to be mapped

    @classmethod
    def from_settings(cls, settings: Settings) -> "ElasticStore":
        if not settings.es_url:
            raise StoreError("store is 'elasticsearch' but es_url is empty: set KBGRAPH_ES_URL, "
                             "e.g. http://elastic:PASSWORD@localhost:9200")
        kwargs: dict[str, Any] = {"hosts": [settings.es_url], "request_timeout": settings.es_request_timeout,
                                  "retry_on_timeout": True, "max_retries": 3}
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

    # -- indices -----------------------------------------------------------------------------

    def index_for(self, tenant_id: str) -> str:
        return index_name(self._prefix, tenant_id)

    def ensure_index(self, tenant_id: str) -> None:
        index = self.index_for(tenant_id)
        if index in self._ready:
            return
        if not self._call("checking the index", index, self._client.indices.exists, index=index):
            try:
                self._client.indices.create(index=index, settings=self._body["settings"],
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

    def _bulk(self, what: str, index: str, actions: list[dict[str, Any]]) -> list[tuple[bool, str, dict[str, Any]]]:
        """Send actions in chunks bounded by bytes and count, retrying 429/5xx with backoff.
        Returns (ok, id, item) per action."""
        results: list[tuple[bool, str, dict[str, Any]]] = []
        try:
            for ok, item in helpers.streaming_bulk(
                    self._client, actions, chunk_size=self._bulk_chunk_docs, max_chunk_bytes=self._bulk_bytes,
                    raise_on_error=False, raise_on_exception=True, max_retries=self._bulk_retries,
                    initial_backoff=self._bulk_backoff, max_backoff=30.0, retry_on_status=(429, 502, 503, 504)):
                info = next(iter(item.values()))
                results.append((ok, str(info.get("_id")), info))
        except (ApiError, TransportError) as exc:
            self._fail(what, index, exc)
        return results

    def upsert(self, tenant_id: str, kb_id: str, docs: Sequence[Doc], *, refresh: bool = True) -> int:
        if not docs:
            return 0
        self.ensure_index(tenant_id)
        index = self.index_for(tenant_id)
        prepared = [prepare_doc(doc, kb_id) for doc in docs]
        self._ensure_vectors(index, prepared)
        results = self._bulk("bulk upsert", index, bulk_index_actions(index, prepared))
        if refresh:
            self.refresh(tenant_id)
        failed = [(doc_id, info) for ok, doc_id, info in results if not ok]
        if failed:
            raise StoreError(f"Elasticsearch at {self._url}: {len(failed)} of {len(prepared)} documents were not "
                             f"written to {index!r}: " + _describe_failures(failed))
        return len(results)

    def patch(self, tenant_id: str, kb_id: str, changes: Mapping[str, Doc], *, refresh: bool = True) -> int:
        if not changes:
            return 0
        self.ensure_index(tenant_id)
        index = self.index_for(tenant_id)
        # only documents of this knowledge base are patched; unknown ids are ignored
        owned = {doc["id"] for doc in self.get(tenant_id, [kb_id], list(changes), fields=["kb_id"])}
        mine = {doc_id: {k: v for k, v in values.items() if k not in ("id", "kb_id")}
                for doc_id, values in changes.items() if doc_id in owned}
        if not mine:
            return 0
        self._ensure_vectors(index, ({"id": i, **v} for i, v in mine.items()))
        results = self._bulk("bulk patch", index, bulk_update_actions(index, mine))
        if refresh:
            self.refresh(tenant_id)
        failed = [(doc_id, info) for ok, doc_id, info in results
                  if not ok and info.get("status") != 404]  # deleted meanwhile: ignored like unknown ids
        if failed:
            raise StoreError(f"Elasticsearch at {self._url}: {len(failed)} documents were not patched in "
                             f"{index!r}: " + _describe_failures(failed))
        return sum(1 for ok, _, _ in results if ok)

    def delete(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = (),
               *, refresh: bool = True) -> int:
        if not kb_ids:
            return 0
        index = self.index_for(tenant_id)
        answer = self._read("delete by query", index, self._client.options(request_timeout=self._long_timeout)
                            .delete_by_query, index=index, query=build_filter(kb_ids, where), conflicts="proceed",
                            refresh=refresh, wait_for_completion=True)
        return self._by_query_count("delete by query", index, answer, "deleted")

    def update(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition], values: Doc,
               *, refresh: bool = True) -> int:
        if not kb_ids or not values:
            return 0
        index = self.index_for(tenant_id)
        self._ensure_vectors(index, [values])
        answer = self._read("update by query", index, self._client.options(request_timeout=self._long_timeout)
                            .update_by_query, index=index, query=build_filter(kb_ids, where),
                            script=update_script(values), conflicts="proceed", refresh=refresh,
                            wait_for_completion=True)
        return self._by_query_count("update by query", index, answer, "updated")

    def _by_query_count(self, what: str, index: str, answer: Any, key: str) -> int:
        if answer is None:
            return 0
        failures = answer.get("failures") or []
        if failures:
            raise StoreError(f"Elasticsearch at {self._url}: {what} on {index!r} had {len(failures)} failures, "
                             f"first: {json.dumps(failures[0])[:300]}")
        return int(answer.get(key, 0))

    # -- reads -------------------------------------------------------------------------------

    def get(self, tenant_id: str, kb_ids: Sequence[str], ids: Sequence[str],
            fields: Sequence[str] | None = None) -> list[Doc]:
        if not ids or not kb_ids:
            return []
        index = self.index_for(tenant_id)
        wanted = list(dict.fromkeys(ids))
        allowed = set(kb_ids)
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
        if not request.kb_ids:
            return SearchResult()
        index = self.index_for(tenant_id)
        query = build_filter(request.kb_ids, request.where)
        if request.text is None and request.vector is None:
            return self._list(index, query, request)
        if request.candidates > MAX_RESULT_WINDOW:
            raise StoreError(f"candidates={request.candidates} exceeds Elasticsearch's window of {MAX_RESULT_WINDOW}")
        extra = [request.vector.field] if request.vector is not None else []
        source = source_spec(request.fields, extra=extra, with_vectors=request.vector is not None)
        text_hits: list[dict[str, Any]] = []
        if request.text is not None:
            text_query = build_text_query(query, request.text)
            if text_query is not None:
                # dfs_query_then_fetch: term statistics from all shards, so BM25 does not depend on
                # which shard a document lives on (ES "Search API", search_type)
                answer = self._read("text search", index, self._client.search, index=index, query=text_query,
                                    size=request.candidates, source=source, track_total_hits=False,
                                    search_type="dfs_query_then_fetch")
                text_hits = [] if answer is None else list(answer["hits"]["hits"])
        vector_hits: list[dict[str, Any]] = []
        if request.vector is not None and request.vector.vector and self._vector_mapped(index, request.vector.field):
            knn = build_knn(request.vector.field, request.vector.vector, request.candidates, query)
            answer = self._read("vector search", index, self._client.search, index=index, knn=knn,
                                size=knn["k"], source=source, track_total_hits=False)
            vector_hits = [] if answer is None else list(answer["hits"]["hits"])
        ranked = fuse_hits(text_hits, vector_hits, request)
        page = ranked[request.offset:request.offset + request.limit]
        for hit in page:
            hit.doc = shape_doc(hit.doc, hit.id, request.fields)
        return SearchResult(hits=page, total=len(ranked))

    def _list(self, index: str, query: dict[str, Any], request: SearchRequest) -> SearchResult:
        """Neither text nor vector: a filtered listing in field order, then id."""
        if request.offset + request.limit > MAX_RESULT_WINDOW:
            raise StoreError(f"offset+limit={request.offset + request.limit} is past Elasticsearch's result window "
                             f"of {MAX_RESULT_WINDOW}; use DocStore.scan() to read everything")
        answer = self._read("search", index, self._client.search, index=index, query=query,
                            sort=build_sort(request.order_by), from_=request.offset, size=request.limit,
                            source=source_spec(request.fields), track_total_hits=request.count_total)
        if answer is None:
            return SearchResult()
        hits = [Hit(id=h["_id"], doc=shape_doc(h.get("_source") or {}, h["_id"], request.fields), score=0.0)
                for h in answer["hits"]["hits"]]
        if request.count_total:
            return SearchResult(hits=hits, total=int(answer["hits"]["total"]["value"]))
        return SearchResult(hits=hits, total=request.offset + len(hits))

    def scan(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = (),
             fields: Sequence[str] | None = None, batch_size: int = 1000) -> Iterator[Doc]:
        """Point in time + search_after, sorted on ``id`` with ``_shard_doc`` as the tiebreak."""
        if not kb_ids:
            return
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
        if not kb_ids:
            return 0
        index = self.index_for(tenant_id)
        answer = self._read("count", index, self._client.count, index=index, query=build_filter(kb_ids, where))
        return 0 if answer is None else int(answer["count"])

    def aggregate(self, tenant_id: str, kb_ids: Sequence[str], field_name: str,
                  where: Sequence[Condition] = (), size: int = 100) -> list[tuple[Any, int]]:
        if not kb_ids or size <= 0:
            return []
        index = self.index_for(tenant_id)
        answer = self._read("terms aggregation", index, self._client.search, index=index, size=0,
                            query=build_filter(kb_ids, where), aggs={"values": terms_aggregation(field_name, size)},
                            track_total_hits=False)
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
