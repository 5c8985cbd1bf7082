"""The answer cache: a small SQLite key/value store shared across threads and processes, the cache
key of a chat request (kept byte for byte across releases), and the layer that answers repeated
requests from it. The vector cache (embedders.CachedEmbedder) keeps its table in the same store."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import ClassVar

import orjson

from kbgraph.llm.base import UsageLedger
from kbgraph.llm.layers.accounting import record_usage
from kbgraph.llm.layers.base import ChatBase, ChatLayer, ChatRequest, Completion

log = logging.getLogger(__name__)


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


__all__ = ["CachedChat", "SqliteCache", "chat_cache_key"]
