"""Several processes opening one new SQLite store at the same moment, as a server's workers do at its
first start (tests/service/test_first_start.py once failed on it): every one of them opens it."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

PROCESSES = 8
ROUNDS = 10  # without the retry, 8 of 20 rounds had a process refused ("database is locked")


def _open(path: Path, barrier: Any, answers: Any) -> None:
    from kbgraph.store.sqlite.store import SQLiteStore

    barrier.wait()
    try:
        SQLiteStore(path).close()
        answers.put("ok")
    except Exception as exc:  # the answer the test reports
        answers.put(f"{type(exc).__name__}: {exc}")


def test_processes_opening_a_new_store_at_once_all_open_it(tmp_path: Path) -> None:
    context = mp.get_context("fork")
    for round_ in range(ROUNDS):
        path = tmp_path / f"round{round_}" / "store.db"
        barrier, answers = context.Barrier(PROCESSES), context.Queue()
        workers = [context.Process(target=_open, args=(path, barrier, answers)) for _ in range(PROCESSES)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
        said = [answers.get(timeout=10) for _ in workers]
        assert said == ["ok"] * PROCESSES, (round_, [s for s in said if s != "ok"])
