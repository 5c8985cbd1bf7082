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

A merge drops a dead copy only once neither a retention lease nor the shard's last commit holds
it: a shard keeps its recent operations (soft deletes) for its copies' recoveries, from its last
commit's checkpoint on, and the node moves its leases past them every 30 seconds
(``index.soft_deletes.retention_lease.sync_interval``, not an index setting). Merged right after
the refresh's last writes, MuSiQue's index became one segment holding its 37k dead copies (28%),
which no merge would touch again. So a merge they hold back is not asked: the index is committed
(a flush), and the merge asked again once the leases have moved (``LaterMerges``, in a process that
lives that long; else at the next indexing run's end), for as long as the index is not one segment
per shard without a dead copy.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from elasticsearch.exceptions import GeneralAvailabilityWarning

from kbgraph.store.base import StoreError
from kbgraph.store.elastic.cluster import Cluster

log = logging.getLogger(__name__)

# above this share of dead rows an index is merged (the node's own merge policy tolerates 20%)
DEAD_SHARE = 0.2
# an index at least this large (its primaries, dead rows included) is left to the node's merges
MAX_MERGED_BYTES = 4 << 30
# the node moves its retention leases every 30 s: a merge held by them is asked again after this long,
# this many times at most (writes may go on meanwhile)
LEASE_RENEWAL_S = 35.0
LEASE_ATTEMPTS = 4

# what ``compact`` did: asked the node to merge, held back by retention leases, or left it alone
Verdict = Literal["asked", "held", "left"]


@dataclass(frozen=True)
class IndexWear:
    """An index's primaries: live rows, dead copies not merged away yet, bytes on disk, segments."""

    live: int
    dead: int
    size_bytes: int
    segments: int
    merging: int  # merges running now (the node's own or a force merge)
    names: tuple[str, ...] = ()  # the name asked (an alias) and the index behind it
    # operations the shards' retention leases or last commits still hold: a merge keeps their dead copies
    retained: int = 0
    uncommitted: int = 0  # operations since the shards' last commits (flushes)
    shards: int = 1  # primary shards

    @property
    def dead_share(self) -> float:
        return self.dead / max(1, self.live + self.dead)

    def worn(self) -> bool:
        """Enough dead copies to merge, small enough to merge into one segment."""
        return self.dead_share > DEAD_SHARE and self.size_bytes < MAX_MERGED_BYTES

    def unmerged(self) -> bool:
        """Anything a merge into one segment per shard would still change (an index found worn
        stays due while the node's own merges take some of its dead copies: left at 11% dead in
        14 segments, every kNN search walked 14 graphs), small enough to merge into one segment."""
        return (self.dead > 0 or self.segments > self.shards) and self.size_bytes < MAX_MERGED_BYTES

    def held_back(self) -> bool:
        """Whether the retention leases or the last commits hold more than half the dead copies (a
        merge now would keep them)."""
        return self.dead > 0 and self.retained * 2 > self.dead


def index_wear(cluster: Cluster, index: str) -> IndexWear | None:
    """``index``'s wear (None: no such index yet)."""
    stats = cluster.read("reading the index's statistics", index, cluster.client.indices.stats,
                         index=index, metric="docs,store,segments,merge", level="shards")
    if stats is None:
        return None
    primaries = stats["_all"]["primaries"]
    docs, store = primaries.get("docs") or {}, primaries.get("store") or {}
    retained, uncommitted = retained_operations(stats)
    shards = sum(len(body.get("shards") or {}) for body in (stats.get("indices") or {}).values())
    return IndexWear(live=int(docs.get("count", 0)), dead=int(docs.get("deleted", 0)),
                     size_bytes=int(store.get("size_in_bytes", 0)),
                     segments=int((primaries.get("segments") or {}).get("count", 0)),
                     merging=int((primaries.get("merges") or {}).get("current", 0)),
                     names=(index, *sorted(stats.get("indices") or {})), retained=retained, uncommitted=uncommitted,
                     shards=max(1, shards))


def retained_operations(stats: dict) -> tuple[int, int]:
    """Over the primaries of a shard-level stats answer: the operations a merge must keep (their
    deleted copies survive it), those past the lowest sequence number a retention lease of the shard
    or its last commit (a flush) still retains; and the operations past the last commit."""
    held = uncommitted = 0
    for index in (stats.get("indices") or {}).values():
        for copies in (index.get("shards") or {}).values():
            for copy in copies:
                if not (copy.get("routing") or {}).get("primary"):
                    continue
                newest = int((copy.get("seq_no") or {}).get("max_seq_no", -1))
                committed = int(((copy.get("commit") or {}).get("user_data") or {}).get("local_checkpoint", newest))
                leases = (copy.get("retention_leases") or {}).get("leases") or []
                kept_from = min([committed + 1, *(int(lease["retaining_seq_no"]) for lease in leases)])
                held += max(0, newest + 1 - kept_from)
                uncommitted += max(0, newest - committed)
    return held, uncommitted


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


def compact(cluster: Cluster, index: str, due: bool = False) -> Verdict:
    """Ask the node to merge ``index`` into one segment when its dead rows call for it and a merge
    would drop them (see the module's docstring): "asked"; "held" when the retention leases or the
    last commit still hold them (committed now; ask again once the leases have moved:
    ``LaterMerges``); else "left". ``due``: found worn before, merged while still unmerged."""
    wear = index_wear(cluster, index)
    if wear is None or not (wear.unmerged() if due else wear.worn()) or force_merging(cluster, wear.names):
        return "left"
    if wear.held_back():
        if wear.uncommitted:  # a commit now, so that only the leases hold them when asked again
            cluster.call("committing the index", index, cluster.client.indices.flush, index=index)
        return "held"
    cluster.call("merging the index's segments", index, cluster.client.indices.forcemerge, index=index,
                 max_num_segments=1, wait_for_completion=False)
    return "asked"


class LaterMerges:
    """``compact`` of an index, asked again after the node's next lease renewals while its leases
    hold the dead copies (on a daemon timer: a process that ends first leaves it to the next
    indexing run's end)."""

    def __init__(self, cluster: Cluster, delay: float = LEASE_RENEWAL_S, attempts: int = LEASE_ATTEMPTS) -> None:
        self._cluster = cluster
        self._delay = delay
        self._attempts = attempts
        self._timers: dict[str, threading.Timer] = {}
        self._lock = threading.Lock()

    def compact(self, index: str) -> Verdict:
        """``compact(index)`` now, and again later while held."""
        verdict = compact(self._cluster, index)
        if verdict == "held":
            self._again(index, self._attempts)
        return verdict

    def _again(self, index: str, attempts: int) -> None:
        timer = threading.Timer(self._delay, self._retry, args=(index, attempts - 1))
        timer.daemon = True
        timer.name = "kbgraph-es-merge-later"
        with self._lock:
            old = self._timers.pop(index, None)
            if old is not None:
                old.cancel()
            self._timers[index] = timer
        timer.start()

    def _retry(self, index: str, attempts: int) -> None:
        try:
            verdict = compact(self._cluster, index, due=True)
        except StoreError as exc:  # a later indexing run's end asks again
            log.warning("merging %s's replaced rows away: %s", index, exc)
            return
        if verdict == "held" and attempts > 0:
            self._again(index, attempts)

    def pending(self) -> list[str]:
        """The indices whose merge is to be asked again."""
        with self._lock:
            return [index for index, timer in self._timers.items() if timer.is_alive()]

    def close(self) -> None:
        with self._lock:
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()
