"""The refresh's bookkeeping between the summary pass and the reports waiting for it
(kbgraph.index.schedule._SummaryWatch, _SummariesFirst): a report goes as soon as its own rows are
summarized, and the reports get the model's calls back one by one as the summaries come in."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from kbgraph.index.schedule import _SummariesFirst, _SummaryWatch


def test_a_waiting_report_starts_once_its_own_rows_are_summarized_not_after_the_whole_pass() -> None:
    watch = _SummaryWatch(frozenset({"a", "b", "c"}))
    started: list[str] = []
    watch.when_done(watch.waits(["a", "x"]), lambda: started.append("needs a"))
    watch.when_done(watch.waits(["b", "c"]), lambda: started.append("needs b and c"))
    watch.when_done(watch.waits(["x", "y"]), lambda: started.append("needs none"))
    assert started == ["needs none"]
    watch.row_done("a")
    assert started == ["needs none", "needs a"]
    watch.row_done("b")
    watch.row_done("a")  # told twice: nothing happens again
    assert started == ["needs none", "needs a"]
    watch.row_done("c")
    assert started == ["needs none", "needs a", "needs b and c"]


def test_the_end_of_the_pass_releases_what_waits_on_rows_it_could_not_summarize() -> None:
    watch = _SummaryWatch(frozenset({"a", "b"}))
    pass_ = Future()
    watch.future = pass_
    pass_.add_done_callback(watch.close)
    started: list[str] = []
    watch.when_done(frozenset({"b"}), lambda: started.append("needs b"))
    watch.row_done("a")
    assert started == []
    pass_.set_exception(RuntimeError("the store went away"))  # b never came in
    assert started == ["needs b"]
    assert isinstance(watch.failure(), RuntimeError)


def _permits(gate: _SummariesFirst) -> int:
    taken = 0
    while gate._slots.acquire(blocking=False):
        taken += 1
    for _ in range(taken):
        gate._slots.release()
    return taken


def test_the_reports_get_a_call_back_as_each_of_the_last_summaries_comes_in() -> None:
    calls, threads = 4, 8
    watch = _SummaryWatch(frozenset({"s1", "s2", "s3", "s4", "s5"}))
    gate = _SummariesFirst(calls, threads, watch)
    assert _permits(gate) == 1  # five summaries to come: they may have all but one call
    watch.row_done("s1")
    watch.row_done("s2")
    assert _permits(gate) == 1  # three left: still three calls of four held for them
    watch.row_done("s3")
    assert _permits(gate) == 2
    watch.row_done("s4")
    assert _permits(gate) == 3
    watch.close()  # the pass is over: every report thread may go (the model's limit bounds the calls)
    assert _permits(gate) == threads


def test_without_a_summary_pass_the_reports_have_every_thread() -> None:
    assert _permits(_SummariesFirst(4, 8, None)) == 8
    assert _permits(_SummariesFirst(4, 8, _SummaryWatch(frozenset()))) == 8


def test_a_summary_coming_in_while_the_gate_is_set_up_is_not_lost() -> None:
    watch = _SummaryWatch(frozenset({f"s{n}" for n in range(50)}))
    done = threading.Event()

    def summaries() -> None:
        for n in range(50):
            watch.row_done(f"s{n}")
        watch.close()
        done.set()

    runner = threading.Thread(target=summaries)
    runner.start()
    gate = _SummariesFirst(4, 8, watch)
    runner.join()
    assert done.is_set()
    assert _permits(gate) == 8

