"""A long plain-text file read in pieces (kbgraph/parse/text_stream.py) gives the text read_bytes
gives, fails as read_bytes fails, and leaves files that need charset detection to read_bytes."""

from __future__ import annotations

import codecs
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbgraph.parse import text_stream
from kbgraph.parse.readers import ParseError, read_bytes
from kbgraph.parse.text_stream import stream_text

_PARTS = st.sampled_from(["a", "Scrooge ", "港口", "é", "😀", "\r\n", "\r", "\n", " ", "\t", "\ufeff", "\ufffd",
                          "\ue000", "\u3000", "\u2028", ".", "\x1c"])


def _streamed(name: str, data: bytes) -> str | None:
    parsed = stream_text(name, lambda: io.BytesIO(data), len(data), 10**9)
    if parsed is None:
        return None
    text = "".join(parsed.stream())
    assert parsed.chars == len(text) and parsed.text == ""
    return text


def _whole(name: str, data: bytes) -> str | ParseError:
    try:
        return read_bytes(name, data, 10**9).text
    except ParseError as exc:
        return exc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(_PARTS, max_size=60).map("".join), block=st.integers(min_value=1, max_value=9),
       bom=st.sampled_from([b"", codecs.BOM_UTF8, codecs.BOM_UTF16_LE]))
def test_streamed_text_equals_the_whole_read(text: str, block: int, bom: bytes) -> None:
    data = bom + text.encode("utf-16-le" if bom == codecs.BOM_UTF16_LE else "utf-8")
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(text_stream, "_BLOCK_BYTES", block)  # blocks end inside characters and CR LFs
        patched.setattr(text_stream, "_SAMPLE_CHARS", 7)
        patched.setattr("kbgraph.parse.readers.text._reject_junk", _small_sample_junk_check)
        patched.setattr(text_stream, "_reject_junk", _small_sample_junk_check)
        whole = _whole("a.txt", data)
        try:
            streamed = _streamed("a.txt", data)
        except ParseError as exc:
            assert isinstance(whole, ParseError) and str(exc) == str(whole)
            return
    assert streamed == whole


def _small_sample_junk_check(name: str, text: str) -> str:
    # read_bytes' junk check, over the first 7 characters as the patched stream's is
    from kbgraph.parse.readers.text import _DROPPABLE, _JUNK

    text = text.lstrip("\ufeff")
    sample = text[:7]
    if sample:
        bad, droppable = len(_JUNK.findall(sample)), len(_DROPPABLE.findall(sample))
        if (bad - droppable) / len(sample) > 0.05 or droppable / len(sample) > 0.3:
            raise ParseError(name, "looks like a binary file (mostly control characters), not text")
        if droppable:
            text = _DROPPABLE.sub("", text)
    return text


def test_a_long_file_streams_to_its_text(tmp_path) -> None:
    text = "\ufeff\n  " + "Marley was dead: to begin with.\r\nThere is no doubt whatever about that.\r\n\r\n" * 40_000
    path = tmp_path / "carol.txt"
    path.write_bytes(text.encode("utf-8"))
    assert _streamed("carol.txt", path.read_bytes()) == read_bytes("carol.txt", path.read_bytes(), 10**9).text
    parsed = stream_text("carol.txt", lambda: path.open("rb"), path.stat().st_size, 10**9)
    assert parsed is not None and parsed.stream is not None
    # the chunks of the streamed text are those of the whole text
    whole = read_bytes("carol.txt", path.read_bytes(), 10**9)
    assert list(parsed.iter_chunks(256, 32)) == whole.chunks(256, 32)


def test_other_files_are_read_whole() -> None:
    latin1 = "Noël à la française\n".encode("cp1252") * 10
    assert _streamed("a.txt", latin1) is None  # not UTF-8: charset detection needs all of it
    assert stream_text("a.html", lambda: io.BytesIO(b"<p>x</p>"), 8, 100) is None


def test_bad_files_fail_as_a_whole_read_does() -> None:
    for data in (b"abc\x00def" * 10, b"\x01\x02\x03\x04" * 100, b"   \n\t  "):
        with pytest.raises(ParseError) as streamed:
            _streamed("a.txt", data)
        assert isinstance(_whole("a.txt", data), ParseError), data
        assert "a.txt" in str(streamed.value)
    with pytest.raises(ParseError, match="over the limit"):
        stream_text("a.txt", lambda: io.BytesIO(b"x" * 20), 20, 10)
