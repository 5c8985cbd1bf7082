"""Token windows with overlap, cut at the most natural boundary that fits.

Tokens are counted with tiktoken's cl100k encoding (token_count.py). The text is encoded once;
window limits come from the token offsets of that encoding, and every emitted span's own count is
exact, because a substring's encoding can differ by a token or two at its edges.

Exact counts need not re-encode whole spans: text cut at a line start encodes as its two halves do
(token_count.py), so only a span's head (up to its first line start) and tail (from its last) are
encoded again, and the tokens between come from the whole text's encoding.

A long text is analysed in windows of about a million characters cut at line starts
(``chunk_stream``), so memory does not grow with the text: the spans are those of the whole text,
because a window's tokens and boundaries are the whole text's (see ``_Window``).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from kbgraph.parse.token_count import _line_starts, _token_starts, count_tokens

__all__ = ["TextSpan", "chunk_sections", "chunk_stream", "chunk_text"]

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


@dataclass(frozen=True)
class TextSpan:
    """One chunk: ``text == source[start:end]``; ``position`` numbers the chunks from 0."""

    position: int
    start: int
    end: int
    text: str
    token_count: int


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


def _check_arguments(chunk_tokens: int, overlap: int) -> None:
    if chunk_tokens <= 0:
        raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
    if overlap < 0:
        raise ValueError(f"overlap must not be negative, got {overlap}")
    if overlap >= chunk_tokens:
        raise ValueError(f"overlap ({overlap}) must be smaller than chunk_tokens ({chunk_tokens})")


def chunk_text(text: str, chunk_tokens: int = 512, overlap: int = 64) -> list[TextSpan]:
    """Split ``text`` into spans of at most ``chunk_tokens`` tokens, overlapping by about ``overlap``.

    A window ends at the last paragraph break in its second half, else the last sentence end, else
    line break, else space (or CJK comma); only a sentence with no such point inside the window is
    cut between tokens. The next window starts at the best boundary within the last ``overlap``
    tokens of the previous one. Spans carry no leading or trailing whitespace. The only span that
    may exceed ``chunk_tokens`` is a single character that alone encodes to more tokens.
    """
    _check_arguments(chunk_tokens, overlap)
    return list(chunk_stream([text], chunk_tokens, overlap))


# characters of text analysed at a time: a text's token offsets and boundary tables cost ~20 bytes
# a character, so a 50 MB text analysed whole took ~1 GB; a long text is taken in windows of this
# size, each ending at a line start
WINDOW_CHARS = 1_000_000
# ... except the first, which is small: a long text's first chunk (and with it the first model call
# of its extraction) is cut after analysing this much of it, not a million characters (0.15 s)
FIRST_WINDOW_CHARS = 65_536


def chunk_stream(pieces: Iterable[str], chunk_tokens: int = 512, overlap: int = 64, *,
                 window_chars: int = WINDOW_CHARS) -> Iterator[TextSpan]:
    """``chunk_text`` of the pieces joined, as they come, holding about ``window_chars`` of the
    text at a time (the spans are the same: see _Window). Offsets are into the joined text."""
    _check_arguments(chunk_tokens, overlap)
    source = _Source(pieces, max(1, window_chars), first_chars=max(1, min(window_chars, FIRST_WINDOW_CHARS)))
    window = source.window(0, [])
    if window.final:
        text = window.text
        if not text or text.isspace():
            return
        whole = _one_span(text, chunk_tokens)
        if whole is not None:
            yield whole
            return
    # the chunking's state, in offsets into the whole text
    start = window.offset + _skip_space(window.text, 0)
    previous_end = 0
    budget = chunk_tokens
    position = 0
    while True:
        text, offset = window.text, window.offset
        s, pe = start - offset, previous_end - offset
        if not window.final and not window.has_room(s, chunk_tokens):
            window = source.window(start, window.safe_cuts())
            continue
        if s >= window.text_end:
            return
        floor = max(s + 1, pe + 1)
        end = window.choose_end(s, budget, floor)
        tokens = window.span_tokens(s, end)
        if tokens > chunk_tokens and end - s > 1:
            if budget > 1:
                # The substring encoded differently from the whole text: retry with less room.
                budget = max(1, budget - (tokens - chunk_tokens))
                continue
            while end - s > 1 and tokens > chunk_tokens:
                end = _trim_end(text, s, end - 1)
                tokens = window.span_tokens(s, end)
        if end <= pe:
            # Degenerate input (e.g. a run of whitespace or odd characters costing more tokens than
            # the window holds): give up the overlap so that the next window brings new text.
            start, budget = offset + _skip_space(text, pe), chunk_tokens
            continue
        budget = chunk_tokens
        yield TextSpan(position, offset + s, offset + end, text[s:end], tokens)
        position += 1
        if end >= window.text_end:
            return
        if overlap == 0:
            start = offset + _skip_space(text, end)
        else:
            last = bisect.bisect_left(window.starts, end)  # tokens wholly before the cut
            target = window.char_at(max(last - overlap, 0))
            keep = window.char_at(max(last - max(overlap // 4, 1), 0))
            start = offset + _next_start(text, window.bounds, s, end, target, keep)
        previous_end = offset + end


class _Window:
    """``text`` = the whole text's ``[offset, offset + len(text))``, with its token offsets, line
    starts and boundaries; ``final`` when it reaches the end of the whole text.

    A window begins and (unless final) ends at a line start, or at the text's start: text cut
    there encodes as its parts do (module docstring), and no boundary pattern's match spans a line
    start (each match is whitespace from its line break on, and a line start is not), so a
    window's tokens and boundaries are the whole text's. A step of the chunking reads at most
    ``chunk_tokens`` + 1 tokens past its start; while the window holds that many past the start
    (``has_room``), the step decides as it would on the whole text.
    """

    def __init__(self, text: str, offset: int, final: bool) -> None:
        self.text, self.offset, self.final = text, offset, final
        self.line_starts = _line_starts(text)
        self.starts, self.exact_starts = _token_starts(text, self.line_starts)
        self.n_tokens = len(self.starts)
        self.bounds = _Boundaries(text)
        # unless final, the text goes on past the window with a non-space character
        self.text_end = _trim_end(text, 0, len(text)) if final else len(text)

    def has_room(self, start: int, chunk_tokens: int) -> bool:
        return start < len(self.text) and self.token_at(start) + chunk_tokens + 1 < self.n_tokens

    def safe_cuts(self) -> list[int]:
        """Where a later window may begin, in offsets into the whole text."""
        cuts = [self.offset] + [self.offset + p for p in self.line_starts]
        return cuts if self.final else cuts + [self.offset + len(self.text)]

    def token_at(self, pos: int) -> int:
        """Index of the token that contains character ``pos``."""
        return max(0, bisect.bisect_right(self.starts, pos) - 1)

    def char_at(self, token: int) -> int:
        return int(self.starts[token]) if token < self.n_tokens else len(self.text)

    def span_tokens(self, start: int, end: int) -> int:
        """``count_tokens(text[start:end])``, encoding only the head and tail around the line starts."""
        text, line_starts = self.text, self.line_starts
        first = bisect.bisect_left(line_starts, start)
        last = bisect.bisect_right(line_starts, end) - 1
        if not self.exact_starts or first > last:
            return count_tokens(text[start:end])
        head, tail = line_starts[first], line_starts[last]
        between = bisect.bisect_left(self.starts, tail) - bisect.bisect_left(self.starts, head)
        return count_tokens(text[start:head]) + between + count_tokens(text[tail:end])

    def choose_end(self, start: int, budget: int, floor: int) -> int:
        """The cut for a window from ``start`` of ``budget`` tokens, ending at ``floor`` or later."""
        text = self.text
        first = self.token_at(start)
        limit = self.char_at(first + budget)
        if limit >= self.text_end:
            return self.text_end
        half = max(self.char_at(first + budget // 2), floor)
        for low in (half, floor):
            for level in self.bounds.levels:
                point = self.bounds.latest(level, low, limit)
                # Trimming the whitespace before a boundary must not fall back below the floor.
                if point is not None and _trim_end(text, start, point) >= floor:
                    return _trim_end(text, start, point)
        return _trim_end(text, start, max(limit, floor))


class _Source:
    """The pieces of a text as one buffer from ``offset`` on, handed out as windows."""

    def __init__(self, pieces: Iterable[str], window_chars: int, first_chars: int | None = None) -> None:
        self.pieces = iter(pieces)
        self.window_chars = window_chars
        self._next_chars = first_chars or window_chars
        self.buffer = ""
        self.offset = 0
        self.ended = False
        self._last_keep = -1
        self._grow = 1

    def window(self, keep_from: int, safe_cuts: list[int]) -> _Window:
        """The next window: it begins at the last safe cut at or before ``keep_from`` (the text
        before is dropped) and ends at a line start about ``window_chars`` after it, or at the
        end. Asked again from the same place (a step did not fit), it takes twice as much."""
        i = bisect.bisect_right(safe_cuts, keep_from) - 1
        cut = safe_cuts[i] if i >= 0 and safe_cuts[i] >= self.offset else self.offset
        self.buffer, self.offset = self.buffer[cut - self.offset:], cut
        self._grow = self._grow * 2 if keep_from == self._last_keep else 1
        self._last_keep = keep_from
        need = keep_from - cut + self._next_chars * self._grow
        self._next_chars = self.window_chars
        while True:
            self._fill(need)
            if self.ended:
                return _Window(self.buffer, self.offset, True)
            # near the size asked for, not at the end of a large piece (a whole book given as one)
            end = _last_line_start(self.buffer, keep_from - cut, need)
            if end is None:
                end = _last_line_start(self.buffer, keep_from - cut)
            if end is not None:
                return _Window(self.buffer[:end], self.offset, False)
            need *= 2  # no line start past the chunking's place yet: a longer window

    def _fill(self, length: int) -> None:
        parts, have = [self.buffer], len(self.buffer)
        while have < length:
            piece = next(self.pieces, None)
            if piece is None:
                self.ended = True
                break
            parts.append(piece)
            have += len(piece)
        if len(parts) > 1:
            self.buffer = "".join(parts)


def _last_line_start(text: str, after: int, before: int | None = None) -> int | None:
    """The last line start of ``text`` past ``after`` (and up to ``before``) whose character is
    known (before the end)."""
    pos = len(text) - 1 if before is None else min(len(text) - 1, before)
    while True:
        pos = text.rfind("\n", after, pos)
        if pos < 0:
            return None
        if not text[pos + 1].isspace():
            return pos + 1


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
