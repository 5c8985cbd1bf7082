"""In-memory postings of one text field over one slice of a store's rows (one KB, one kind).

FTS5 finds the rows holding a term, but hands every one of them to Python: a word common to
100k rows costs tens of milliseconds per term before any scoring. The same postings held in
numpy arrays give each term's rows, term frequencies and row lengths in microseconds, and BM25
is then a few vector operations. Collection statistics (row count, document frequency, average
length) stay the store's own, tenant-wide per field as in Elasticsearch; these postings only
supply per-row figures.

A slice is built once from the rows' token strings and then kept current from the store's change
log: rows that changed are masked out of the base arrays and their new tokens go to a small
delta. When the delta grows past a share of the base, the owner rebuilds the slice.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from itertools import chain
from dataclasses import dataclass
from functools import cache

import numpy as np

# a delta larger than this share of the base (and than the floor) asks for a rebuild
_DELTA_SHARE = 0.05
_DELTA_FLOOR = 2000
# the BM25 scores of terms held by at least this many rows are kept (the same common words come
# back question after question), up to this many bytes per instance
_SCORED_MIN_ROWS = 1000
_SCORED_BYTES = 8 << 20


@dataclass(frozen=True)
class TermRows:
    """The rows holding one term: rowids, the term's frequency in each, each row's length."""

    rowids: np.ndarray
    tf: np.ndarray
    lengths: np.ndarray


_EMPTY = TermRows(np.zeros(0, np.int64), np.zeros(0), np.zeros(0))


class FieldPostings:
    """Term -> rows for one text field of one slice of rows; see the module docstring.

    Instances are never changed after construction (``updated`` returns a new one sharing the base
    arrays), so a search may keep using one while another thread refreshes the cache. The one
    exception is the memo of common terms' scores (``scores``): it only ever holds what any thread
    would compute for the same key; entries are only added, and a full memo is replaced by an empty one.
    """

    def __init__(self, rows: Iterable[tuple[int, list[str]]]) -> None:
        read = list(rows)
        # the rows the build read, holding the field or not: what a new process would read again
        self.read_rows = len(read)
        kept = sorted((rowid, tokens) for rowid, tokens in read if tokens)
        rowids = np.fromiter((rowid for rowid, _ in kept), dtype=np.int64, count=len(kept))
        lengths = np.fromiter((len(tokens) for _, tokens in kept), dtype=np.int64, count=len(kept))
        flat = list(chain.from_iterable(tokens for _, tokens in kept))
        vocab = {token: number for number, token in enumerate(dict.fromkeys(flat))}
        terms = np.fromiter(map(vocab.__getitem__, flat), dtype=np.int64, count=len(flat))
        positions = np.repeat(np.arange(len(kept), dtype=np.int64), lengths)
        # one (term, row) pair per posting, counted: sorted by term, then row, which is CSR order
        pairs, tf = np.unique(terms * max(1, len(kept)) + positions, return_counts=True)
        posting_terms = pairs // max(1, len(kept))
        self._vocab = vocab
        self._indptr = np.concatenate([[0], np.cumsum(np.bincount(posting_terms, minlength=len(vocab)))]).astype(np.int64)
        self._rows = (pairs % max(1, len(kept))).astype(np.int32)
        self._tf = tf.astype(np.float32)
        self._rowids = rowids
        self._lengths = lengths.astype(np.float32)
        self._alive = np.ones(len(rowids), dtype=bool)
        self._dead = 0
        # rows added or changed since the build: term -> {rowid: tf}, and rowid -> length
        self._delta: dict[str, dict[int, int]] = {}
        self._delta_lengths: dict[int, int] = {}
        self._scored: dict[tuple[str, float, float], tuple[np.ndarray, np.ndarray]] = {}

    # -- on disk (store/index_files.py); only a fresh build is written, so no delta goes with it

    def to_arrays(self) -> dict[str, np.ndarray]:
        vocab = "\n".join(self._vocab).encode("utf-8")  # tokens hold only letters, digits and CJK
        return {"vocab": np.frombuffer(vocab, dtype=np.uint8), "indptr": self._indptr, "rows": self._rows,
                "tf": self._tf, "rowids": self._rowids, "lengths": self._lengths, "alive": self._alive}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> FieldPostings:
        new = object.__new__(cls)
        tokens = bytes(arrays["vocab"]).decode("utf-8").split("\n") if len(arrays["vocab"]) else []
        if len(tokens) != len(arrays["indptr"]) - 1:
            raise ValueError("postings vocabulary does not match its term pointers")
        new._vocab = {token: number for number, token in enumerate(tokens)}
        for name in ("indptr", "rows", "tf", "rowids", "lengths", "alive"):
            setattr(new, f"_{name}", arrays[name])
        new._dead = int(len(new._alive) - np.count_nonzero(new._alive))
        new._delta, new._delta_lengths, new._scored = {}, {}, {}
        new.read_rows = len(new._rowids)  # written already: it is only asked of a fresh build
        return new

    @property
    def rows(self) -> int:
        return int(len(self._rowids))

    @property
    def stale(self) -> bool:
        """Whether the changes since the build are many enough to rebuild instead."""
        changed = self._dead + len(self._delta_lengths)
        return changed > max(_DELTA_FLOOR, _DELTA_SHARE * len(self._rowids))

    def updated(self, changed: Iterable[int], rows: Iterable[tuple[int, list[str]]]) -> FieldPostings:
        """A copy in which the ``changed`` rowids hold the tokens in ``rows`` (absent: gone)."""
        new = object.__new__(FieldPostings)
        new.__dict__.update(self.__dict__)
        changed = np.unique(np.fromiter(changed, dtype=np.int64))
        positions = np.searchsorted(self._rowids, changed)
        inside = positions < len(self._rowids)
        hit = positions[inside][self._rowids[positions[inside]] == changed[inside]]
        new._alive = self._alive.copy()
        new._alive[hit] = False
        new._dead = int(len(new._alive) - np.count_nonzero(new._alive))
        gone = set(changed.tolist())
        delta_lengths = {r: n for r, n in self._delta_lengths.items() if r not in gone}
        delta: dict[str, dict[int, int]] = defaultdict(dict)
        for token, postings in self._delta.items():
            kept = {r: tf for r, tf in postings.items() if r not in gone}
            if kept:
                delta[token] = kept
        for rowid, tokens in rows:
            if not tokens:
                continue
            delta_lengths[rowid] = len(tokens)
            for token, count in Counter(tokens).items():
                delta[token][rowid] = count
        new._delta, new._delta_lengths = dict(delta), delta_lengths
        new._scored = {}
        return new

    def term(self, token: str) -> TermRows:
        """The live rows holding ``token``."""
        parts: list[TermRows] = []
        number = self._vocab.get(token)
        if number is not None:
            start, end = self._indptr[number], self._indptr[number + 1]
            rows, tf = self._rows[start:end], self._tf[start:end]
            if self._dead:
                live = self._alive[rows]
                rows, tf = rows[live], tf[live]
            parts.append(TermRows(self._rowids[rows], tf.astype(np.float64), self._lengths[rows].astype(np.float64)))
        extra = self._delta.get(token)
        if extra:
            rowids = np.fromiter(extra, dtype=np.int64, count=len(extra))
            parts.append(TermRows(rowids, np.fromiter(extra.values(), dtype=np.float64, count=len(extra)),
                                  np.array([self._delta_lengths[r] for r in extra], dtype=np.float64)))
        if not parts:
            return _EMPTY
        if len(parts) == 1:
            return parts[0]
        return TermRows(*(np.concatenate([getattr(p, name) for p in parts]) for name in ("rowids", "tf", "lengths")))

    @property
    def empty(self) -> bool:
        """No row of the slice holds the field (a field its kind no longer writes)."""
        return not (len(self._rowids) - self._dead) and not self._delta_lengths

    def scores(self, token: str, idf: float, average_length: float) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, BM25 term scores) of the live rows holding ``token``. A common term's scores are
        kept for the next query with the same statistics (``idf`` and the average length change
        with any write to the field, so they are part of the key)."""
        key = (token, idf, average_length)
        held = self._scored.get(key)
        if held is not None:
            return held
        match = self.term(token)
        found = (match.rowids, bm25(match.tf, match.lengths, idf, average_length))
        size = found[0].nbytes + found[1].nbytes
        if len(match.rowids) >= _SCORED_MIN_ROWS and size <= _SCORED_BYTES:
            if self._scored_bytes() + size > _SCORED_BYTES:
                self._scored = {}
            self._scored[key] = found
        return found

    def _scored_bytes(self) -> int:
        return sum(rows.nbytes + scores.nbytes for rows, scores in list(self._scored.values()))

    @property
    def nbytes(self) -> int:
        arrays = (self._indptr, self._rows, self._tf, self._rowids, self._lengths, self._alive)
        return int(sum(a.nbytes for a in arrays)) + 64 * len(self._vocab) + self._scored_bytes()


# Lucene keeps a document's field length in one byte (SmallFloat.intToByte4): lengths from 24 on
# keep four significant bits of what is over 24 (100 tokens read back as 96). Its BM25 scores with
# the length read back.
_FREE_LENGTHS = 24


def _encoded_lengths(n: np.ndarray) -> np.ndarray:
    """Field lengths as Lucene's norms give them back (SmallFloat.byte4ToInt(intToByte4(n)))."""
    rest = np.maximum(n - _FREE_LENGTHS, 0)
    bits = np.where(rest > 0, np.floor(np.log2(np.maximum(rest, 1))).astype(np.int64) + 1, 0)
    shift = np.maximum(bits - 4, 0)
    kept = np.where(bits < 4, rest, (rest >> shift) << shift)  # the 4 most significant bits
    return np.where(n < _FREE_LENGTHS, n, _FREE_LENGTHS + kept).astype(np.float64)


@cache
def _length_table() -> np.ndarray:
    """The lengths of nearly every field, looked up (a search scores thousands of rows a term);
    made at the first search, not at import."""
    return _encoded_lengths(np.arange(1 << 16, dtype=np.int64))


def lucene_lengths(lengths: np.ndarray) -> np.ndarray:
    """``_encoded_lengths`` of ``lengths``, by table below 65,536 tokens."""
    n = np.asarray(lengths).astype(np.int64)
    table = _length_table()
    if not len(n) or int(n.max()) < len(table):
        return table[n]
    return _encoded_lengths(n)


def bm25(tf: np.ndarray, lengths: np.ndarray, idf: float, average_length: float,
         k1: float = 1.2, b: float = 0.75) -> np.ndarray:
    """Lucene's BM25 term score (without the (k1 + 1) factor, which Lucene 8+ dropped too), with
    the field lengths Lucene's norms keep (``lucene_lengths``) and the exact average."""
    lengths = lucene_lengths(lengths)
    norm = k1 * (1.0 - b + b * lengths / average_length) if average_length > 0 else k1
    return idf * tf / (tf + norm)
