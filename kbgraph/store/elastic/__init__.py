"""The Elasticsearch DocStore: one index per tenant behind an alias, scoring as ``kbgraph.store.base``
defines it; on one node or a cluster of many (docs/cluster.md).

Request bodies are built by small pure functions (queries.py, indices.py, bulk.py; unit-tested in
tests/unit/test_elastic_requests.py against what goes over the wire); ``ElasticStore`` (store.py)
chooses the requests an operation needs, and ``Cluster`` (cluster.py), the one place that talks to
the cluster, sends them, checks every answer and turns failures into ``StoreError`` /
``StoreUnavailable``.

Scores: a text query and a vector query are two separate searches, so the two scores never mix
inside Elasticsearch. ``term_score`` is each text hit's ``_score`` over the best ``_score`` of
the text window; ``vector_score`` is the cosine between the query vector and the stored vector,
read back from the kNN ``_score`` (for ``cosine`` similarity ES scores ``(1 + cosine) / 2``): text
hits the kNN window missed get theirs from a kNN search restricted to their ids. Vectors
never travel back for scoring, so scores survive Elasticsearch >= 9.2, which leaves vectors out of
``_source``. Fusion, threshold, order and paging are then done in Python with ``base.fuse``, exactly
as the embedded store does. BM25 itself is Lucene's, whose document lengths are stored lossily
(one byte per field) and whose statistics count the old copies of rewritten rows until merges drop
them (kbgraph.store.base), so term scores agree with the embedded store's within a tolerance, not
bit for bit.

Round trips (scored.py): the searches of a batch (``search_many``; ``search`` is a batch of one)
take two requests, whatever the batch holds: one ``_msearch`` with every text and kNN half, ids and
scores only (no stored field is read: the ids come from doc values); one ``_msearch`` with the
cosines of the text hits the kNN windows missed and the rows of the candidates that can reach each
page; a third, a realtime ``mget``, only for the pages whose rows could not be told before their
cosines (a window of cosines too close together to bound which candidates reach the page). The listings of a batch (neither text nor vector) within the result window go in one
``_msearch`` (listing.py), and several reads by id in one ``mget`` (``get_many``). Rows carry vectors, so every request and answer is JSON by orjson (json_codec.py), vectors
go out as float32 with the fewest digits, and rows are read as whole sources (the node's source
filtering parses every vector to leave it out) with vectors dropped in Python.

Visibility (the DocStore contract): a search sees refreshed rows only. The store remembers the
indices it wrote to without a refresh and refreshes one before its next read of it (once), so its
reads see its writes; ``refresh=True`` is one refresh after the whole bulk write. Deletion and
partial update act on every row written before them, by any writer: named ids are searched for
and any other filter scanned, after a refresh, then bulk ``delete`` / ``update`` actions are sent:
they work on any cluster (``_delete_by_query`` and ``_update_by_query`` live in the reindex module,
which not every deployment has). Scans page by ``search_after`` on ``id`` (unique in an index),
with no point in time to open and close.

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
- scored.py: the scored searches of a batch, in two round trips (three where a page waits for its cosines);
- hits.py: text and kNN hits fused with ``base.fuse``, sources shaped for callers;
- json_codec.py: orjson for every request and answer.
"""

from kbgraph.store.elastic.store import ElasticStore

__all__ = ["ElasticStore"]
