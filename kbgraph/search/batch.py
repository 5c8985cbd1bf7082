"""The searches of one query, sent together and remembered (``SearchBatch``).

A graph query asks for many searches that do not depend on each other (the whole question's entity
search, one per analysed entity, the answer type's, the question's relations and reports; the
anchors' relations per side): asked first and read afterwards, they go to the store in one
``DocStore.search_many`` (on Elasticsearch a few round trips for all of them instead of a few
each). Rows read by id (``ask_rows``: the analysed entities' own rows) go with them, in one
``DocStore.get_many`` sent beside the searches when the store is remote. The kg and mix modes run the ppr part and the kg part from the same seed and fact searches:
a request asked again in the same query is answered from the first.

One batch belongs to one query: its answers are as fresh as the query. The query's parts may use it
from two threads (``DocStore.remote``); a search asked in one and read in the other is sent once,
and what one thread asks while the other's searches are on their way goes out at once, beside them:
the kg and ppr parts of a kg or mix query search their anchors' relations side by side (their
anchors differ when a seed sits between the two modes' ramps), where the second part's searches
used to wait for the first part's to come back (two round trips of the query one after the other).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from kbgraph.store.base import Doc, DocStore, Hit, SearchRequest, SearchResult

T = TypeVar("T")


def request_key(request: SearchRequest) -> tuple:
    """A hashable key of everything a request asks."""
    text = request.text
    vector = request.vector
    return (tuple(request.kb_ids), tuple((c.field, c.op, _frozen(c.value)) for c in request.where),
            None if text is None else (tuple(text.tokens), tuple(text.fields.items()), text.minimum_should_match),
            None if vector is None else (vector.field, np.asarray(vector.vector, dtype=np.float64).tobytes(), vector.floor),
            request.vector_weight, request.threshold, request.candidates, request.offset, request.limit,
            None if request.fields is None else tuple(request.fields), tuple(request.order_by), request.count_total,
            request.key_fields, tuple(request.list_fields))


def _frozen(value: object) -> object:
    return tuple(value) if isinstance(value, (list, tuple, set, frozenset)) else value


@dataclass(frozen=True)
class Ticket:
    """A search asked of a batch; its hits come with ``SearchBatch.hits``."""

    key: tuple


@dataclass(frozen=True)
class _RowRead:
    kb_ids: list[str]
    ids: list[str]
    fields: list[str] | None


@dataclass(frozen=True)
class RowsTicket:
    """Rows asked of a batch by id; they come with ``SearchBatch.rows``."""

    key: tuple


class SearchBatch:
    """Searches asked now and sent together at the first read of any of them (see the module docstring)."""

    def __init__(self, store: DocStore, tenant: str) -> None:
        self.store = store
        self.tenant = tenant
        self._asked: dict[tuple, SearchRequest] = {}
        self._answers: dict[tuple, SearchResult] = {}
        self._values: dict[tuple, object] = {}
        self._rows_asked: dict[tuple, _RowRead] = {}
        self._rows: dict[tuple, list[Doc]] = {}
        self._later: set[tuple] = set()  # asked searches that go in a request of their own (``ask``)
        # searches and reads on their way (key -> set once their answers are in): a reader of one waits
        self._sending: dict[tuple, threading.Event] = {}
        # held while the batch's state changes, never while a batch is sent
        self._lock = threading.RLock()

    def remember(self, key: tuple, build: Callable[[], T]) -> T:
        """A value computed once per query (e.g. the analysed entities' vectors, which the searches
        of the kg and ppr parts both need)."""
        with self._lock:
            if key not in self._values:
                self._values[key] = build()
            return self._values[key]  # type: ignore[no-any-return]

    def ask(self, request: SearchRequest, later: bool = False) -> Ticket:
        """``later``: a search the query reads only at its end (the question's relations and
        reports, whose rows cost an Elasticsearch page a round trip more than a seed search's keys):
        on a remote store it goes out beside the others in a request of its own, so theirs come
        back without waiting for its last round trip."""
        key = request_key(request)
        with self._lock:
            if key not in self._answers and key not in self._sending:
                self._asked.setdefault(key, request)
                if later:
                    self._later.add(key)
        return Ticket(key)

    def ask_rows(self, kb_ids: Sequence[str], ids: Sequence[str], fields: Sequence[str] | None) -> RowsTicket:
        """Rows by id (``DocStore.get``), read with the next batch of searches."""
        key = (tuple(kb_ids), tuple(ids), None if fields is None else tuple(fields))
        with self._lock:
            if key not in self._rows and ("rows", key) not in self._sending:
                self._rows_asked.setdefault(key, _RowRead(list(kb_ids), list(ids),
                                                          None if fields is None else list(fields)))
        return RowsTicket(key)

    def rows(self, ticket: RowsTicket) -> list[Doc]:
        """The rows of an ``ask_rows`` (copies: callers keep and change rows)."""
        self._wait_for(self._rows, ticket.key, ("rows", ticket.key))
        return [dict(doc) for doc in self._rows[ticket.key]]

    def ask_all(self, requests: Sequence[SearchRequest]) -> list[Ticket]:
        return [self.ask(r) for r in requests]

    def result(self, ticket: Ticket) -> SearchResult:
        self._wait_for(self._answers, ticket.key, ticket.key)
        return self._answers[ticket.key]

    def _wait_for(self, answers: dict[tuple, Any], key: tuple, sending: tuple) -> None:
        """Until ``answers`` holds ``key``: wait for the batch it went out with, or send it (with
        everything else asked and not sent yet). A batch that failed leaves its searches asked again:
        the next reader sends them again, or gets the failure."""
        while True:
            with self._lock:
                if key in answers:
                    return
                on_its_way = self._sending.get(sending)
                unsent = bool(self._asked or self._rows_asked)
            if unsent:
                # what is asked and not sent goes out now, beside what is on its way: waiting first
                # would put its round trips after the others' (the ppr part's anchors after the kg part's)
                self.send()
            elif on_its_way is not None:
                on_its_way.wait()
            else:
                raise KeyError(f"{key!r} was never asked of this batch")

    def hits(self, ticket: Ticket) -> list[Hit]:
        """The hits of an asked search; each call gets its own copies (callers keep and change rows)."""
        return [Hit(id=h.id, doc=dict(h.doc), score=h.score, term_score=h.term_score, vector_score=h.vector_score)
                for h in self.result(ticket).hits]

    def send(self) -> None:
        """Every search asked and not yet sent in one ``search_many``, every read of rows in one
        ``get_many`` (beside it, on a store in another process); the lock is not held meanwhile, so
        another thread's searches can go out beside these. On a remote store the searches asked
        ``later`` go in a ``search_many`` of their own, on a thread of their own, and this returns
        without waiting for them."""
        with self._lock:
            if not self._asked and not self._rows_asked:
                return
            asked = self._asked
            later = {k: r for k, r in asked.items() if k in self._later} \
                if self.store.remote and (len(self._later) < len(asked) or self._rows_asked) else {}
            now = [(k, r) for k, r in asked.items() if k not in later]
            row_keys, reads = list(self._rows_asked), list(self._rows_asked.values())
            self._asked, self._rows_asked = {}, {}
            self._later.clear()
            done = threading.Event()
            waiting = [*(k for k, _ in now), *(("rows", key) for key in row_keys)]
            self._sending.update(dict.fromkeys(waiting, done))
            if later:
                done_later = threading.Event()
                self._sending.update(dict.fromkeys(later, done_later))
        if later:
            threading.Thread(target=self._deliver, args=(list(later), list(later.values()), [], [], done_later),
                             name="kbgraph-batch-later", daemon=True).start()
        self._deliver([k for k, _ in now], [r for _, r in now], row_keys, reads, done, raising=True)

    def _deliver(self, keys: list[tuple], requests: list[SearchRequest], row_keys: list[tuple],
                 reads: list[_RowRead], done: threading.Event, raising: bool = False) -> None:
        """Send these searches and reads and keep their answers; a failure leaves them asked
        again (the next reader sends them again, or gets the failure), raised when ``raising``."""
        waiting = [*keys, *(("rows", key) for key in row_keys)]
        try:
            found, rows = self._fetch(requests, reads)
        except BaseException:
            with self._lock:
                self._asked.update(zip(keys, requests))  # asked again by the next read
                self._rows_asked.update(zip(row_keys, reads))
                self._sent(waiting, done)
            if raising:
                raise
            return
        with self._lock:
            self._answers.update(zip(keys, found))
            self._rows.update(zip(row_keys, rows))
            self._sent(waiting, done)

    def _sent(self, waiting: list[tuple], done: threading.Event) -> None:
        for key in waiting:
            self._sending.pop(key, None)
        done.set()

    def _fetch(self, requests: list[SearchRequest], reads: list[_RowRead]) -> tuple[list[SearchResult], list[list[Doc]]]:
        def searches() -> list[SearchResult]:
            return self.store.search_many(self.tenant, requests) if requests else []

        def gets() -> list[list[Doc]]:
            # a query's reads name its knowledge bases: one get_many per set of them (one, in practice)
            out: dict[int, list[Doc]] = {}
            scopes: dict[tuple[str, ...], list[int]] = {}
            for i, read in enumerate(reads):
                scopes.setdefault(tuple(read.kb_ids), []).append(i)
            for scope, numbers in scopes.items():
                found = self.store.get_many(self.tenant, list(scope), [(reads[i].ids, reads[i].fields) for i in numbers])
                out.update(zip(numbers, found))
            return [out[i] for i in range(len(reads))]

        if requests and reads and self.store.remote:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbgraph-batch-rows") as beside:
                reading = beside.submit(gets)
                found = searches()
                return found, reading.result()
        return searches(), gets()
