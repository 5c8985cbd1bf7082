"""Chunker: token budgets, boundaries, overlap, CJK, speed, and property-based invariants."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbgraph.parse import TextSpan, chunk_text, count_tokens

BOOK = Path("/work/shared/data/christmas-carol/book.txt")


def check_invariants(text: str, spans: list[TextSpan], chunk_tokens: int, overlap: int) -> None:
    covered = [False] * len(text)
    for i, span in enumerate(spans):
        assert span.position == i
        assert span.text == text[span.start : span.end]
        assert span.text and span.text == span.text.strip()
        assert span.token_count == count_tokens(span.text)
        assert span.token_count <= chunk_tokens or span.end - span.start == 1
        for j in range(span.start, span.end):
            covered[j] = True
    assert all(covered[i] or text[i].isspace() for i in range(len(text)))
    for a, b in zip(spans, spans[1:]):
        assert a.start < b.start and a.end < b.end
        if overlap == 0:
            assert b.start >= a.end
        elif b.start < a.end:
            # A substring can encode a token or two differently from the whole text.
            assert count_tokens(text[b.start : a.end]) <= overlap + 2


@pytest.mark.parametrize(
    "chunk_tokens,overlap,message",
    [(0, 0, "chunk_tokens must be positive"), (10, 10, r"overlap \(10\) must be smaller"), (10, -1, "negative")],
)
def test_argument_validation(chunk_tokens: int, overlap: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        chunk_text("some text", chunk_tokens, overlap)


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t "])
def test_empty_text(text: str) -> None:
    assert chunk_text(text) == []


def test_short_text_is_one_stripped_span() -> None:
    text = "\n  Hello there, Varrow.  \n"
    assert chunk_text(text) == [TextSpan(0, 3, 23, "Hello there, Varrow.", count_tokens("Hello there, Varrow."))]


def test_count_tokens() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    assert count_tokens("<|endoftext|>") > 1  # special-token text is counted as ordinary text


def test_prefers_paragraph_boundaries() -> None:
    paragraph = "The harbor of Varrow is busy in spring. Ships come from every port. " * 6
    text = "\n\n".join(f"Paragraph {i}. {paragraph.strip()}" for i in range(12))
    spans = chunk_text(text, chunk_tokens=256, overlap=0)
    check_invariants(text, spans, 256, 0)
    assert len(spans) > 3
    for span in spans[:-1]:
        assert text[span.end : span.end + 2] == "\n\n", "every window should end at a paragraph break"


def test_prefers_sentence_boundaries_inside_a_paragraph() -> None:
    text = " ".join(f"Sentence number {i} tells of the Glass Tower and its iron frame." for i in range(200))
    spans = chunk_text(text, chunk_tokens=100, overlap=20)
    check_invariants(text, spans, 100, 20)
    assert all(span.text.endswith(".") for span in spans)
    assert all(span.text.startswith("Sentence") for span in spans)


def test_long_sentence_cut_at_whitespace() -> None:
    text = " ".join(f"word{i}" for i in range(2000))
    spans = chunk_text(text, chunk_tokens=64, overlap=8)
    check_invariants(text, spans, 64, 8)
    words = set(text.split())
    assert all(set(span.text.split()) <= words for span in spans)


def test_text_without_any_boundary_is_hard_cut() -> None:
    text = "abcdefghij" * 500
    spans = chunk_text(text, chunk_tokens=50, overlap=5)
    check_invariants(text, spans, 50, 5)
    assert len(spans) > 5


def test_chinese_without_spaces_cuts_at_sentence_ends() -> None:
    sentences = [
        "南屿商会是东方港口南屿港最大的商人组织。",
        "商会的船队每年春天在港口集结，乘着季风向西航行！",
        "宋知远主持商会二十余年，以公正严明著称；",
        "他规定商会的账目每年公开一次？",
    ]
    text = "".join(sentences * 40)
    spans = chunk_text(text, chunk_tokens=120, overlap=16)
    check_invariants(text, spans, 120, 16)
    assert len(spans) > 5
    assert all(span.text[-1] in "。！？；" for span in spans)
    assert all(span.token_count > 60 for span in spans[:-1])


def test_chinese_long_run_without_punctuation() -> None:
    text = "沈若溪观测星空记录恒星位置编写星表" * 100
    spans = chunk_text(text, chunk_tokens=40, overlap=10)
    check_invariants(text, spans, 40, 10)


def test_book_is_within_budget() -> None:
    text = BOOK.read_text(encoding="utf-8")
    chunk_text("warm up the encoding")
    spans = chunk_text(text, chunk_tokens=512, overlap=64)
    check_invariants(text, spans, 512, 64)
    assert sum(span.token_count for span in spans) >= count_tokens(text)
    assert chunk_text(text, chunk_tokens=512, overlap=64) == spans


def test_deterministic() -> None:
    text = "Alpha beta. Gamma delta!\n\nEpsilon 港口。Zeta? " * 50
    assert chunk_text(text, 30, 5) == chunk_text(text, 30, 5)


_ALPHABET = st.sampled_from(list("abcdefgh XYZ  \n\n\t.,!?;:'\"-()0123456789é港口商会船队。，！？；") + ["\r\n", "😀", "  "])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.lists(_ALPHABET, max_size=600).map("".join),
    chunk_tokens=st.integers(min_value=4, max_value=80),
    overlap_fraction=st.floats(min_value=0.0, max_value=0.95),
)
def test_chunk_invariants_property(text: str, chunk_tokens: int, overlap_fraction: float) -> None:
    overlap = min(int(chunk_tokens * overlap_fraction), chunk_tokens - 1)
    spans = chunk_text(text, chunk_tokens, overlap)
    if text.strip():
        assert spans
    check_invariants(text, spans, chunk_tokens, overlap)
    assert chunk_text(text, chunk_tokens, overlap) == spans


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=300), chunk_tokens=st.integers(min_value=1, max_value=20))
def test_arbitrary_unicode_terminates_and_covers(text: str, chunk_tokens: int) -> None:
    spans = chunk_text(text, chunk_tokens, 0)
    check_invariants(text, spans, chunk_tokens, 0)


@settings(max_examples=400, deadline=None)
@given(text=st.lists(_ALPHABET | st.sampled_from(["\n", "\r", " \n", "'s", "'ll", "\u3000", "\u00a0", "…"]),
                     max_size=200).map("".join))
def test_text_cut_at_a_line_start_encodes_as_its_halves(text: str) -> None:
    # what the chunker's exact span counts rest on (see kbgraph.parse.chunker's docstring)
    from kbgraph.parse.token_count import _line_starts, get_encoding

    enc = get_encoding()
    whole = enc.encode_ordinary(text)
    for cut in _line_starts(text):
        assert enc.encode_ordinary(text[:cut]) + enc.encode_ordinary(text[cut:]) == whole, (text, cut)


def test_long_text_counts_match_reencoding() -> None:
    # past the size at which the text is encoded as two halves on two threads
    from kbgraph.parse.token_count import _PARALLEL_ENCODE_CHARS

    text = BOOK.read_text(encoding="utf-8")
    text = "\n\n".join([text] * (_PARALLEL_ENCODE_CHARS // len(text) + 1))
    assert len(text) > _PARALLEL_ENCODE_CHARS
    spans = chunk_text(text, chunk_tokens=1200, overlap=100)
    check_invariants(text, spans, 1200, 100)
    assert sum(span.token_count for span in spans) >= count_tokens(text)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(_ALPHABET | st.text(max_size=3), max_size=120).map("".join),
       chunk_tokens=st.integers(min_value=1, max_value=80))
def test_a_text_that_fits_whole_gets_the_span_the_windowing_gives(text: str, chunk_tokens: int) -> None:
    from kbgraph.parse import chunker

    fast = chunk_text(text, chunk_tokens, chunk_tokens // 4)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(chunker, "_ONE_SPAN_CHARS_PER_TOKEN", 0)  # every text through the windowing
        assert chunk_text(text, chunk_tokens, chunk_tokens // 4) == fast


def _pieces(text: str, cuts: list[int]) -> list[str]:
    edges = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in zip(edges, edges[1:])]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # lines of mixed scripts (CJK, accented, emoji, 4-byte characters) with many line starts
    lines=st.lists(st.lists(_ALPHABET | st.text(max_size=4) | st.sampled_from(["𠀋", "한국어", "\u3000"]),
                            max_size=30).map("".join), max_size=25),
    cuts=st.lists(st.integers(min_value=0), max_size=8),
    window_chars=st.integers(min_value=1, max_value=300),
    chunk_tokens=st.integers(min_value=2, max_value=60),
    overlap_fraction=st.floats(min_value=0.0, max_value=0.95),
)
def test_streamed_chunking_equals_whole_text_chunking(lines: list[str], cuts: list[int], window_chars: int,
                                                      chunk_tokens: int, overlap_fraction: float) -> None:
    from kbgraph.parse.chunker import chunk_stream

    text = "\n".join(lines)
    overlap = min(int(chunk_tokens * overlap_fraction), chunk_tokens - 1)
    whole = chunk_text(text, chunk_tokens, overlap)
    streamed = list(chunk_stream(_pieces(text, cuts), chunk_tokens, overlap, window_chars=window_chars))
    assert streamed == whole


def test_streamed_book_in_small_windows_equals_whole() -> None:
    # windows far smaller than the text, cut wherever a line starts: every kind of boundary is met
    from kbgraph.parse.chunker import chunk_stream

    text = BOOK.read_text(encoding="utf-8-sig").replace("\r\n", "\n")
    text += "\n\n" + "港口商会的船队在黄昏时抵达。\n他们卸下货物，然后离开；第二天早上又回来了！\n" * 300
    whole = chunk_text(text, 200, 30)
    for window_chars in (3_000, 50_000):
        pieces = [text[i:i + 4096] for i in range(0, len(text), 4096)]
        assert list(chunk_stream(pieces, 200, 30, window_chars=window_chars)) == whole


@contextlib.contextmanager
def _window_sizes() -> Iterator[list[int]]:
    """The length of each window the streamed chunker analyses, while in the block."""
    from kbgraph.parse import chunker

    held: list[int] = []
    real_window = chunker._Window

    def watched(text: str, offset: int, final: bool) -> chunker._Window:
        held.append(len(text))
        return real_window(text, offset, final)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(chunker, "_Window", watched)
        yield held


def test_streamed_chunking_holds_a_window_not_the_text() -> None:
    # a text of 40 windows: the source keeps the window and what the chunking still needs of the last one
    from kbgraph.parse import chunker

    line = "Scrooge went home to bed. The fog came down.\n"
    pieces = (line * 100 for _ in range(400))  # 1.8 MB, made as it is read
    with _window_sizes() as held:
        spans = list(chunker.chunk_stream(pieces, 64, 8, window_chars=50_000))
    assert spans[-1].end == len(line) * 100 * 400 - 1
    assert len(held) >= 30 and max(held) < 60_000


def test_a_long_text_s_first_chunk_comes_from_a_small_first_window() -> None:
    # a book given whole: its first chunk (and the first model call of its extraction) must not
    # wait for the whole text's analysis
    from kbgraph.parse import chunker

    text = BOOK.read_text(encoding="utf-8-sig").replace("\r\n", "\n")
    text = "\n\n".join([text] * 4)  # ~750k characters, under one window's million
    with _window_sizes() as held:
        stream = chunker.chunk_stream([text], 1200, 100)
        next(stream)
        assert held == [pytest.approx(chunker.FIRST_WINDOW_CHARS, abs=2_000)]
        rest = list(stream)
    assert len(held) > 1 and max(held) < chunker.WINDOW_CHARS + 2_000
    assert [next(chunker.chunk_stream([text], 1200, 100))] + rest == chunk_text(text, 1200, 100)
