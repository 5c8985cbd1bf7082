"""Rows of one index brought into another, for a tenant move (admin.py): the rows written since
a point noted earlier, found by sequence number, and the rows the source deleted meanwhile, found by
comparing both indices' ids range by range.

A deleted row leaves nothing a search can find by sequence number, so after the copy the target may
hold rows the source no longer has. Walking every id of both indices would find them, but a move does
this while writes are blocked, and at 100,000 rows that held writes for 30 s on the busy test
machine; instead ~1,024 ids sampled from the source cut the id space into ranges of similar size, one
request per index counts the rows of every range (a ``filters`` aggregation of ``range`` queries),
and only the ranges whose counts differ are walked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from kbgraph.store.base import StoreError
from kbgraph.store.elastic.queries import MAX_RESULT_WINDOW

if TYPE_CHECKING:
    from kbgraph.store.elastic.store import ElasticStore

# rows per page of a copy walk (rows carry their vectors: 1,000 rows of 1,024 floats ~ 10 MB)
COPY_PAGE = 1000
# ids sampled to cut the id space into ranges whose row counts are compared
ID_RANGES = 1024

Say = Callable[[str], None]


class IndexCopier:
    """Requests of one move; the store gives the cluster and the bulk sizes."""

    def __init__(self, store: "ElasticStore", say: Say) -> None:
        self.store, self.cluster, self.say = store, store._cluster, say

    def settings_of(self, index: str) -> dict[str, Any]:
        answer = self.cluster.call("reading the settings", index, self.cluster.client.indices.get_settings,
                                   index=index, flat_settings=True)
        return dict(next(iter(answer.body.values()))["settings"])

    def put_settings(self, index: str, settings: dict[str, Any]) -> None:
        self.cluster.call("changing the settings", index, self.cluster.client.indices.put_settings, index=index,
                          settings=settings)

    def checkpoints(self, index: str) -> dict[int, int]:
        """Per shard, the global checkpoint: every write with a sequence number up to it is on
        every copy of the shard (the lowest any copy reports)."""
        answer = self.cluster.call("reading the shard checkpoints", index, self.cluster.client.indices.stats,
                                   index=index, level="shards", metric="docs")
        marks: dict[int, int] = {}
        for shard, copies in next(iter(answer.body["indices"].values()))["shards"].items():
            values = [int(c["seq_no"]["global_checkpoint"]) for c in copies if c.get("seq_no")]
            marks[int(shard)] = min(values) if values else -1
        return marks

    def changed_rows(self, index: str, shard: int, after_seq_no: int) -> Iterator[dict[str, Any]]:
        """Rows of one shard whose last write came after ``after_seq_no``, in sequence-number order
        (a row written again during the walk moves ahead and is met again: the copy keeps its last)."""
        after: list[Any] | None = None
        while True:
            kwargs: dict[str, Any] = {"query": {"range": {"_seq_no": {"gt": after_seq_no}}},
                                      "sort": [{"_seq_no": "asc"}], "size": COPY_PAGE, "preference": f"_shards:{shard}",
                                      "track_total_hits": False}
            if after is not None:
                kwargs["search_after"] = after
            answer = self.cluster.search("reading rows to copy", index, **kwargs)
            hits = [] if answer is None else answer["hits"]["hits"]
            yield from hits
            if len(hits) < COPY_PAGE:
                return
            after = hits[-1]["sort"]

    def write(self, what: str, target: str, actions: list[dict[str, Any]]) -> int:
        store = self.store
        results = self.cluster.bulk(what, target, actions, False, chunk_docs=store._bulk_chunk_docs,
                                    max_bytes=store._bulk_bytes, retries=store._bulk_retries,
                                    backoff=store._bulk_backoff, require_alias=False)
        failed = [(doc_id, info) for ok, doc_id, info in results if not ok and info.get("status") != 404]
        if failed:
            doc_id, info = failed[0]
            raise StoreError(f"{what} into {target!r} failed for {len(failed)} rows, e.g. {doc_id}: {info.get('error')}")
        return len(actions)

    def copy_changes(self, source: str, target: str, marks: dict[int, int] | None, shards: int) -> int:
        """Copy every row written after ``marks`` (None: every row) from source to target."""
        copied = 0
        for shard in range(shards):
            batch: list[dict[str, Any]] = []
            for hit in self.changed_rows(source, shard, -1 if marks is None else marks.get(shard, -1)):
                batch.append({"_op_type": "index", "_index": target, "_id": hit["_id"], "_source": hit["_source"]})
                if len(batch) >= COPY_PAGE:
                    copied += self.write("copying rows", target, batch)
                    batch = []
            if batch:
                copied += self.write("copying rows", target, batch)
        return copied

    def ids(self, index: str, query: dict[str, Any]) -> Iterator[str]:
        """The ids of the rows ``query`` matches, in order (read as sort values, without the rows)."""
        after: list[Any] | None = None
        while True:
            kwargs: dict[str, Any] = {"query": query, "sort": [{"id": "asc"}], "size": MAX_RESULT_WINDOW,
                                      "source": False, "track_total_hits": False}
            if after is not None:
                kwargs["search_after"] = after
            answer = self.cluster.search("reading row ids", index, **kwargs)
            hits = [] if answer is None else answer["hits"]["hits"]
            for hit in hits:
                yield hit["_id"]
            if len(hits) < MAX_RESULT_WINDOW:
                return
            after = hits[-1]["sort"]

    def id_ranges(self, index: str) -> dict[str, dict[str, Any]]:
        """Queries for ranges of ids of similar size: bounds sampled at random from the index."""
        answer = self.cluster.search(
            "sampling row ids", index, size=ID_RANGES, source=False, track_total_hits=False,
            query={"function_score": {"query": {"match_all": {}}, "random_score": {"seed": 1, "field": "_seq_no"}}})
        bounds = sorted({hit["_id"] for hit in ([] if answer is None else answer["hits"]["hits"])})
        edges: list[str | None] = [None, *bounds, None]
        ranges: dict[str, dict[str, Any]] = {}
        for k, (low, high) in enumerate(zip(edges, edges[1:])):
            limits = {**({"gte": low} if low is not None else {}), **({"lt": high} if high is not None else {})}
            ranges[str(k)] = {"range": {"id": limits}} if limits else {"match_all": {}}
        return ranges

    def range_counts(self, index: str, ranges: dict[str, dict[str, Any]]) -> dict[str, int]:
        answer = self.cluster.search("counting rows by id range", index, size=0, track_total_hits=False,
                                     query={"match_all": {}}, aggs={"ranges": {"filters": {"filters": ranges}}})
        buckets = {} if answer is None else answer["aggregations"]["ranges"]["buckets"]
        return {key: int(bucket["doc_count"]) for key, bucket in buckets.items()}

    def extras(self, source: str, target: str) -> list[str]:
        """Ids the target has and the source does not (see the module docstring). While the source
        is written some may be missed (a deletion and an uncopied row in one range), never invented:
        with writes blocked and every row copied, the target holds the source's rows and the extras,
        so a range with extras always counts more."""
        self.cluster.refresh(source)
        self.cluster.refresh(target)
        ranges = self.id_ranges(source)
        have, want = self.range_counts(target, ranges), self.range_counts(source, ranges)
        differing = [query for key, query in ranges.items() if have.get(key, 0) != want.get(key, 0)]
        if not differing:
            return []
        query = {"bool": {"should": differing, "minimum_should_match": 1}}  # the ranges walked together
        found: list[str] = []
        kept = self.ids(source, query)
        next_kept = next(kept, None)
        for row in self.ids(target, query):
            while next_kept is not None and next_kept < row:
                next_kept = next(kept, None)
            if row != next_kept:
                found.append(row)
        return found

    def remove_extras(self, source: str, target: str) -> int:
        """Delete from the target the rows the source no longer has."""
        extras = self.extras(source, target)
        for start in range(0, len(extras), COPY_PAGE):
            self.write("deleting rows", target, [{"_op_type": "delete", "_index": target, "_id": row}
                                                 for row in extras[start:start + COPY_PAGE]])
        return len(extras)

    def rows(self, index: str) -> int:
        self.cluster.refresh(index)
        answer = self.cluster.count(index, {"match_all": {}})
        return 0 if answer is None else int(answer["count"])

    def write_block(self, index: str, on: bool) -> None:
        if on:
            self.cluster.call("blocking writes", index, self.cluster.client.indices.add_block, index=index,
                              block="write")
        else:
            self.put_settings(index, {"index.blocks.write": None})
