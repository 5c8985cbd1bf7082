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
from kbgraph.store.base import Condition, Doc, DocStore, SearchRequest, SearchResult, StoreError, none_of
from kbgraph.store.elastic.bulk import (
    _describe_failures, bulk_delete_actions, bulk_index_actions, bulk_update_actions, clean_values, prepare_doc,
)
from kbgraph.store.elastic.cluster import Cluster, connect
from kbgraph.store.elastic.compaction import LaterMerges
from kbgraph.store.elastic.hits import source_doc
from kbgraph.store.elastic.indices import (
    definition_for, index_body, load_index_body, vector_fields, vector_mapping,
)
from kbgraph.store.elastic.json_codec import use_orjson
from kbgraph.store.elastic.listing import deep_listing, in_window, window_listings
from kbgraph.store.elastic.queries import (
    MAX_NUM_CANDIDATES, MAX_RESULT_WINDOW, aggregation_search, build_filter, checked_kb, checked_kbs, hit_id, ids_search,
    mget_reads, mget_request, msearch_lines, only_ids, scan_page, scan_source, similarity_search,
)
from kbgraph.store.elastic.scored import HIT_PATHS, scored_searches
from kbgraph.store.elastic.tenants import TenantIndices
from kbgraph.store.elastic.visibility import OwnWrites
from kbgraph.utils.beside import side_by_side
from kbgraph.utils.read_ahead import read_ahead

MGET_BATCH = 1000
# bulk requests of one write sent side by side: the node indexes a bulk request on one thread, and
# a row with a vector costs it ~0.4 ms (HNSW insertion), so a refresh's rewrite of 11k entities
# waited on one core of the node while the others idled
BULK_STREAMS = 2


class ElasticStore(DocStore):
    """See the package docstring. Requests go through ``self._cluster`` (cluster.py)."""

    engine = "elasticsearch"
    remote = True

    def __init__(self, client: Elasticsearch, url: str, *, index_prefix: str = "kbgraph_", shards: int = 1,
                 replicas: int = 0, refresh_interval: str = "1s", bulk_bytes: int = 5_000_000,
                 bulk_chunk_docs: int = 500, bulk_retries: int = 3, bulk_backoff: float = 1.0,
                 query_timeout: float | None = None) -> None:
        use_orjson(client)  # rows carry vectors: orjson writes and reads them ~6x faster (json_codec.py)
        self._cluster = Cluster(client, url, query_timeout=query_timeout)
        self._prefix = index_prefix
        self._template = load_index_body()
        self._body = index_body(self._template, shards, replicas, refresh_interval)
        self._bulk_bytes = bulk_bytes
        self._bulk_chunk_docs = bulk_chunk_docs
        self._bulk_retries = bulk_retries
        self._bulk_backoff = bulk_backoff
        # this store's unrefreshed writes: its next read of such an index refreshes it first (once),
        # so it reads its own writes (see DocStore's contract and visibility.py)
        self._own_writes = OwnWrites(self._cluster.refresh)
        self._vectors: dict[str, set[str]] = {}  # index -> vector fields known to be mapped
        self.tenants = TenantIndices(self._cluster, index_prefix, self._definition)
        self._cluster.forget = self._forget
        self._merges = LaterMerges(self._cluster)

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
        self._own_writes.refresh(self.index_for(tenant_id))

    def prepare_search(self, tenant_id: str, kb_ids: Sequence[str],
                       text_fields: Mapping[str | None, Sequence[str]]) -> None:
        """The node indexes as it writes; what it has not done is merge away the rows a graph
        refresh replaced, which every kNN search would walk: asked here, or once the node's
        retention leases let go of them (compaction.py)."""
        self._merges.compact(self.index_for(tenant_id))

    def _see_own_writes(self, index: str) -> None:
        """Refresh ``index`` if this store wrote to it unrefreshed: a search sees refreshed documents
        only, and a read after a write must see it (as on the embedded store)."""
        self._own_writes.see(index)

    def _written(self, index: str, refresh: bool) -> None:
        """After a write: visible to every reader at once (``refresh``), else to this store's reads
        (refreshed before the next one) and to others at the next scheduled refresh."""
        self._own_writes.wrote(index)
        if refresh:
            self._own_writes.refresh(index)

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
        """The actions sent in chunks of this store's sizes (see Cluster.bulk), then one refresh when
        ``refresh``: refresh=wait_for on every chunk waited for the next scheduled refresh once per
        chunk (up to es_refresh_interval each; 0.5 s a write at 1s)."""
        if not actions:
            return []
        try:
            results = self._cluster.bulk(what, index, actions, False, chunk_docs=self._bulk_chunk_docs,
                                         max_bytes=self._bulk_bytes, retries=self._bulk_retries,
                                         backoff=self._bulk_backoff, streams=BULK_STREAMS)
        except BaseException:
            self._written(index, False)  # some chunks may have gone in
            raise
        self._written(index, refresh)
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
        owned = set(self._existing_ids(tenant_id, [kb_id], list(changes)))
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

    def _existing_ids(self, tenant_id: str, kb_ids: Sequence[str], ids: Sequence[str]) -> list[str]:
        """Which of ``ids`` are rows of these knowledge bases: a search for their ids (no stored field
        read), then a realtime get of those it did not find, which this store or another writer may
        have written unrefreshed (rarely any: a refresh first would cut a segment per call, and a
        refresh phase patches 4,096 rows a call right after the last)."""
        index = self.index_for(tenant_id)
        wanted = list(dict.fromkeys(ids))
        found: set[str] = set()
        for start in range(0, len(wanted), MAX_RESULT_WINDOW):
            answer = self._cluster.search("finding ids", index,
                                          **ids_search(kb_ids, wanted[start:start + MAX_RESULT_WINDOW]))
            found.update(hit_id(h) for h in ([] if answer is None else answer["hits"]["hits"]))
        unseen = [i for i in wanted if i not in found]
        if unseen:
            found.update(doc["id"] for doc in self.get(tenant_id, kb_ids, unseen, fields=[]))
        return [i for i in wanted if i in found]

    def _matching_ids(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition]) -> list[str]:
        """Ids of the documents a delete/update by filter acts on: every matching row written before,
        by any writer (a refresh first), named ids searched for, any other filter scanned."""
        index = self.index_for(tenant_id)
        named = only_ids(where)
        if named is not None:
            return self._existing_ids(tenant_id, kb_ids, named)
        self._own_writes.refresh(index)
        return [doc["id"] for doc in self._scan(tenant_id, kb_ids, where, [], MAX_RESULT_WINDOW)]

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

    def get_many(self, tenant_id: str, kb_ids: Sequence[str],
                 reads: Sequence[tuple[Sequence[str], Sequence[str] | None]]) -> list[list[Doc]]:
        """Every read's rows in one realtime multi-get (several for more than MGET_BATCH rows)."""
        allowed = set(checked_kbs(kb_ids))
        wanted = [(list(dict.fromkeys(ids)), fields) for ids, fields in reads]
        asked = [(doc_id, fields) for ids, fields in wanted for doc_id in ids]
        items: list[dict[str, Any]] = []
        index = self.index_for(tenant_id)
        for start in range(0, len(asked), MGET_BATCH):
            answer = self._cluster.mget(index, **mget_reads(asked[start:start + MGET_BATCH]))
            if answer is None:
                return [[] for _ in reads]
            items += answer["docs"]
        found = iter(items)
        out: list[list[Doc]] = []
        for ids, fields in wanted:
            docs = []
            for doc_id, item in zip(ids, found):
                source = item.get("_source")
                if item.get("found") and source is not None and source.get("kb_id") in allowed:
                    docs.append(source_doc(source, doc_id, fields))
            out.append(docs)
        return out

    def search(self, tenant_id: str, request: SearchRequest) -> SearchResult:
        return self.search_many(tenant_id, [request])[0]

    def search_many(self, tenant_id: str, requests: Sequence[SearchRequest]) -> list[SearchResult]:
        """Every scored request of the batch in two round trips (three where a page waits for its
        cosines: scored.py); every listing within the result window in one (listing.py), beside
        the scored requests' first; deeper ones a walk each."""
        for request in requests:
            checked_kbs(request.kb_ids)
            if request.text is None and request.vector is None and (request.offset < 0 or request.limit < 0):
                raise StoreError("offset and limit must be >= 0")
        if not requests:
            return []
        index = self.index_for(tenant_id)
        self._see_own_writes(index)
        scored = [r for r in requests if r.text is not None or r.vector is not None]
        listed = [(build_filter(r.kb_ids, r.where), r) for r in requests
                  if r.text is None and r.vector is None and in_window(r)]
        # the listings' round trip beside the scored searches' first, not after their last
        scored_found, listed_found = side_by_side(
            lambda: scored_searches(self._cluster, index, scored, lambda name: self._vector_mapped(index, name))
            if scored else [],
            lambda: window_listings(self._cluster, index, listed),
            concurrent=bool(scored and listed), name="kbgraph-es-listings")
        found, shallow = iter(scored_found), iter(listed_found)
        return [next(found) if r.text is not None or r.vector is not None else next(shallow) if in_window(r)
                else deep_listing(self._cluster, index, build_filter(r.kb_ids, r.where), r) for r in requests]

    def vector_cosines(self, tenant_id: str, kb_ids: Sequence[str], ids: Sequence[str], field_name: str,
                       unit_vector: Sequence[float]) -> dict[str, float]:
        """A kNN search restricted to the named rows (exact: the filter passes fewer rows than it
        asks for) scores each of them, in float32 as every vector search here: no vector leaves the
        node (a graph query's passage chains read ~80 chunk vectors, ~450 KB of JSON, before)."""
        checked_kbs(kb_ids)
        wanted = list(dict.fromkeys(ids))
        if not wanted or not any(float(x) != 0.0 for x in unit_vector):
            return {}
        index = self.index_for(tenant_id)
        if not self._vector_mapped(index, field_name):
            return {}
        self._see_own_writes(index)
        query = build_filter(kb_ids, [none_of("available_int", [0])])
        searches = [similarity_search(field_name, unit_vector, query, wanted[start:start + MAX_NUM_CANDIDATES])
                    for start in range(0, len(wanted), MAX_NUM_CANDIDATES)]
        scores: dict[str, float] = {}
        for answer in self._cluster.msearch("vector scores", index, msearch_lines(index, searches),
                                            filter_path=HIT_PATHS):
            for hit in (answer or {}).get("hits", {}).get("hits", []):
                scores[hit_id(hit)] = 2.0 * float(hit["_score"]) - 1.0  # a cosine kNN scores (1 + cosine) / 2
        return {i: scores[i] for i in wanted if i in scores}

    def scan(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = (),
             fields: Sequence[str] | None = None, batch_size: int = 1000) -> Iterator[Doc]:
        """Pages sorted on ``id``, each after the last id of the one before (queries.scan_page).

        A search sees refreshed documents only: an index this store wrote to since it last refreshed
        it is refreshed first, so a scan reads this store's earlier writes, as on the embedded store."""
        checked_kbs(kb_ids)
        self._see_own_writes(self.index_for(tenant_id))
        return self._scan(tenant_id, kb_ids, where, fields, batch_size)

    def _scan(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition],
              fields: Sequence[str] | None, batch_size: int) -> Iterator[Doc]:
        for hits in read_ahead(self._scan_pages(tenant_id, kb_ids, where, fields, batch_size)):
            for h in hits:  # an ids-only page has no _id (no stored field read): its sort value is the id
                yield source_doc(h.get("_source") or {}, h.get("_id") or h["sort"][0], fields)

    def _scan_pages(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition],
                    fields: Sequence[str] | None, batch_size: int) -> Iterator[list[dict[str, Any]]]:
        """The pages of a scan, one request each. Its rows' sources are filtered on the node (the
        vectors left out: a scan of every row would hand Python ~5 KB of vector JSON per row), and
        the next page is read while the caller works on this one (``_scan``), so that filtering
        overlaps the caller's work."""
        index = self.index_for(tenant_id)
        size = max(1, min(batch_size, MAX_RESULT_WINDOW))
        query = build_filter(kb_ids, where)
        source = scan_source(fields)
        search_after: list[Any] | None = None
        while True:
            answer = self._cluster.search("scan", index, **scan_page(query, size, source, search_after))
            hits = [] if answer is None else answer["hits"]["hits"]
            if hits:
                yield hits
            if len(hits) < size:
                return
            search_after = hits[-1]["sort"]

    def count(self, tenant_id: str, kb_ids: Sequence[str], where: Sequence[Condition] = ()) -> int:
        checked_kbs(kb_ids)
        self._see_own_writes(self.index_for(tenant_id))
        answer = self._cluster.count(self.index_for(tenant_id), build_filter(kb_ids, where))
        return 0 if answer is None else int(answer["count"])

    def aggregate(self, tenant_id: str, kb_ids: Sequence[str], field_name: str,
                  where: Sequence[Condition] = (), size: int = 100) -> list[tuple[Any, int]]:
        checked_kbs(kb_ids)
        if size <= 0:
            return []
        self._see_own_writes(self.index_for(tenant_id))
        answer = self._cluster.search("terms aggregation", self.index_for(tenant_id),
                                      **aggregation_search(build_filter(kb_ids, where), field_name, size))
        if answer is None:
            return []
        return [(b["key"], int(b["doc_count"])) for b in answer["aggregations"]["values"]["buckets"]]

    def close(self) -> None:
        self._merges.close()
        self._cluster.close()


__all__ = ["ElasticStore"]
