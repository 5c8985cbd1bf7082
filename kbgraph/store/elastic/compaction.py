"""Merging away the rows that writes replaced, once a graph refresh is done.

Elasticsearch replaces a row by marking its old copy deleted and writing a new one; the old copy
stays in its segment until a merge drops it, and the node merges only as new segments arrive. A
knowledge base's first indexing run writes its entities and relations as documents merge into the
graph, and again, with their vectors, at the graph refresh: on MuSiQue's 1,890 passages 40k of the
index's 136k rows were dead copies, in 14 segments, and no later write came to have them merged.
Every kNN search walks the HNSW graph of every segment, dead rows included: a kg query cost the node
50 ms of CPU against 37 ms once the index was one segment (p50 55-57 against 48-50 ms;
bench/README.md, "The session of 2026-11-30 (2)").

After a graph refresh (``DocStore.prepare_search``), an index whose dead rows exceed the share the
node's merge policy itself tolerates (``index.merge.policy.deletes_pct_allowed``, 20%) is merged
into one segment, if it is small enough to stay a segment the merge policy still merges (under
``max_merged_segment``, 5 GB: Elasticsearch warns that a force merge of a larger index that is
still written leaves a segment nothing merges again). The node merges on its own time
(``wait_for_completion=false``): the refresh does not wait, and no merge is asked while a force
merge of the index runs. The node's own merges do not hold it back: when a first indexing run's
refresh ends they are still running, and an index left alone then kept its 40k dead copies in 12
segments for good (kNN searches walked them all: replayed, a kg query's searches cost the node
113-143 ms of CPU, against 62-99 ms on merged indices; bench/README.md, "The session of
2026-12-02 (2)").
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from elasticsearch.exceptions import GeneralAvailabilityWarning

from kbgraph.store.elastic.cluster import Cluster

# above this share of dead rows an index is merged (the node's own merge policy tolerates 20%)
DEAD_SHARE = 0.2
# an index at least this large (its primaries, dead rows included) is left to the node's merges
MAX_MERGED_BYTES = 4 << 30


@dataclass(frozen=True)
class IndexWear:
    """An index's primaries: live rows, dead copies not merged away yet, bytes on disk, segments."""

    live: int
    dead: int
    size_bytes: int
    segments: int
    merging: int  # merges running now (the node's own or a force merge)
    names: tuple[str, ...] = ()  # the name asked (an alias) and the index behind it

    @property
    def dead_share(self) -> float:
        return self.dead / max(1, self.live + self.dead)

    def worn(self) -> bool:
        """Enough dead copies to merge, small enough to merge into one segment."""
        return self.dead_share > DEAD_SHARE and self.size_bytes < MAX_MERGED_BYTES


def index_wear(cluster: Cluster, index: str) -> IndexWear | None:
    """``index``'s wear (None: no such index yet)."""
    stats = cluster.read("reading the index's statistics", index, cluster.client.indices.stats,
                         index=index, metric="docs,store,segments,merge")
    if stats is None:
        return None
    primaries = stats["_all"]["primaries"]
    docs, store = primaries.get("docs") or {}, primaries.get("store") or {}
    return IndexWear(live=int(docs.get("count", 0)), dead=int(docs.get("deleted", 0)),
                     size_bytes=int(store.get("size_in_bytes", 0)),
                     segments=int((primaries.get("segments") or {}).get("count", 0)),
                     merging=int((primaries.get("merges") or {}).get("current", 0)),
                     names=(index, *sorted(stats.get("indices") or {})))


def force_merging(cluster: Cluster, names: Sequence[str]) -> bool:
    """Whether a force merge of the index known by ``names`` runs (the tasks API: its description
    names the indices as they were asked)."""
    with warnings.catch_warnings():  # the task list is "technical preview" to the client: it has served all of 8.x
        warnings.simplefilter("ignore", GeneralAvailabilityWarning)
        answer = cluster.call("listing the force merges", names[0], cluster.client.tasks.list,
                              actions="indices:admin/forcemerge", detailed=True)
    asked = {f"[{name}]" for name in names}
    return any(any(name in str(task.get("description", "")) for name in asked)
               for node in (answer.get("nodes") or {}).values() for task in (node.get("tasks") or {}).values())


def primary_shards(cluster: Cluster, index: str) -> int:
    answer = cluster.call("reading the index's settings", index, cluster.client.indices.get_settings,
                          index=index, name="index.number_of_shards")
    return sum(int(body["settings"]["index"]["number_of_shards"]) for body in answer.values())


def compact(cluster: Cluster, index: str) -> bool:
    """Ask the node to merge ``index`` into one segment when its dead rows call for it (see the
    module's docstring); whether it was asked."""
    wear = index_wear(cluster, index)
    # a shard already one segment is left alone: right after writes its dead copies may still be
    # kept for the shard's copies (soft deletes held by retention leases), and merging it again
    # would rewrite it with them
    if wear is None or not wear.worn() or wear.segments <= primary_shards(cluster, index) \
            or force_merging(cluster, wear.names):
        return False
    cluster.call("merging the index's segments", index, cluster.client.indices.forcemerge, index=index,
                 max_num_segments=1, wait_for_completion=False)
    return True
