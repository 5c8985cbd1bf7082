"""Chat layers: cache, retry, concurrency limit and token accounting, each wrapping the next.

Every layer is itself a ChatModel. Besides the protocol's ``chat``/``stream`` they speak an
internal richer call, ``complete(request) -> Completion`` and ``open_stream(request) ->
TextStream``, so token counts from the server travel back up through the layers without any
shared mutable "last call" state. The factory stacks them, outermost first:

    CachedChat -> RetryingChat -> BudgetedChat -> LimitedChat (KB) -> LimitedChat -> AccountedChat -> OpenAIChat

The cache sits outside the retry loop (a hit never retries or waits for a slot), the limit sits
inside it (a request sleeping in backoff does not hold a slot), and accounting sits next to the
wire so that every attempt, failed or not, is counted once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import contextlib
import hashlib
import itertools
import json
import logging
import os
import random
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeVar

import orjson
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from kbgraph.parse.token_count import count_tokens
from kbgraph.llm.base import CancelCheck, Cancelled, LLMError, Message, UsageLedger

if TYPE_CHECKING:
    from kbgraph.llm.limits import Budget, Slots

log = logging.getLogger(__name__)

T = TypeVar("T")


class TransientLLMError(LLMError):
    """A failure worth retrying (429, 5xx, timeout, connection); ``retry_after`` from the server."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[Message, ...]
    phase: str = "chat"
    prompt_version: str = ""
    temperature: float = 0.0
    max_tokens: int | None = None
    cancel: CancelCheck | None = field(default=None, compare=False)
    # whether an answer is usable (it parses): only those are cached, and a cached one that is not
    # (stored before the check existed) is asked again
    accept: Callable[[str], bool] | None = field(default=None, compare=False)

    def usable(self, text: str) -> bool:
        return bool(text.strip()) and (self.accept is None or self.accept(text))

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel():
            raise Cancelled(f"{self.phase}: cancelled")


@dataclass
class Completion:
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached: bool = False


class TextStream:
    """Content pieces of a streamed reply; usage fields are filled in when the stream ends.

    Layers hook ``add_closer`` to release slots or record usage exactly once, whether the
    consumer reads to the end, stops early, or the stream fails.
    """

    def __init__(self, pieces: Iterator[str]) -> None:
        self._pieces = pieces
        self._closers: list[Callable[[TextStream], None]] = []
        self._closed = False
        self.parts: list[str] = []
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.failed = False

    def add_closer(self, fn: Callable[[TextStream], None]) -> None:
        self._closers.append(fn)

    def __iter__(self) -> Iterator[str]:
        try:
            for piece in self._pieces:
                self.parts.append(piece)
                yield piece
        except GeneratorExit:
            raise
        except BaseException:
            self.failed = True
            raise
        finally:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()
        for fn in reversed(self._closers):
            fn(self)


class ChatBase(ABC):
    """The ChatModel protocol on top of ``complete`` / ``open_stream``, which each layer provides."""

    model_name: str = ""
    temperature: float = 0.0
    max_tokens: int | None = None
    remembers_answers: bool = False

    @abstractmethod
    def complete(self, request: ChatRequest) -> Completion: ...

    @abstractmethod
    def open_stream(self, request: ChatRequest) -> TextStream: ...

    def _request(self, messages: Sequence[Message], phase: str, prompt_version: str,
                 temperature: float | None, max_tokens: int | None,
                 cancel: CancelCheck | None, accept: Callable[[str], bool] | None = None) -> ChatRequest:
        # Defaults are resolved here, once, so the cache key sees the values actually sent.
        return ChatRequest(
            messages=tuple(messages), phase=phase, prompt_version=prompt_version,
            temperature=self.temperature if temperature is None else temperature,
            max_tokens=self.max_tokens if max_tokens is None else max_tokens, cancel=cancel, accept=accept)

    def chat(self, messages: Sequence[Message], *, phase: str = "chat", prompt_version: str = "",
             temperature: float | None = None, max_tokens: int | None = None,
             cancel: CancelCheck | None = None, accept: Callable[[str], bool] | None = None) -> str:
        request = self._request(messages, phase, prompt_version, temperature, max_tokens, cancel, accept)
        return self.complete(request).text

    def stream(self, messages: Sequence[Message], *, phase: str = "chat",
               temperature: float | None = None, max_tokens: int | None = None,
               cancel: CancelCheck | None = None) -> Iterator[str]:
        request = self._request(messages, phase, "", temperature, max_tokens, cancel)
        text_stream = self.open_stream(request)
        try:
            yield from text_stream
        finally:
            text_stream.close()


class ChatLayer(ChatBase):
    def __init__(self, inner: ChatBase) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.temperature = inner.temperature
        self.max_tokens = inner.max_tokens
        self.remembers_answers = inner.remembers_answers

    def complete(self, request: ChatRequest) -> Completion:
        return self.inner.complete(request)

    def open_stream(self, request: ChatRequest) -> TextStream:
        return self.inner.open_stream(request)


# ---------------------------------------------------------------------------------------------
# token counting

def count_message_tokens(messages: Sequence[Message]) -> int:
    # ~4 tokens of framing per message, as the chat formats add role markers.
    return sum(count_tokens(m.content) + 4 for m in messages)


# ---------------------------------------------------------------------------------------------
# accounting

_LEDGER_LOCK = threading.Lock()


def record_usage(ledger: UsageLedger | None, phase: str, *, calls: int = 0, cached: int = 0,
                 prompt: int = 0, completion: int = 0, failures: int = 0) -> None:
    """Add to ``ledger`` under one process-wide lock (Usage fields are plain ints)."""
    if ledger is None:
        return
    with _LEDGER_LOCK:
        usage = ledger.phase(phase)
        usage.calls += calls
        usage.cached_calls += cached
        usage.prompt_tokens += prompt
        usage.completion_tokens += completion
        usage.failures += failures


class AccountedChat(ChatLayer):
    """Counts every attempt: successes with their tokens (estimated when the server sends no
    usage), failures by count. Cancellation is not a failure."""

    def __init__(self, inner: ChatBase, ledger: UsageLedger | None) -> None:
        super().__init__(inner)
        self.ledger = ledger

    def complete(self, request: ChatRequest) -> Completion:
        try:
            result = self.inner.complete(request)
        except Cancelled:
            raise
        except Exception:
            record_usage(self.ledger, request.phase, failures=1)
            raise
        prompt = result.prompt_tokens
        completion = result.completion_tokens
        record_usage(
            self.ledger, request.phase, calls=1,
            prompt=prompt if prompt is not None else count_message_tokens(request.messages),
            completion=completion if completion is not None else count_tokens(result.text))
        return result

    def open_stream(self, request: ChatRequest) -> TextStream:
        try:
            text_stream = self.inner.open_stream(request)
        except Cancelled:
            raise
        except Exception:
            record_usage(self.ledger, request.phase, failures=1)
            raise

        def record(s: TextStream) -> None:
            if s.failed:
                record_usage(self.ledger, request.phase, failures=1)
                return
            prompt = s.prompt_tokens
            completion = s.completion_tokens
            record_usage(
                self.ledger, request.phase, calls=1,
                prompt=prompt if prompt is not None else count_message_tokens(request.messages),
                completion=completion if completion is not None else count_tokens("".join(s.parts)))

        text_stream.add_closer(record)
        return text_stream


# ---------------------------------------------------------------------------------------------
# concurrency limit

# Which waiting call a free slot goes to, lowest first (then in the order they came). A person
# waiting on an answer goes first. Indexing's calls go in the order their work depends on each
# other: a chunk's first pass starts the longest chain (its gleaning, the summaries of what it
# names, the reports of their communities), so it goes before a gleaning, a gleaning before a
# summary and a summary before a report. At the end of a run the last chain is then as short as
# the slots allow, instead of a late chunk's first pass waiting behind others' gleanings.
_PHASE_PRIORITY = {"chat": 0, "query": 0, "global_map": 0, "global_reduce": 0,
                   "extract": 1, "glean": 2, "resolution": 3, "summarize": 3, "report": 4}


def call_priority(phase: str) -> int:
    return _PHASE_PRIORITY.get(phase, 1)


@dataclass(frozen=True)
class _Ticket:
    priority: int
    arrival: int
    since: float


class PrioritySlots:
    """A bounded counting semaphore that lets its waiters in by priority (lower first), then by
    arrival. A waiter that has waited ``patience`` seconds goes before any priority, so a steady
    stream of urgent calls (another knowledge base's extraction) delays a report, never starves it.
    ``acquire`` calls ``check`` about every 0.1 s while it waits, outside the lock, so a cancelled
    task waiting behind a busy model leaves promptly."""

    def __init__(self, limit: int, patience: float = 30.0) -> None:
        self.limit = max(1, limit)
        self.patience = patience
        self._free = self.limit
        self._cond = threading.Condition()
        self._waiting: list[_Ticket] = []  # a few dozen at most: the callers' threads
        self._arrivals = itertools.count()

    def acquire(self, check: Callable[[], None], priority: int = 0) -> None:
        with self._cond:
            if self._free and not self._waiting:
                self._free -= 1
                return
            ticket = _Ticket(priority, next(self._arrivals), time.monotonic())
            self._waiting.append(ticket)
        try:
            while not self._took(ticket):
                check()
        except BaseException:
            self._leave(ticket)
            raise

    def _first_in_line(self) -> _Ticket:
        now = time.monotonic()
        return min(self._waiting, key=lambda t: (t.priority if now - t.since < self.patience else -1, t.arrival))

    def _took(self, ticket: _Ticket) -> bool:
        """Take a slot if ``ticket`` is first in line and one is free, else wait up to 0.1 s."""
        with self._cond:
            deadline = time.monotonic() + 0.1
            while not (self._free and self._first_in_line() is ticket):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            self._waiting.remove(ticket)
            self._free -= 1
            if self._free and self._waiting:
                self._cond.notify_all()  # the next in line may take the next free slot
            return True

    def _leave(self, ticket: _Ticket) -> None:
        with self._cond:
            if ticket in self._waiting:
                self._waiting.remove(ticket)
                self._cond.notify_all()

    def release(self) -> None:
        with self._cond:
            if self._free >= self.limit:
                raise ValueError("a slot was released that was not taken")
            self._free += 1
            self._cond.notify_all()

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._waiting)


_SEMAPHORES: dict[tuple[str, int], PrioritySlots] = {}
_SEMAPHORES_LOCK = threading.Lock()


def shared_semaphore(key: str, limit: int) -> PrioritySlots:
    """One semaphore per (model key, limit) per process, so separately built wrappers for the
    same model (one per task, say) still share the limit."""
    with _SEMAPHORES_LOCK:
        sem = _SEMAPHORES.get((key, limit))
        if sem is None:
            sem = _SEMAPHORES[(key, limit)] = PrioritySlots(limit)
        return sem


class LimitedChat(ChatLayer):
    """At most the slots' limit of requests in flight (kbgraph.llm.limits: in this process, or
    shared by every process of a deployment)."""

    def __init__(self, inner: ChatBase, slots: "Slots") -> None:
        super().__init__(inner)
        self.slots = slots

    def complete(self, request: ChatRequest) -> Completion:
        handle = self.slots.acquire(request.check_cancel, call_priority(request.phase))
        try:
            return self.inner.complete(request)
        finally:
            self.slots.release(handle)

    def open_stream(self, request: ChatRequest) -> TextStream:
        handle = self.slots.acquire(request.check_cancel, call_priority(request.phase))
        try:
            text_stream = self.inner.open_stream(request)
        except BaseException:
            self.slots.release(handle)
            raise
        # The slot is held until the stream is drained or closed.
        text_stream.add_closer(lambda _s: self.slots.release(handle))
        return text_stream


class RequestBudget:
    """Requests and tokens per minute for one model, shared by every wrapper of it in a process,
    and a pause that every caller honours after the server said to wait (a 429's Retry-After).

    Two token buckets refilled continuously (a minute's budget at most, full at the start). A
    request takes one request and its estimated prompt tokens before it goes out; its completion
    tokens are taken when it comes back, so a budget overdrawn by long answers delays the next
    requests instead of being exceeded. A request larger than the whole budget waits for a full
    bucket rather than forever.
    """

    def __init__(self, requests_per_minute: int = 0, tokens_per_minute: int = 0) -> None:
        self.rpm, self.tpm = requests_per_minute, tokens_per_minute
        self._lock = threading.Lock()
        self._requests, self._tokens = float(requests_per_minute), float(tokens_per_minute)
        self._at = time.monotonic()
        self._paused_until = 0.0
        self.waited = 0.0  # seconds callers spent waiting for the budget (for reports and tests)

    def active(self) -> bool:
        return bool(self.rpm or self.tpm or self._paused_until)

    def _refill(self, now: float) -> None:
        elapsed, self._at = now - self._at, now
        self._requests = min(float(self.rpm), self._requests + elapsed * self.rpm / 60.0)
        self._tokens = min(float(self.tpm), self._tokens + elapsed * self.tpm / 60.0)

    def _wait_needed(self, tokens: int, now: float) -> float:
        wait = max(0.0, self._paused_until - now)
        if self.rpm and self._requests < 1.0:
            wait = max(wait, (1.0 - self._requests) * 60.0 / self.rpm)
        if self.tpm:
            want = min(float(tokens), float(self.tpm))
            if self._tokens < want:
                wait = max(wait, (want - self._tokens) * 60.0 / self.tpm)
        return wait

    def take(self, tokens: int, check_cancel: Callable[[], None]) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                self._refill(now)
                wait = self._wait_needed(tokens, now)
                if wait <= 0:
                    if self.rpm:
                        self._requests -= 1.0
                    if self.tpm:
                        self._tokens -= min(float(tokens), float(self.tpm))
                    return
            check_cancel()
            step = min(wait, 0.1)
            time.sleep(step)
            self.waited += step

    def spend(self, tokens: int) -> None:
        if self.tpm and tokens:
            with self._lock:
                self._refill(time.monotonic())
                self._tokens -= tokens

    def pause(self, seconds: float) -> None:
        with self._lock:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)


_BUDGETS: dict[tuple[str, int, int], RequestBudget] = {}


def shared_budget(key: str, requests_per_minute: int, tokens_per_minute: int) -> RequestBudget:
    with _SEMAPHORES_LOCK:
        found = _BUDGETS.get((key, requests_per_minute, tokens_per_minute))
        if found is None:
            found = _BUDGETS[(key, requests_per_minute, tokens_per_minute)] = RequestBudget(
                requests_per_minute, tokens_per_minute)
        return found


class BudgetedChat(ChatLayer):
    """Sends a request only within the model's per-minute budget (RequestBudget), and makes every
    caller of the model wait out a server's Retry-After, so that one 429 slows the whole run down
    for as long as the server asked instead of each of its calls finding out for itself."""

    def __init__(self, inner: ChatBase, budget: "Budget") -> None:
        super().__init__(inner)
        self.budget = budget

    def _before(self, request: ChatRequest) -> None:
        if self.budget.active():
            self.budget.take(count_message_tokens(request.messages) if self.budget.tpm else 0,
                             request.check_cancel)

    def _server_said_wait(self, exc: TransientLLMError) -> None:
        if exc.retry_after:
            self.budget.pause(exc.retry_after)

    def complete(self, request: ChatRequest) -> Completion:
        self._before(request)
        try:
            result = self.inner.complete(request)
        except TransientLLMError as exc:
            self._server_said_wait(exc)
            raise
        if self.budget.tpm:
            self.budget.spend(result.completion_tokens if result.completion_tokens is not None
                              else count_tokens(result.text))
        return result

    def open_stream(self, request: ChatRequest) -> TextStream:
        self._before(request)
        try:
            return self.inner.open_stream(request)
        except TransientLLMError as exc:
            self._server_said_wait(exc)
            raise


# ---------------------------------------------------------------------------------------------
# retry

@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    backoff_base: float = 1.0  # first wait ~ base seconds, doubling, with full jitter
    backoff_max: float = 30.0


def call_with_retry(fn: Callable[[], T], policy: RetryPolicy, what: str,
                    cancel: CancelCheck | None = None) -> T:
    """Run ``fn``, retrying TransientLLMError with exponential backoff and jitter.

    Cancellation is checked before each attempt and while sleeping between attempts. A
    non-transient error propagates at once; running out of attempts raises LLMError.
    """

    def check() -> None:
        if cancel is not None and cancel():
            raise Cancelled(f"{what}: cancelled")

    def delay_after(failures: int, exc: BaseException | None) -> float:
        # Full jitter on an exponential ceiling; a server's Retry-After wins if it is longer.
        ceiling = min(policy.backoff_max, policy.backoff_base * 2 ** (failures - 1))
        delay = random.uniform(0, ceiling)
        if isinstance(exc, TransientLLMError) and exc.retry_after:
            delay = max(delay, min(exc.retry_after, policy.backoff_max))
        return delay

    def sleep(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            check()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.1))

    # The first attempt runs without building the retry machinery: nearly every call succeeds at
    # once, and an indexing run makes hundreds of calls per document.
    check()
    try:
        return fn()
    except TransientLLMError as exc:
        if policy.max_retries < 1:
            raise LLMError(f"{what}: gave up after 1 attempts: {exc}") from exc
        sleep(delay_after(1, exc))

    def wait(state: RetryCallState) -> float:  # tenacity counts from the second attempt
        return delay_after(state.attempt_number + 1, state.outcome.exception() if state.outcome else None)

    retrying = Retrying(stop=stop_after_attempt(policy.max_retries), wait=wait, sleep=sleep,
                        retry=retry_if_exception_type(TransientLLMError), reraise=True)
    attempts = 1
    try:
        for attempt in retrying:
            with attempt:
                check()
                attempts += 1
                return fn()
    except TransientLLMError as exc:
        raise LLMError(f"{what}: gave up after {attempts} attempts: {exc}") from exc
    raise AssertionError("unreachable")  # pragma: no cover


class RetryingChat(ChatLayer):
    def __init__(self, inner: ChatBase, policy: RetryPolicy) -> None:
        super().__init__(inner)
        self.policy = policy

    def complete(self, request: ChatRequest) -> Completion:
        return call_with_retry(lambda: self.inner.complete(request), self.policy,
                               f"chat model {self.model_name!r}", request.cancel)

    def open_stream(self, request: ChatRequest) -> TextStream:
        # Only opening is retried: once pieces have reached the caller a retry would repeat them.
        return call_with_retry(lambda: self.inner.open_stream(request), self.policy,
                               f"chat model {self.model_name!r}", request.cancel)


# ---------------------------------------------------------------------------------------------
# cache

class SqliteCache:
    """A small key/value store in one SQLite file, safe across threads and processes.

    One connection per (process, file): after a fork (Celery prefork) the child opens its own,
    as SQLite connections must not cross a fork. WAL mode lets readers proceed during a write.
    """

    _instances: ClassVar[dict[tuple[int, str], SqliteCache]] = {}
    _instances_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def open(cls, path: Path) -> SqliteCache:
        key = (os.getpid(), str(Path(path).resolve()))
        with cls._instances_lock:
            inst = cls._instances.get(key)
            if inst is None:
                inst = cls._instances[key] = cls(Path(path))
            return inst

    # how long a statement waits for another process's write to end before the cache gives up on it
    busy_seconds: ClassVar[float] = 30.0

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.lock = threading.Lock()
        self.conn = sqlite3.connect(str(path), check_same_thread=False, timeout=self.busy_seconds,
                                    isolation_level=None)
        with contextlib.suppress(sqlite3.OperationalError):  # set by whoever made the file; kept
            self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self._tables: set[str] = set()
        self._asking: dict[tuple[str, str], threading.Event] = {}

    def claim(self, table: str, key: str) -> tuple[bool, threading.Event]:
        """(True, event) when no caller of this process is asking for ``key`` now: the caller asks,
        then calls ``settle``. (False, event) when one is: ``event`` is set once it has its answer."""
        with self.lock:
            asking = self._asking.get((table, key))
            if asking is not None:
                return False, asking
            asking = self._asking[(table, key)] = threading.Event()
            return True, asking

    def settle(self, table: str, key: str) -> None:
        with self.lock:
            asking = self._asking.pop((table, key), None)
        if asking is not None:
            asking.set()

    def ensure_table(self, table: str, ddl: str) -> None:
        if table in self._tables:
            return
        with self.lock:
            self.conn.execute(ddl)
            self._tables.add(table)

    @staticmethod
    def unavailable(exc: sqlite3.Error, doing: str) -> None:
        """A cache that cannot be read or written now (another process's write outlasting
        ``busy_seconds``, a full disk) costs the answer's reuse, never the call that wanted it."""
        log.warning("kbgraph: the cache could not %s (%s); going on without it", doing, exc)


def _table_name(prefix: str, purpose: str) -> str:
    return prefix + (re.sub(r"[^0-9A-Za-z_]", "_", purpose) or "default")


def _cache_payload(model: str, request: ChatRequest) -> str:
    """The JSON text a cache key hashes (kept byte for byte across releases: a different text would
    miss every stored answer)."""
    return json.dumps({
        "model": model, "prompt_version": request.prompt_version,
        "messages": [[m.role, m.content] for m in request.messages],
        "temperature": request.temperature, "max_tokens": request.max_tokens,
    }, ensure_ascii=False, sort_keys=True)


def _fast_cache_payload(model: str, request: ChatRequest) -> str:
    """``_cache_payload``'s exact text, with the strings (prompts of several KB) written by orjson,
    which escapes them as the stdlib does with ``ensure_ascii=False``, at a fraction of its CPU.
    Raises orjson.JSONEncodeError on what orjson cannot write (lone surrogates)."""
    def text(value: str) -> str:
        return orjson.dumps(value).decode("utf-8")

    messages = ", ".join(f"[{text(m.role)}, {text(m.content)}]" for m in request.messages)
    return (f'{{"max_tokens": {json.dumps(request.max_tokens)}, "messages": [{messages}], '
            f'"model": {text(model)}, "prompt_version": {text(request.prompt_version)}, '
            f'"temperature": {json.dumps(request.temperature)}}}')


def chat_cache_key(model: str, request: ChatRequest) -> str:
    try:
        if type(request.temperature) in (int, float) and type(request.max_tokens) in (int, type(None)):
            payload = _fast_cache_payload(model, request)
        else:
            payload = _cache_payload(model, request)
    except (orjson.JSONEncodeError, TypeError):
        payload = _cache_payload(model, request)
    # surrogatepass: text read with surrogateescape (undecodable bytes) still gets a key
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


class CachedChat(ChatLayer):
    """Answers repeated requests from SQLite, one table per phase (``llm_<phase>``).

    Only usable answers are stored (non-empty, and accepted by the request's ``accept`` check when
    it has one): a garbled reply must be asked again on the next run, not pinned for good. Streams
    are never cached. A hit counts as ``cached_calls`` in the ledger.
    """

    def __init__(self, inner: ChatBase, path: Path, ledger: UsageLedger | None = None) -> None:
        super().__init__(inner)
        self.remembers_answers = True
        self.store = SqliteCache.open(path)
        self.ledger = ledger

    def _table(self, phase: str) -> str:
        table = _table_name("llm_", phase)
        self.store.ensure_table(table, f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY,"
                                " text TEXT NOT NULL, prompt_tokens INTEGER,"
                                " completion_tokens INTEGER, created REAL)")
        return table

    def complete(self, request: ChatRequest) -> Completion:
        request.check_cancel()
        try:
            table = self._table(request.phase)
        except sqlite3.Error as exc:
            SqliteCache.unavailable(exc, "open its table")
            return self.inner.complete(request)
        key = chat_cache_key(self.model_name, request)
        while True:
            hit = self._stored(table, key, request)
            if hit is not None:
                record_usage(self.ledger, request.phase, cached=1)
                return hit
            # the same request asked twice at once (a summary fetched ahead, then by the summary pass;
            # two copies of one chunk) is one call: the second waits for the first's answer
            first, answered = self.store.claim(table, key)
            if first:
                break
            while not answered.wait(0.1):
                request.check_cancel()
        hit = self._stored(table, key, request)  # answered between the look and the claim
        if hit is not None:
            self.store.settle(table, key)
            record_usage(self.ledger, request.phase, cached=1)
            return hit
        try:
            result = self.inner.complete(request)
            if request.usable(result.text):
                self._keep(table, key, result)
        finally:
            self.store.settle(table, key)
        return result

    def _keep(self, table: str, key: str, result: Completion) -> None:
        try:
            with self.store.lock:
                self.store.conn.execute(
                    f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?, ?, ?)",
                    (key, result.text, result.prompt_tokens, result.completion_tokens, time.time()))
        except sqlite3.Error as exc:
            SqliteCache.unavailable(exc, "keep an answer")

    def _stored(self, table: str, key: str, request: ChatRequest) -> Completion | None:
        try:
            with self.store.lock:
                row = self.store.conn.execute(
                    f"SELECT text, prompt_tokens, completion_tokens FROM {table} WHERE key = ?",
                    (key,)).fetchone()
        except sqlite3.Error as exc:
            SqliteCache.unavailable(exc, "be read")
            return None
        if row is not None and request.usable(row[0]):
            return Completion(row[0], row[1], row[2], cached=True)
        return None


__all__ = [
    "AccountedChat", "BudgetedChat", "CachedChat", "ChatBase", "ChatLayer", "ChatRequest", "Completion",
    "LimitedChat", "PrioritySlots", "RequestBudget", "RetryPolicy", "RetryingChat", "SqliteCache", "TextStream",
    "TransientLLMError", "call_priority", "call_with_retry", "chat_cache_key", "count_message_tokens",
    "count_tokens", "record_usage", "shared_budget", "shared_semaphore",
]
