"""Embedding providers (OpenAI protocol, bundled local multilingual-e5-small, feature hashing) and their cache.

All return float32 rows, L2-normalized, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from kbgraph.llm.base import UsageLedger
from kbgraph.llm.layers.accounting import record_usage
from kbgraph.llm.layers.base import TransientLLMError
from kbgraph.llm.layers.cache import SqliteCache
from kbgraph.llm.layers.retry import RetryPolicy, call_with_retry
from kbgraph.parse.token_count import count_tokens


def _normalize(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1.0, norms)


# ---------------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+", re.UNICODE)
# in ASCII text \w is [A-Za-z0-9_]: every other ASCII character separates words, so such text splits
# into the same words by str.split once those are spaces, several times faster than the regex
_ASCII_NON_WORD = str.maketrans({chr(i): " " for i in range(128) if not (chr(i).isalnum() or chr(i) == "_")})


def _words(text: str) -> list[str]:
    lowered = text.lower()
    if lowered.isascii():
        return lowered.translate(_ASCII_NON_WORD).split()
    return _WORD.findall(lowered)


class HashEmbedder:
    """Deterministic feature hashing: lexical overlap, NOT meaning.

    Each lower-cased word token and each character trigram of a word (with boundary marks) is
    hashed (blake2b, so stable across processes) to one of ``dim`` buckets with a hashed sign,
    then the vector is L2-normalized. Texts sharing words or word fragments come out close;
    synonyms do not. Meant for tests and machines too small for a neural model; it needs no
    download and costs microseconds per text. An empty text gives the zero vector.

    A word's features are hashed once per process and kept in one flat table (the vocabulary of a
    corpus repeats): a batch then gathers the features of all its word occurrences and adds them
    into the rows with one ``bincount``, with no per-batch vocabulary or matrix to build. The
    weights are halves and ones, so the sums are exact and the vectors equal those of adding
    feature by feature, in any order.
    """

    _VOCABULARY_LIMIT = 500_000  # words kept; past it the table starts over (bounded memory)

    similarity_floor = 0.0

    def __init__(self, dim: int = 384, ledger: UsageLedger | None = None) -> None:
        self.dim = dim
        self.model_name = f"hash-{dim}"
        self.ledger = ledger
        self._lock = threading.Lock()
        self._start_over()

    def _start_over(self) -> None:
        # word -> its number; word n's features are _buckets/_weights[_offsets[n]:_offsets[n + 1]].
        # The arrays grow by doubling and are only appended to, so a batch reading the prefix it
        # saw under the lock is never disturbed by another thread adding words after it.
        self._ids: dict[str, int] = {}
        self._offsets = np.zeros(1024, dtype=np.int64)
        self._buckets = np.zeros(8192, dtype=np.int64)
        self._weights = np.zeros(8192, dtype=np.float64)
        self._features = 0

    @staticmethod
    def _word_features(word: str) -> list[tuple[str, float]]:
        marked = f"#{word}#"
        return [("w:" + word, 1.0)] + [("c:" + marked[i:i + 3], 0.5) for i in range(len(marked) - 2)]

    def _hashed(self, word: str) -> tuple[list[int], list[float]]:
        """The word's (bucket, signed weight) pairs."""
        buckets, weights = [], []
        for feat, weight in self._word_features(word):
            h = int.from_bytes(hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest(), "little")
            buckets.append(h % self.dim)
            weights.append(weight if (h >> 63) & 1 else -weight)
        return buckets, weights

    def _add_words(self, words: Sequence[str]) -> None:
        """Number and hash words not seen yet (the caller holds the lock)."""
        hashed = [self._hashed(word) for word in words]
        lengths = np.fromiter((len(b) for b, _ in hashed), dtype=np.int64, count=len(hashed))
        first, count, end = len(self._ids), len(words), self._features + int(lengths.sum())
        if first + count + 1 > len(self._offsets):
            self._offsets = _grown(self._offsets, first + count + 1)
        if end > len(self._buckets):
            self._buckets, self._weights = _grown(self._buckets, end), _grown(self._weights, end)
        self._offsets[first + 1:first + count + 1] = self._features + np.cumsum(lengths)
        self._buckets[self._features:end] = [b for buckets, _ in hashed for b in buckets]
        self._weights[self._features:end] = [w for _, weights in hashed for w in weights]
        self._features = end
        for number, word in enumerate(words, start=first):
            self._ids[word] = number

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        tokens = [_words(text) for text in texts]
        per_text = np.fromiter(map(len, tokens), dtype=np.int64, count=len(texts))
        words = [word for words in tokens for word in words]
        if not words:
            return np.zeros((len(texts), self.dim), dtype=np.float32)
        with self._lock:
            get = self._ids.get
            ids = [get(word) for word in words]
            if None in ids:
                new = list(dict.fromkeys(w for w, i in zip(words, ids) if i is None))
                if len(self._ids) + len(new) > self._VOCABULARY_LIMIT:
                    self._start_over()  # and number every word of this batch anew
                    new = list(dict.fromkeys(words))
                self._add_words(new)
                get = self._ids.get
                ids = [get(word) for word in words]
            offsets, buckets, weights = self._offsets, self._buckets, self._weights
        numbers = np.asarray(ids, dtype=np.int64)
        starts = offsets[numbers]
        lengths = offsets[numbers + 1] - starts
        # every feature of every word occurrence: its position in the table and the text it adds to
        ends = np.cumsum(lengths)
        positions = np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(starts - (ends - lengths), lengths)
        rows = np.repeat(np.repeat(np.arange(len(texts), dtype=np.int64), per_text), lengths)
        out = np.bincount(rows * self.dim + buckets[positions], weights=weights[positions],
                          minlength=len(texts) * self.dim).reshape(len(texts), self.dim)
        record_usage(self.ledger, "embed", calls=1, prompt=len(words))
        return _normalize(out)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)


def _grown(array: np.ndarray, needed: int) -> np.ndarray:
    size = len(array)
    while size < needed:
        size *= 2
    bigger = np.zeros(size, dtype=array.dtype)
    bigger[:len(array)] = array
    return bigger


# ---------------------------------------------------------------------------------------------

class OpenAIEmbedder:
    """``/embeddings`` of any OpenAI-compatible server, in batches, with retries.

    ``dim`` is learned from the first response; asking for it earlier embeds one probe text.
    """

    similarity_floor = 0.0

    def __init__(self, base_url: str, model: str, api_key: str = "", *, batch_size: int = 64,
                 concurrency: int = 4, timeout: float = 120.0, retry: RetryPolicy | None = None,
                 ledger: UsageLedger | None = None, advice: str = "") -> None:
        from kbgraph.llm.openai_chat import setting_advice, shared_client

        self.base_url = base_url
        self.model_name = model
        self.batch_size = max(1, batch_size)
        self.concurrency = max(1, concurrency)
        self.client = shared_client(base_url, api_key, timeout)
        self.retry = retry or RetryPolicy()
        self.ledger = ledger
        self._dim: int | None = None
        self._where = f"embedding model {model!r} at {base_url}"
        # where base_url was chosen, for the message when nothing answers there
        self._advice = advice or setting_advice("embedding_base_url")

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def _call(self, batch: list[str]) -> tuple[np.ndarray, int | None]:
        from kbgraph.llm.openai_chat import post_json

        # base64 is 4x smaller on the wire than float lists and decodes in one numpy call; servers
        # that ignore encoding_format send float lists, which pass through. The plain JSON reply
        # skips the SDK's typed models (their construction costs more CPU than the exchange).
        response = post_json(self.client, "/embeddings",
                             {"model": self.model_name, "input": batch, "encoding_format": "base64"}, self._where,
                             self._advice)
        items = response.get("data") if isinstance(response, dict) else None
        if not isinstance(items, list) or len(items) != len(batch):
            got = len(items) if isinstance(items, list) else 0
            raise TransientLLMError(f"{self._where}: {got} vectors for {len(batch)} texts")
        try:
            items = sorted(items, key=lambda d: d.get("index", 0))
            vectors = [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4")
                       if isinstance(d["embedding"], str) else np.asarray(d["embedding"], dtype=np.float32)
                       for d in items]
            rows = np.stack(vectors).astype(np.float32, copy=False)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TransientLLMError(f"{self._where}: unreadable embeddings: {exc}") from exc
        usage = response.get("usage")
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        return rows, tokens if isinstance(tokens, int) else None

    def _call_accounted(self, batch: list[str]) -> tuple[np.ndarray, int | None]:
        try:
            return self._call(batch)
        except Exception:
            record_usage(self.ledger, "embed", failures=1)
            raise

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        # Servers reject empty strings; a space embeds as "nothing" just as well.
        batches = [[t if t.strip() else " " for t in texts[start:start + self.batch_size]]
                   for start in range(0, len(texts), self.batch_size)]
        if len(batches) == 1 or self.concurrency == 1:
            parts = [self._embed_batch(b) for b in batches]
        else:
            # several requests in flight, so the server's work and ours (encoding the request,
            # decoding the vectors) overlap; results keep the order of the batches
            with ThreadPoolExecutor(max_workers=min(self.concurrency, len(batches))) as pool:
                parts = list(pool.map(self._embed_batch, batches))
        out = _normalize(np.concatenate(parts))
        self._dim = out.shape[1]
        return out

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        rows, tokens = call_with_retry(lambda: self._call_accounted(batch), self.retry, self._where)
        record_usage(self.ledger, "embed", calls=1,
                     prompt=tokens if tokens is not None else sum(map(count_tokens, batch)))
        return rows


# ---------------------------------------------------------------------------------------------

# pieces per onnxruntime run: two full windows. Attention's working memory grows with a
# batch's windows times their length squared, and onnxruntime's arena keeps its largest: at 4096
# (eight 512-piece windows) the arena held ~250 MB and 512-token chunks cost 240 ms of CPU each, at
# 1024 ~60 MB and 165-190 ms (MuSiQue passages 35-39 ms vs 47 ms; short texts the same; bench/README.md)
_MAX_BATCH_TOKENS = 1024


class LocalEmbedder:
    """multilingual-e5-small, bundled (kbgraph/llm/e5/), on the CPU through onnxruntime.

    Texts searched over are embedded as "passage: ...", what is searched with as "query: ...", the
    way the model was trained. The model reads at most 512 pieces, <s> and </s> included. A longer
    text is cut into equal overlapping windows that fit, each window is embedded, and the window
    vectors are averaged and re-normalized, so the tail of a long chunk counts as much as its head.
    Windows of all texts are sorted by length and batched by length under a budget of pieces: the
    model's graph takes windows of one length per run, with no padding and no mask, which lets
    onnxruntime use its fused attention kernel, and the budget keeps its working memory small.
    ``threads`` batches run at once, each on one core (onnxruntime releases the GIL): separate
    batches never wait for each other, so on a busy machine they cost no more than running them
    in turn.
    """

    MODEL_NAME = "multilingual-e5-small"
    dim = 384
    # e5's cosines sit high: on HotpotQA a question's gold passages average 0.87, the others 0.755
    # (90th percentile 0.78); 0.7 maps the others to ~0.2 and keeps the order (bench/README.md)
    similarity_floor = 0.7

    def __init__(self, *, threads: int = 1, cache_root: Path | None = None, batch_size: int = 32,
                 max_batch_tokens: int = _MAX_BATCH_TOKENS, overlap: int = 32,
                 ledger: UsageLedger | None = None) -> None:
        self.threads = max(1, threads)
        self.cache_root = cache_root
        self.batch_size = max(1, batch_size)
        self.max_batch_tokens = max_batch_tokens
        self.overlap = overlap
        self.ledger = ledger
        self.model_name = self.MODEL_NAME

    @property
    def encoder(self) -> Any:
        from kbgraph.llm.e5.encoder import shared_encoder

        return shared_encoder(self.cache_root, 1)  # one core a batch; several batches at once

    def load(self) -> None:
        """Load the model now (servers and workers do, so no request pays for it)."""
        encoder = self.encoder
        encoder.forward(encoder.token_ids(["warm up"]))

    def windows(self, ids: list[int], width: int) -> list[list[int]]:
        """The fewest windows of at most ``width`` pieces overlapping by ~``overlap``, all of
        one length: cost is about linear in pieces fed, so equal windows (700 pieces -> 2 x 366)
        are cheaper than full ones (2 x 510) and weigh every part of the text alike."""
        n = len(ids)
        if n <= width:
            return [ids]
        overlap = min(self.overlap, width // 2)
        count = math.ceil((n - overlap) / (width - overlap))
        length = min(width, math.ceil((n + (count - 1) * overlap) / count))
        starts = [round(i * (n - length) / (count - 1)) for i in range(count)]
        return [ids[s:s + length] for s in starts]

    def _batches(self, order: list[int], pieces: list[list[int]]) -> Iterator[list[int]]:
        """Runs of ``order`` (sorted by length) of windows of one length, at most batch_size
        windows and max_batch_tokens pieces each."""
        batch: list[int] = []
        for i in order:
            if batch and (len(batch) == self.batch_size or len(pieces[i]) != len(pieces[batch[0]])
                          or (len(batch) + 1) * (len(pieces[i]) + 2) > self.max_batch_tokens):
                yield batch
                batch = []
            batch.append(i)
        if batch:
            yield batch

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, self.encoder.passage_prefix if texts else "")

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, self.encoder.query_prefix if texts else "")

    def _embed(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encoder = self.encoder
        token_ids = encoder.token_ids([prefix + t for t in texts])
        width = encoder.max_tokens - 2  # room for <s> and </s>
        owners: list[int] = []
        pieces: list[list[int]] = []
        for owner, ids in enumerate(token_ids):
            for window in self.windows(ids, width):
                owners.append(owner)
                pieces.append(window)
        order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
        vectors = np.zeros((len(pieces), self.dim), dtype=np.float32)

        def run(idx: list[int]) -> None:
            vectors[idx] = encoder.forward([pieces[i] for i in idx])

        batches = list(self._batches(order, pieces))
        if self.threads > 1 and len(batches) > 1:
            with ThreadPoolExecutor(max_workers=min(self.threads, len(batches)),
                                    thread_name_prefix="kbgraph-local-embed") as pool:
                list(pool.map(run, batches))
        else:
            for idx in batches:
                run(idx)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # windows count alike: normalize each before summing
        np.add.at(out, np.asarray(owners), _normalize(vectors))
        record_usage(self.ledger, "embed", calls=1, prompt=sum(len(ids) for ids in token_ids))
        return _normalize(out)


# ---------------------------------------------------------------------------------------------

class CachedEmbedder:
    """Vectors by (model_name, sha256(text)) in SQLite (table ``embeddings``), float32 blobs.

    One lookup query per batch of texts; only the misses reach the inner embedder, so
    re-indexing unchanged text costs nothing. In the ledger's "embed" phase, ``cached_calls``
    counts texts answered from the cache.
    """

    _LOOKUP_CHUNK = 500  # stays far below SQLite's bound-parameter limit

    def __init__(self, inner: Any, path: Path, ledger: UsageLedger | None = None) -> None:
        self.inner = inner
        self.model_name: str = inner.model_name
        self.similarity_floor: float = inner.similarity_floor
        self.ledger = ledger
        self.store = SqliteCache.open(path)
        try:
            self.store.ensure_table("embeddings", "CREATE TABLE IF NOT EXISTS embeddings (model TEXT,"
                                    " key TEXT, vec BLOB NOT NULL, PRIMARY KEY (model, key))")
        except sqlite3.Error as exc:
            SqliteCache.unavailable(exc, "make its table")
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        return self._dim or int(self.inner.dim)

    def load(self) -> None:
        """Load the inner model now, where it has one to load."""
        load = getattr(self.inner, "load", None)
        if load is not None:
            load()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._cached(texts, self.inner.embed, self.model_name)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        # a model may embed a question unlike the same words as a passage: its own cache space
        return self._cached(texts, self.inner.embed_query, self.model_name + "|query")

    def _lookup(self, keys: list[str], space: str) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        try:
            with self.store.lock:
                for start in range(0, len(keys), self._LOOKUP_CHUNK):
                    chunk = keys[start:start + self._LOOKUP_CHUNK]
                    rows = self.store.conn.execute(
                        f"SELECT key, vec FROM embeddings WHERE model = ? AND key IN"
                        f" ({','.join('?' * len(chunk))})", (space, *chunk)).fetchall()
                    found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        except sqlite3.Error as exc:
            SqliteCache.unavailable(exc, "be read")
        return found

    def _keep(self, space: str, keys: list[str], vectors: np.ndarray) -> None:
        try:
            with self.store.lock, self.store.conn:
                self.store.conn.execute("BEGIN")
                self.store.conn.executemany(
                    "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)",
                    [(space, k, vectors[i].astype(np.float32).tobytes()) for i, k in enumerate(keys)])
        except sqlite3.Error as exc:
            SqliteCache.unavailable(exc, "keep vectors")

    def _cached(self, texts: Sequence[str], compute: Any, space: str) -> np.ndarray:
        if not texts:
            return compute([])
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        unique = list(dict.fromkeys(keys))
        found = self._lookup(unique, space)
        missing = [k for k in unique if k not in found]
        if missing:
            text_of = dict(zip(keys, texts))
            fresh = compute([text_of[k] for k in missing])
            self._keep(space, missing, fresh)
            found.update((k, fresh[i]) for i, k in enumerate(missing))
        missed = set(missing)
        hits = sum(1 for k in keys if k not in missed)
        record_usage(self.ledger, "embed", cached=hits)
        out = np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
        self._dim = out.shape[1]
        return out


__all__ = ["CachedEmbedder", "HashEmbedder", "LocalEmbedder", "OpenAIEmbedder"]
