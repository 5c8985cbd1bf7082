"""``ElasticStore``: the DocStore contract on Elasticsearch, one index per tenant behind its alias.

It decides which requests an operation needs and reads their answers; queries.py builds them,
cluster.py sends them, indices.py names the indices and defines their mappings, tenants.py sets a
tenant's alias and index up, listing.py walks listings past the result window, bulk.py prepares
writes, hits.py fuses and shapes search hits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from elasticsearch import Elasticsearch

from kbgraph.config import Settings
from kbgraph.store.base import Condition, Doc, DocStore, Hit, SearchRequest, SearchResult, StoreError
from kbgraph.store.elastic.bulk import (
    _describe_failures, bulk_delete_actions, bulk_index_actions, bulk_update_actions, clean_values, prepare_doc,
)
from kbgraph.store.elastic.cluster import Cluster, connect
from kbgraph.store.elastic.hits import fuse_hits, shape_doc, source_doc
from kbgraph.store.elastic.indices import (
    VECTOR_RE, definition_for, index_body, load_index_body, vector_fields, vector_mapping,
)
from kbgraph.store.elastic.listing import deep_listing
from kbgraph.store.elastic.queries import (
    MAX_NUM_CANDIDATES, MAX_RESULT_WINDOW, PIT_KEEP_ALIVE, aggregation_search, build_filter, checked_kb,
    checked_kbs, knn_search, listing_search, mget_request, only_ids, scan_search, similarity_search, source_spec,
    text_search,
)
from kbgraph.store.elastic.tenants import TenantIndices

MGET_BATCH = 1000


class ElasticStore(DocStore):
    """See the package docstring. Requests go through ``self._cluster`` (cluster.py)."""

    engine = "elasticsearch"

    def __init__(self, client: Elasticsearch, url: str, *, index_prefix: str = "kbgraph_", shards: int = 1,
                 replicas: int = 0, refresh_interval: str = "1s", bulk_bytes: int = 5_000_000,
                 bulk_chunk_docs: int = 500, bulk_retries: int = 3, bulk_backoff: float = 1.0,
                 query_timeout: float | None = None) -> None:
        self._cluster = Cluster(client, url, query_timeout=query_timeout)
        self._prefix = index_prefix
        self._template = load_index_body()
        self._body = index_body(self._template, shards, replicas, refresh_interval)
        self._bulk_bytes = bulk_bytes
        self._bulk_chunk_docs = bulk_chunk_docs
        self._bulk_retries = bulk_retries
        self._bulk_backoff = bulk_backoff
        self._vectors: dict[str, set[str]] = {}  # index -> vector fields known to be mapped
        self.tenants = TenantIndices(self._cluster, index_prefix, self._definition)
        self._cluster.forget = self._forget

    @classmethod
    def from_settings(cls, settings: Settings) -> "ElasticStore":
        # the request timeout (es_request_timeout) is the client's, set by connect()
        return cls(connect(settings), settings.es_url, index_prefix=settings.es_index_prefix,
                   shards=settings.es_shards, replicas=settings.es_replicas,
                   refresh_interval=settings.es_refresh_interval, bulk_bytes=settings.es_bulk_bytes,
                   query_timeout=settings.es_query_timeout)

    @property
    def _client(self) -> Elasticsearch:
        """The ``elasticsearch`` client (requests go through ``self._cluster``)."""
        return self._cluster.client

    # -- indices -----------------------------------------------------------------------------

    def index_for(self, tenant_id: str) -> str:
        """The tenant's alias: every read and write goes there (tenants.py, admin.py)."""
        return self.tenants.alias(tenant_id)

    def _definition(self) -> dict[str, Any]:
        """The index definition for this cluster (see indices.definition_for)."""
        return definition_for(self._body, self._cluster.version())

    def _forget(self, alias: str) -> None:
        """The cluster says the alias is gone (dropped by another process): what this store knew of
        it is forgotten, and the next write creates the tenant's index again."""
        self.tenants.forget(alias)
        self._vectors.pop(alias, None)

    def ensure_index(self, tenant_id: str) -> None:
        """The tenant's alias and index exist (created, or an older kbgraph's index adopted: tenants.py)."""
        self.tenants.ensure(tenant_id)

    def drop_index(self, tenant_id: str) -> None:
        self._vectors.pop(self.index_for(tenant_id), None)
        self.tenants.drop(tenant_id)

    def index_exists(self, tenant_id: str) -> bool:
        return self.tenants.exists(tenant_id)

    def refresh(self, tenant_id: str) -> None:
        self._cluster.refresh(self.index_for(tenant_id))

    def _ensure_vectors(self, index: str, docs: Iterable[Mapping[str, Any]]) -> None:
        """Map each new q_<dims>_vec field with explicit dims before the first write of it."""
        known = self._vectors.setdefault(index, set())
        for name, dims in vector_fields(docs).items():
            if name not in known:
                self._cluster.put_mapping(index, name, vector_mapping(self._template, dims))
                known.add(name)

    def _vector_mapped(self, index: str, name: str) -> bool:
        if name in self._vectors.get(index, set()):
            return True
        mapped = self._cluster.field_mapped(index, name)
        if mapped:
            self._vectors.setdefault(index, set()).add(name)
        return mapped

    # -- writes ------------------------------------------------------------------------------

    def _bulk(self, what: str, index: str, actions: list[dict[str, Any]],
              refresh: bool) -> list[tuple[bool, str, dict[str, Any]]]:
        """The actions sent in chunks of this store's sizes (see Cluster.bulk)."""
        return self._cluster.bulk(what, index, actions, refresh, chunk_docs=self._bulk_chunk_docs,
                                  max_bytes=self._bulk_bytes, retries=self._bulk_retries,
                                  backoff=self._bulk_backoff)

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
            raise StoreError(f"Elasticsearch at {self._cluster.url}: {len(failed) + len(bad)} of {len(docs)} documents "
                             f"were not written to {index!r}: " + "; ".join(reasons))
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
            raise StoreError(f"Elasticsearch at {self._cluster.url}: {len(failed)} documents were not {what} in "
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
            answer = self._cluster.mget(index, **mget_request(wanted[start:start + MGET_BATCH], fields))
            if answer is None:
                return []
            for item in answer["docs"]:
                source = item.get("_source")
                if item.get("found") and source is not None and source.get("kb_id") in allowed:
                    found[item["_id"]] = source_doc(source, item["_id"], fields)
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
            asked = text_search(query, request.text, request.candidates, source)
            if asked is not None:
                answer = self._cluster.search("text search", index, **asked)
                text_hits = [] if answer is None else list(answer["hits"]["hits"])
        vector_hits: list[dict[str, Any]] = []
        vector = request.vector
        if vector is not None and vector.vector is not None and len(vector.vector) \
                and any(float(x) != 0.0 for x in vector.vector) and self._vector_mapped(index, vector.field):
            asked = knn_search(vector.field, vector.vector, request.candidates, query, source)
            answer = self._cluster.search("vector search", index, **asked)
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
            asked = similarity_search(field_name, vector, query, batch)
            answer = self._cluster.search("vector scores", index, **asked)
            if answer is not None:
                found += answer["hits"]["hits"]
        return found

    def _list(self, index: str, query: dict[str, Any], request: SearchRequest) -> SearchResult:
        """Neither text nor vector: a filtered listing in field order, then id (past the result
        window: a walk in a point in time, listing.py)."""
        if request.offset < 0 or request.limit < 0:
            raise StoreError("offset and limit must be >= 0")
        if request.offset + request.limit > MAX_RESULT_WINDOW:
            return deep_listing(self._cluster, index, query, request)
        answer = self._cluster.search("search", index, **listing_search(query, request))
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
        opened = self._cluster.open_point_in_time(index, PIT_KEEP_ALIVE)
        if opened is None:
            return
        pit_id: str = opened["id"]
        query = build_filter(kb_ids, where)
        source = source_spec(fields)
        search_after: list[Any] | None = None
        try:
            while True:
                answer = self._cluster.search_point_in_time(
                    "scan", index, **scan_search(pit_id, query, size, source, search_after))
                pit_id = answer.get("pit_id", pit_id)
                hits = answer["hits"]["hits"]
                for h in hits:
                    yield source_doc(h.get("_source") or {}, h["_id"], fields)
                if len(hits) < size:
                    return
                search_after = hits[-1]["sort"]
        finally:
            self._cluster.close_point_in_time(pit_id)

    def count(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = ()) -> int:
        checked_kbs(kb_ids)
        answer = self._cluster.count(self.index_for(tenant_id), build_filter(kb_ids, where))
        return 0 if answer is None else int(answer["count"])

    def aggregate(self, tenant_id: str, kb_ids: Sequence[str], field_name: str,
                  where: Sequence[Condition] = (), size: int = 100) -> list[tuple[Any, int]]:
        checked_kbs(kb_ids)
        if size <= 0:
            return []
        answer = self._cluster.search("terms aggregation", self.index_for(tenant_id),
                                      **aggregation_search(build_filter(kb_ids, where), field_name, size))
        if answer is None:
            return []
        return [(b["key"], int(b["doc_count"])) for b in answer["aggregations"]["values"]["buckets"]]

    def close(self) -> None:
        self._cluster.close()


__all__ = ["ElasticStore"]
