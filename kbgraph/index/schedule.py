"""The scheduling between the refresh's summary pass and its community reports, when they run
beside each other (a remote model: all of them wait on the network).

``_SummaryWatch`` knows which rows the running summary pass has yet to finish and starts the work
waiting on some of them (a community's report) as soon as its own rows are in; ``_SummariesFirst``
leaves the summaries the model calls they still need, handing them to the reports one by one as
the summaries come in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future


class _SummaryWatch:
    """The rows a running summary pass has yet to finish, and the work waiting on some of them: a
    community's report goes to the model as soon as its own members are summarized, not once the
    whole pass is over (on a book, most reports need only the first wave of summaries)."""

    def __init__(self, pending: frozenset[str]) -> None:
        self.pending = pending
        self.future: Future | None = None
        self._left = set(pending)
        self._waiting: list[tuple[frozenset[str], Callable[[], None]]] = []
        self._each: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def waits(self, row_ids: Iterable[str]) -> frozenset[str]:
        """Those of ``row_ids`` the pass has to summarize."""
        return frozenset(row_ids) & self.pending

    def when_done(self, row_ids: frozenset[str], then: Callable[[], None]) -> None:
        """Call ``then`` once the pass is done with every row of ``row_ids`` (now, if it is)."""
        with self._lock:
            if row_ids & self._left:
                self._waiting.append((row_ids, then))
                return
        then()

    def on_each_row(self, then: Callable[[], None]) -> int:
        """Call ``then`` as each row still left is done; returns how many are left."""
        with self._lock:
            self._each.append(then)
            return len(self._left)

    def row_done(self, row_id: str) -> None:
        with self._lock:
            if row_id not in self._left:
                return
            self._left.discard(row_id)
            ready = self._take_ready()
            each = list(self._each)
        for then in each + ready:
            then()

    def close(self, _future: object = None) -> None:
        """The pass is over: rows it could not summarize keep their stand-ins, and nothing waits."""
        with self._lock:
            self._left.clear()
            ready = self._take_ready()
        for then in ready:
            then()

    def failure(self) -> BaseException | None:
        future = self.future
        return future.exception() if future is not None and future.done() else None

    def _take_ready(self) -> list[Callable[[], None]]:
        ready = [then for row_ids, then in self._waiting if not row_ids & self._left]
        self._waiting = [(row_ids, then) for row_ids, then in self._waiting if row_ids & self._left]
        return ready


class _SummariesFirst:
    """While the summary pass runs, the reports leave it the calls it still needs (one per row it has
    yet to summarize, up to all but one of the model's calls): a report waiting for a summary then
    starts sooner. Without this the report calls, queued first at the model's limit, delayed the
    summaries by a wave or two, and every report waiting for them with them. Each summary that comes
    in hands its call to the reports, and the end of the pass hands them the rest."""

    def __init__(self, calls: int, threads: int, summaries: _SummaryWatch | None) -> None:
        self._lock = threading.Lock()
        self._held = self._spare = self._left = 0
        if summaries is None or not summaries.pending:
            self._slots = threading.Semaphore(threads)
            return
        with self._lock:  # a summary may come in while this is set up
            self._left = summaries.on_each_row(self._summary_in)
            self._held = min(calls - 1, self._left)
            self._spare = threads - calls  # the report threads beyond the model's calls
            self._slots = threading.Semaphore(threads - self._held - self._spare)
        summaries.when_done(summaries.pending, self._pass_over)

    def _summary_in(self) -> None:
        with self._lock:
            self._left -= 1
            freed = max(0, self._held - self._left)
            self._held -= freed
        if freed:
            self._slots.release(freed)

    def _pass_over(self) -> None:
        with self._lock:
            freed, self._held, self._spare = self._held + self._spare, 0, 0
        if freed:
            self._slots.release(freed)

    def __enter__(self) -> None:
        self._slots.acquire()

    def __exit__(self, *exc: object) -> None:
        self._slots.release()

