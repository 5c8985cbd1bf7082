"""A per-knowledge-base Redis lock, shaped as ``Engine``'s ``kb_lock``.

Merges and KB phases of one knowledge base must not interleave across worker processes or
hosts, so the lock lives in Redis. A phase (community reports with an LLM) can outlast any fixed
timeout, so a holder keeps extending the lock from a watchdog thread; the timeout only matters when
the holder dies, and then the lock frees itself instead of wedging the knowledge base.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType

import redis
from redis.lock import Lock


class KBLockTimeout(RuntimeError):
    """Another worker held the knowledge base's lock for longer than we were willing to wait."""


class ClaimedElsewhere(KBLockTimeout):
    """A live worker runs this task already (a redelivered or re-queued duplicate reached us)."""


def kb_lock_key(prefix: str, kb_id: str) -> str:
    return f"{prefix}lock:kb:{kb_id}"


class RedisKBLock(AbstractContextManager["RedisKBLock"]):
    def __init__(self, client: redis.Redis, key: str, timeout: float, blocking_timeout: float,
                 busy: type[KBLockTimeout] = KBLockTimeout) -> None:
        # thread_local=False: the watchdog thread extends the lock with the holder's token
        self._lock = Lock(client, key, timeout=timeout, blocking_timeout=blocking_timeout, thread_local=False)
        self._key, self._timeout, self._blocking_timeout, self._busy = key, timeout, blocking_timeout, busy
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None

    def __enter__(self) -> "RedisKBLock":
        if not self._lock.acquire():
            if self._busy is ClaimedElsewhere:
                raise ClaimedElsewhere(f"{self._key} is held: another worker runs this task")
            raise KBLockTimeout(f"could not take the lock {self._key} within {self._blocking_timeout:g} s: "
                                "another worker is merging or refreshing this knowledge base")
        self._stop.clear()
        self._watchdog = threading.Thread(target=self._keep_alive, name=f"kblock:{self._key}", daemon=True)
        self._watchdog.start()
        return self

    def _keep_alive(self) -> None:
        while not self._stop.wait(self._timeout / 3):
            try:
                self._lock.reacquire()
            except Exception:  # lost it (expired while we were stalled): nothing left to keep alive
                return

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join()
        try:
            self._lock.release()
        except redis.exceptions.LockError:  # expired and possibly taken by another: not ours to free
            pass


def redis_kb_lock(client: redis.Redis, prefix: str, *, timeout: float = 60.0,
                  blocking_timeout: float = 600.0) -> Callable[[str], RedisKBLock]:
    """``Engine(kb_lock=...)``: each call gives a fresh lock on ``<prefix>lock:kb:<kb_id>``.

    Not re-entrant: Engine never takes a KB's lock while holding it.
    """

    def lock(kb_id: str) -> RedisKBLock:
        return RedisKBLock(client, kb_lock_key(prefix, kb_id), timeout, blocking_timeout)

    return lock


def task_claim_key(prefix: str, task_id: str) -> str:
    return f"{prefix}claim:task:{task_id}"


def task_claim(client: redis.Redis, prefix: str, task_id: str, ttl: float) -> RedisKBLock:
    """The right to run one task, kept alive while it runs; raises ClaimedElsewhere on entry when a
    live worker holds it. A killed holder's claim expires after ``ttl`` seconds."""
    return RedisKBLock(client, task_claim_key(prefix, task_id), ttl, 0.0, busy=ClaimedElsewhere)
