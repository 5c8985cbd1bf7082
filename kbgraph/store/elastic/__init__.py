"""The Elasticsearch DocStore: one index per tenant behind an alias, scoring as ``kbgraph.store.base``
defines it; on one node or a cluster of many (docs/cluster.md).

Request bodies are built by small pure functions (queries.py, indices.py, bulk.py; unit-tested in
tests/unit/test_elastic_requests.py against what goes over the wire); ``ElasticStore`` (store.py)
chooses the requests an operation needs, and ``Cluster`` (cluster.py), the one place that talks to
the cluster, sends them, checks every answer and turns failures into ``StoreError`` /
``StoreUnavailable``.

Scores: a text query and a vector query are two separate requests, so the two scores never mix
inside Elasticsearch. ``term_score`` is each text hit's ``_score`` over the best ``_score`` of
the text window; ``vector_score`` is the cosine between the query vector and the stored vector,
read back from the kNN ``_score`` (for ``cosine`` similarity ES scores ``(1 + cosine) / 2``): text
hits the kNN window missed get theirs from a second kNN request restricted to their ids. Vectors
never travel back for scoring, so scores survive Elasticsearch >= 9.2, which leaves vectors out of
``_source``. Fusion, threshold, order and paging are then done in Python with ``base.fuse``, exactly
as the embedded store does. BM25 itself is Lucene's, whose document lengths are stored lossily
(one byte per field) and whose statistics count the old copies of rewritten rows until merges drop
them (kbgraph.store.base), so term scores agree with the embedded store's within a tolerance, not
bit for bit.

Deletion and partial update by filter scan the matching ids with a point in time and send bulk
``delete`` / ``update`` actions: they work on any cluster (``_delete_by_query`` and
``_update_by_query`` live in the reindex module, which not every deployment has) and see every
write made before them (the index is refreshed first).

Needs Elasticsearch 8.11 or later (``dense_vector`` without ``dims`` in the dynamic template).

The package, one file per concern:

- store.py: ``ElasticStore``, the DocStore operations;
- cluster.py: ``Cluster``, every request sent and its answer checked; ``connect`` makes the client;
- queries.py: filters, text and kNN queries, sorts, aggregations and each search request's arguments;
- indices.py: index and alias names, the index definition, vector mappings;
- tenants.py: a tenant's alias and index created, adopted (an index made before aliases) and dropped;
- listing.py: listings past the result window (a point in time and ``search_after``);
- admin.py and copier.py: a tenant moved to a new index while in use, replicas changed, index states;
- bulk.py: values cleaned for JSON, bulk actions, reports of failed items;
- hits.py: text and kNN hits fused with ``base.fuse``, sources shaped for callers.
"""

from kbgraph.store.elastic.store import ElasticStore

__all__ = ["ElasticStore"]
