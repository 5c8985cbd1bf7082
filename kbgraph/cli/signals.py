"""Ctrl-C and SIGTERM during long work: the first asks the work to stop (it records what it was doing:
no document is left "running", and what was done is kept); a second stops at once."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import click

_STOPPED = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


class StopRequest:
    """Set by the first SIGINT or SIGTERM; ``is_set`` is the work's cancel check."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signal = ""

    def is_set(self) -> bool:
        return self._event.is_set()

    def _handle(self, number: int, _frame: FrameType | None) -> None:
        if self._event.is_set():
            # the second one: the user will not wait, and an exception would (the interpreter joins
            # the threads whose model calls are in flight before it exits); what was recorded is
            # committed, and the documents in flight are indexed again by the next run
            click.echo(f"\n{_STOPPED.get(signal.Signals(number), 'signal')} again: stopped at once", err=True)
            os._exit(130 if number == signal.SIGINT else 143)
        self.signal = _STOPPED.get(signal.Signals(number), signal.Signals(number).name)
        self._event.set()
        click.echo(f"\n{self.signal}: stopping after the documents in flight are recorded "
                   "(again to stop at once, leaving them to the next run)", err=True)


@contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """SIGINT and SIGTERM set the request instead of ending the process, while the block runs (in the
    main thread; elsewhere signals cannot be caught and the request is never set)."""
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {number: signal.signal(number, stop._handle) for number in _STOPPED}
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
