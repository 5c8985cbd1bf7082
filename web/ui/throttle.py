"""The sign-in throttle: wrong passwords are counted per account and per client address over a
window (settings ``login_failures_per_account``, ``login_failures_per_address``, ``login_window``);
past either limit every sign-in of that account or from that address is refused until the window
ends, the right password included, so guessing cannot go on and then "win".

The counts live in Redis (shared by every web process and host) and, when Redis cannot be reached,
in the process: a throttle that fails open would let a guesser through exactly while Redis is down.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from dataclasses import dataclass

import redis

from kbgraph.config import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refusal:
    """Sign-ins are refused for ``retry_after`` more seconds; ``what`` says which limit."""

    retry_after: int
    what: str


class _MemoryCounts:
    """Failure counts of this process: (count, window end) per key."""

    def __init__(self) -> None:
        self._counts: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()

    def add(self, key: str, window: float) -> None:
        now = time.monotonic()
        with self._lock:
            count, ends = self._counts.get(key, (0, 0.0))
            self._counts[key] = (count + 1, ends) if ends > now else (1, now + window)
            if len(self._counts) > 100_000:  # a flood of addresses: drop the finished windows
                self._counts = {k: v for k, v in self._counts.items() if v[1] > now}

    def get(self, key: str) -> tuple[int, float]:
        """(failures, seconds left in the window)."""
        with self._lock:
            count, ends = self._counts.get(key, (0, 0.0))
        left = ends - time.monotonic()
        return (count, left) if left > 0 else (0, 0.0)

    def clear(self, key: str) -> None:
        with self._lock:
            self._counts.pop(key, None)


class LoginThrottle:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.prefix = f"{settings.redis_prefix}login:"
        self._redis = redis.Redis.from_url(settings.redis_url, socket_timeout=2, socket_connect_timeout=2) \
            if settings.redis_url else None
        self._memory = _MemoryCounts()
        self._redis_down_until = 0.0

    def _shared(self) -> redis.Redis | None:
        """Redis, unless there is none or it failed in the last 30 s (then asking it again at every
        sign-in would only add its timeout to each)."""
        return self._redis if self._redis is not None and time.monotonic() >= self._redis_down_until else None

    def _redis_failed(self, exc: Exception) -> None:
        self._redis_down_until = time.monotonic() + 30
        log.warning("the sign-in throttle counts in this process for 30 s: Redis failed (%s)", exc)

    def _keys(self, email: str, address: str) -> list[tuple[str, int, str]]:
        account = hashlib.sha256(email.strip().lower().encode("utf-8")).hexdigest()[:32]
        return [(f"{self.prefix}account:{account}", self.settings.login_failures_per_account, "this account"),
                (f"{self.prefix}address:{address}", self.settings.login_failures_per_address, "your address")]

    def check(self, email: str, address: str) -> Refusal | None:
        """A refusal when either limit is reached, else None."""
        for key, limit, what in self._keys(email, address):
            count, left = self._get(key)
            if count >= limit:
                return Refusal(max(1, math.ceil(left)), what)
        return None

    def failed(self, email: str, address: str) -> None:
        for key, _, _ in self._keys(email, address):
            self._add(key)

    def succeeded(self, email: str) -> None:
        """The account's count starts again; the address's does not (a guesser who owns one account
        must not reset the count of the address it guesses others' passwords from)."""
        key = self._keys(email, "")[0][0]
        self._memory.clear(key)
        shared = self._shared()
        if shared is not None:
            try:
                shared.delete(key)
            except redis.RedisError as exc:
                self._redis_failed(exc)

    def _add(self, key: str) -> None:
        window = max(1, math.ceil(self.settings.login_window))
        shared = self._shared()
        if shared is not None:
            try:
                with shared.pipeline() as pipe:
                    pipe.set(key, 0, ex=window, nx=True)  # the window starts at the first failure
                    pipe.incr(key)
                    pipe.execute()
                return
            except redis.RedisError as exc:
                self._redis_failed(exc)
        self._memory.add(key, window)

    def _get(self, key: str) -> tuple[int, float]:
        count, left = self._memory.get(key)
        shared = self._shared()
        if shared is not None:
            try:
                with shared.pipeline() as pipe:
                    pipe.get(key)
                    pipe.ttl(key)
                    raw, ttl = pipe.execute()
                if raw is not None and int(raw) > count:
                    count, left = int(raw), float(max(ttl, 1))
            except redis.RedisError as exc:
                self._redis_failed(exc)
        return count, left
