"""kbgraph.utils.read_ahead: items in order with the next one fetched on a thread, failures raised
where their item would have come, and a caller that stops early stops the fetching."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from kbgraph.utils.read_ahead import read_ahead


def test_items_come_in_order_and_the_next_is_fetched_meanwhile() -> None:
    fetched: list[int] = []
    released = threading.Event()

    def pages() -> Iterator[int]:
        for n in range(5):
            if n == 2:
                released.wait(5)
            fetched.append(n)
            yield n

    got = read_ahead(pages())
    assert next(got) == 0
    deadline = time.monotonic() + 5
    while len(fetched) < 2 and time.monotonic() < deadline:  # page 1 fetched while the caller holds page 0
        time.sleep(0.01)
    assert fetched == [0, 1]
    released.set()
    assert list(got) == [1, 2, 3, 4]
    assert list(read_ahead(iter([]))) == [] and list(read_ahead(iter([7]))) == [7]


def test_a_failure_is_raised_where_its_item_would_have_come() -> None:
    def pages() -> Iterator[int]:
        yield 1
        yield 2
        raise RuntimeError("the store went away")

    got = read_ahead(pages())
    assert next(got) == 1 and next(got) == 2
    with pytest.raises(RuntimeError, match="went away"):
        next(got)


def test_a_caller_that_stops_early_stops_the_fetching() -> None:
    fetched: list[int] = []

    def pages() -> Iterator[int]:
        for n in range(1000):
            fetched.append(n)
            yield n

    got = read_ahead(pages())
    assert next(got) == 0 and next(got) == 1
    got.close()
    before = len(fetched)
    time.sleep(0.3)
    assert len(fetched) == before and before <= 4
    assert not any(t.name == "kbgraph-read-ahead" for t in threading.enumerate())
