"""Which of a store's own writes its searches can see: a search reads refreshed documents only, and a
store must read what it wrote (DocStore's contract), so a read after an unrefreshed write refreshes
the index first, and only then.

A refresh covers the writes acknowledged before it was sent, and covers them only once it has
answered. Threads share one store (a merge's scan while another thread's rows are written, and a
refresh phase's writes on a thread of their own): a read must not take a refresh that another
thread has sent but the cluster has not finished for one that covers its writes. So writes are
counted, each refresh notes the count when it is sent and, once answered, marks that count as
seen, and a read refreshes unless every write it could have made is seen. (Forgetting the index
when a refresh was sent let a concurrent scan run before that refresh finished and miss a merge's
mentions: entities missing from the graph, seen in the cluster drills when a slow node stretched
the refresh.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class OwnWrites:
    """Per index: unrefreshed writes acknowledged, and how many of them a finished refresh covers."""

    def __init__(self, refresh: Callable[[str], None]) -> None:
        self._refresh = refresh
        self._lock = threading.Lock()
        self._written: dict[str, int] = {}
        self._seen: dict[str, int] = {}

    def wrote(self, index: str) -> None:
        """An unrefreshed write to ``index`` was acknowledged (or may have been, when it failed)."""
        with self._lock:
            self._written[index] = self._written.get(index, 0) + 1

    def refresh(self, index: str) -> None:
        """Refresh ``index``: every write acknowledged before now is seen once this returns."""
        with self._lock:
            covered = self._written.get(index, 0)
        self._refresh(index)
        with self._lock:
            self._seen[index] = max(self._seen.get(index, 0), covered)

    def see(self, index: str) -> None:
        """Before a read: refresh ``index`` unless a finished refresh covers every write so far."""
        with self._lock:
            if self._seen.get(index, 0) >= self._written.get(index, 0):
                return
        self.refresh(index)
