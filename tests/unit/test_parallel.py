"""Splitting a scan over threads: results in order, and a caller never waits on a busy helper."""

from __future__ import annotations

import threading

import pytest

from kbgraph.utils import parallel


@pytest.fixture()
def two_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "THREADS", 2)
    monkeypatch.setattr(parallel, "_pool", None)


def test_results_come_back_in_the_order_of_the_parts(two_threads: None) -> None:
    for count in (1, 2, 5):
        assert parallel.run_parts([lambda i=i: i * i for i in range(count)]) == [i * i for i in range(count)]


def test_parts_run_on_a_helper_thread_when_it_is_free(two_threads: None) -> None:
    seen: list[str] = []
    started = threading.Event()

    def first() -> None:
        # the helper picks up the second part while this one waits for it
        assert started.wait(10)
        seen.append(threading.current_thread().name)

    def second() -> None:
        seen.append(threading.current_thread().name)
        started.set()

    parallel.run_parts([first, second])
    assert seen[1] == threading.current_thread().name and seen[0].startswith("kbgraph-scan")


def test_parts_no_helper_has_started_run_on_the_caller(two_threads: None) -> None:
    release = threading.Event()
    blocker = parallel._helpers().submit(release.wait, 10)  # the only helper is busy
    caller = threading.current_thread().name
    try:
        names = parallel.run_parts([lambda: threading.current_thread().name] * 3)
        assert names == [caller] * 3
    finally:
        release.set()
        blocker.result(10)


def test_failures_reach_the_caller(two_threads: None) -> None:
    def broken() -> None:
        raise ValueError("bad part")

    with pytest.raises(ValueError, match="bad part"):
        parallel.run_parts([lambda: 1, broken])


def test_split_rows_covers_every_row_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "THREADS", 3)
    assert parallel.split_rows(10, 100) == [(0, 10)]
    assert parallel.split_rows(1000, 100) == [(0, 333), (333, 666), (666, 1000)]
    assert parallel.split_rows(250, 100) == [(0, 125), (125, 250)]
    assert parallel.split_rows(0, 100) == []


def _helper_name_in_child(queue: "multiprocessing.Queue[str]") -> None:
    started = threading.Event()
    names: list[str] = []

    def first() -> None:
        assert started.wait(10)  # only a live helper thread can set it

    def second() -> None:
        names.append(threading.current_thread().name)
        started.set()

    parallel.run_parts([first, second])
    queue.put(names[0])


def test_a_forked_child_gets_helpers_of_its_own(two_threads: None) -> None:
    import multiprocessing

    parallel.run_parts([lambda: 1, lambda: 2])  # the parent's helper thread exists now
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_helper_name_in_child, args=(queue,))
    child.start()
    child.join(30)
    assert child.exitcode == 0 and queue.get(timeout=5).startswith("kbgraph-scan")
