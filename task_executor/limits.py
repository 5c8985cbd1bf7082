"""The chat model's limits kept in Redis, shared by every process of a deployment.

A worker runs its tasks in several processes (prefork), on one or more hosts, and the web server in
several more; ``llm_concurrency`` (calls in flight), ``llm_kb_concurrency`` (per knowledge base) and
the per-minute budgets are what the model provider allows the deployment, not each process. Kept
here, every process's calls count against the same numbers, and a 429's Retry-After seen by one
process holds back the calls of all of them.

Slots are leases (a sorted set of holder tokens scored by their expiry) that a keeper thread of the
holding process extends every ``lease / 3`` seconds while the call runs, so a call may take as long
as it takes, and the slots of a killed process (kill -9, OOM: nothing releases them) free
themselves ``lease`` seconds later instead of shrinking the limit until a fixed long lease ran out;
a worker uses three task heartbeats, as for its task claims and KB locks. A process first takes a
slot of its own semaphore of the same size, so at most ``limit`` of its threads wait on Redis; a
waiter sleeps on a notification list that every release pushes to, rather than polling.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import time
import uuid

import redis

from kbgraph.llm.layers.base import Check
from kbgraph.llm.layers.slots import shared_semaphore

log = logging.getLogger(__name__)

_ACQUIRE = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 60)
  return 1
end
return 0
"""

_RELEASE = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], '1')
  redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
  redis.call('EXPIRE', KEYS[2], 60)
end
return 0
"""

# extends the leases of the tokens still in the set (a lease that ran out while its holder stalled
# stays given up: its slot may be someone else's now)
_RENEW = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1000000
local kept = 0
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[i])
    kept = kept + 1
  end
end
if kept > 0 then redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[1])) + 60) end
return kept
"""

# the token buckets of RequestBudget (kbgraph.llm.layers), refilled continuously, full at first;
# returns the seconds to wait (as a string: Lua numbers would be cut to integers), 0 when taken
_TAKE = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1000000
local rpm, tpm, want, take = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
local wait = math.max(0, tonumber(redis.call('GET', KEYS[2]) or '0') - now)
local state = redis.call('HMGET', KEYS[1], 'r', 't', 'at')
local requests, tokens = tonumber(state[1] or rpm), tonumber(state[2] or tpm)
local elapsed = math.max(0, now - tonumber(state[3] or now))
requests = math.min(rpm, requests + elapsed * rpm / 60)
tokens = math.min(tpm, tokens + elapsed * tpm / 60)
want = math.min(want, tpm)
if rpm > 0 and requests < 1 then wait = math.max(wait, (1 - requests) * 60 / rpm) end
if tpm > 0 and tokens < want then wait = math.max(wait, (want - tokens) * 60 / tpm) end
if wait <= 0 and take then
  if rpm > 0 then requests = requests - 1 end
  if tpm > 0 then tokens = tokens - want end
end
if rpm > 0 or tpm > 0 then
  redis.call('HSET', KEYS[1], 'r', tostring(requests), 't', tostring(tokens), 'at', tostring(now))
  redis.call('EXPIRE', KEYS[1], 120)
end
return tostring(wait)
"""

_SPEND = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1000000
local tpm = tonumber(ARGV[1])
local state = redis.call('HMGET', KEYS[1], 'r', 't', 'at')
local elapsed = math.max(0, now - tonumber(state[3] or now))
local tokens = math.min(tpm, tonumber(state[2] or tpm) + elapsed * tpm / 60) - tonumber(ARGV[2])
local requests = state[1] or ARGV[3]
redis.call('HSET', KEYS[1], 'r', requests, 't', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], 120)
return 0
"""

_PAUSE = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1000000
local until_ = now + tonumber(ARGV[1])
if until_ > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], tostring(until_), 'PX', math.ceil(tonumber(ARGV[1]) * 1000) + 1000)
end
return 0
"""


def _digest(key: str) -> str:
    # model keys hold URLs: a short fixed-width name for Redis
    return hashlib.sha1(key.encode()).hexdigest()[:16]


class RedisSlots:
    def __init__(self, client: redis.Redis, prefix: str, key: str, limit: int, lease: float) -> None:
        self.client, self.limit, self.lease = client, max(1, limit), lease
        name = _digest(f"{key}|{limit}")
        self.key, self.notify = f"{prefix}llm:slots:{name}", f"{prefix}llm:slots:{name}:free"
        self.local = shared_semaphore(f"redis|{prefix}|{key}", self.limit)
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)
        self._renew = client.register_script(_RENEW)
        self._owner = f"{socket.gethostname()}:{os.getpid()}"
        self._held: set[str] = set()  # this process's tokens, whose leases renew() extends
        self._held_guard = threading.Lock()

    def try_acquire(self) -> str | None:
        """A slot's token, or None when every slot is taken (does not wait)."""
        token = f"{self._owner}:{uuid.uuid4().hex}"
        with self._held_guard:  # kept alive from the moment it may count
            self._held.add(token)
        if self._acquire(keys=[self.key], args=[self.limit, self.lease, token]):
            return token
        with self._held_guard:
            self._held.discard(token)
        return None

    def acquire(self, check: Check, priority: int = 0) -> object:
        # the order by priority holds among this process's callers (its own semaphore); across
        # processes the slots go to whoever asks Redis first
        self.local.acquire(check, priority)
        try:
            while True:
                token = self.try_acquire()
                if token is not None:
                    return token
                check()
                # woken by a release (or after 0.1 s, for a slot that expired or a missed wake-up)
                self.client.blpop([self.notify], timeout=0.1)
        except BaseException:
            self.local.release()
            raise

    def release(self, handle: object) -> None:
        with self._held_guard:
            self._held.discard(str(handle))
        try:
            self._release(keys=[self.key, self.notify], args=[str(handle), self.limit])
        finally:
            self.local.release()

    def renew(self) -> int:
        """Extend the leases of the slots this process holds; returns how many were still held."""
        with self._held_guard:
            tokens = list(self._held)
        if not tokens:
            return 0
        return int(self._renew(keys=[self.key], args=[self.lease, *tokens]))

    def held(self) -> int:
        """Slots held now, by every process (for tests and status pages)."""
        self.client.zremrangebyscore(self.key, "-inf", time.time())
        return int(self.client.zcard(self.key))


class RedisBudget:
    def __init__(self, client: redis.Redis, prefix: str, key: str, requests_per_minute: int,
                 tokens_per_minute: int) -> None:
        self.client, self.rpm, self.tpm = client, requests_per_minute, tokens_per_minute
        name = _digest(key)
        self.state = f"{prefix}llm:budget:{name}:{requests_per_minute}:{tokens_per_minute}"
        self.paused = f"{prefix}llm:pause:{name}"  # a server's Retry-After holds whatever the budget
        self._take = client.register_script(_TAKE)
        self._spend = client.register_script(_SPEND)
        self._pause = client.register_script(_PAUSE)
        self.waited = 0.0

    def active(self) -> bool:
        return True  # another process may have paused the model: always ask

    def try_take(self, tokens: int) -> float:
        """Take a request and ``tokens`` if the budget has them (0.0), else the seconds to wait."""
        return float(self._take(keys=[self.state, self.paused], args=[self.rpm, self.tpm, tokens, 1]))

    def take(self, tokens: int, check: Check) -> None:
        while True:
            wait = self.try_take(tokens if self.tpm else 0)
            if wait <= 0:
                return
            check()
            step = min(wait, 0.1)
            time.sleep(step)
            self.waited += step

    def spend(self, tokens: int) -> None:
        if self.tpm and tokens:
            self._spend(keys=[self.state], args=[self.tpm, tokens, self.rpm])

    def pause(self, seconds: float) -> None:
        if seconds > 0:
            self._pause(keys=[self.paused], args=[seconds])


class RedisCallLimits:
    """``Engine(limits=...)``: slots and budgets under ``<prefix>llm:``, one object per key and
    limit per process (the process-local half of a slot is shared the same way). ``lease``: how long
    the slots of a process that died holding them stay taken; a live holder's are extended by a
    keeper thread (started with the first slots, in the process that uses them) every lease / 3."""

    def __init__(self, client: redis.Redis, prefix: str, *, lease: float) -> None:
        if lease <= 0:
            raise ValueError(f"a slot's lease must be positive, not {lease}")
        self.client, self.prefix, self.lease = client, prefix, lease
        self._slots: dict[tuple[str, int], RedisSlots] = {}
        self._budgets: dict[tuple[str, int, int], RedisBudget] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None
        self._keeper_pid = 0

    def slots(self, key: str, limit: int) -> RedisSlots:
        with self._guard:
            self._ensure_keeper()
            if (key, limit) not in self._slots:
                self._slots[(key, limit)] = RedisSlots(self.client, self.prefix, key, limit, self.lease)
            return self._slots[(key, limit)]

    def _ensure_keeper(self) -> None:
        # a forked child has none of its parent's threads: it starts its own
        if self._keeper is not None and self._keeper_pid == os.getpid() and self._keeper.is_alive():
            return
        self._stop.clear()
        self._keeper_pid = os.getpid()
        self._keeper = threading.Thread(target=self._keep_alive, name="kbgraph-llm-slots", daemon=True)
        self._keeper.start()

    def _keep_alive(self) -> None:
        while not self._stop.wait(self.lease / 3):
            self.renew()

    def renew(self) -> None:
        """Extend the leases of every slot this process holds (the keeper does, every lease / 3)."""
        with self._guard:
            every = list(self._slots.values())
        for slots in every:
            try:
                slots.renew()
            except redis.RedisError:  # Redis away for a moment: the next beat tries again
                log.warning("could not extend the leases of the model's slots %s", slots.key, exc_info=True)

    def close(self) -> None:
        """Stop the keeper (slots still held lapse after ``lease``)."""
        self._stop.set()
        keeper = self._keeper
        if keeper is not None and keeper is not threading.current_thread() and self._keeper_pid == os.getpid():
            keeper.join(5)

    def budget(self, key: str, requests_per_minute: int, tokens_per_minute: int) -> RedisBudget:
        with self._guard:
            found = self._budgets.get((key, requests_per_minute, tokens_per_minute))
            if found is None:
                found = self._budgets[(key, requests_per_minute, tokens_per_minute)] = RedisBudget(
                    self.client, self.prefix, key, requests_per_minute, tokens_per_minute)
            return found
