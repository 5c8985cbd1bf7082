"""A long plain-text file as pieces of text, read while it is chunked (bounded memory, issue 24).

``read_bytes`` decodes a file whole, so a 50 MB file is held as its bytes and its text, and was
chunked whole. A .txt or .md file is instead read in blocks and decoded incrementally to the same
text ``read_bytes`` gives: the same byte-order marks, strict UTF-8, the junk check on the first
100,000 characters, line breaks as LF and outer whitespace stripped (tests pin the equality). A
file that is not UTF-8 and has no byte-order mark needs charset detection over all of its bytes:
it is read whole, as before.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator
from itertools import chain
from typing import BinaryIO

from kbgraph.parse.readers.document import ParsedDocument, ParseError
from kbgraph.parse.readers.formats import _MIME, _check_size, _check_suffix
from kbgraph.parse.readers.text import _BOMS, _DROPPABLE, _reject_junk

__all__ = ["STREAMED_SUFFIXES", "stream_text"]

STREAMED_SUFFIXES = frozenset({".txt", ".md", ".markdown"})
_BLOCK_BYTES = 1 << 20
# what decode_text's junk check looks at
_SAMPLE_CHARS = 100_000


class _NotUtf8(Exception):
    """The bytes are not UTF-8 (and carry no byte-order mark): the file is read whole."""


def stream_text(name: str, open_binary: Callable[[], BinaryIO], size: int, max_bytes: int) -> ParsedDocument | None:
    """The document of a plain-text file whose text comes in pieces (``ParsedDocument.stream``), after
    one pass that checks that it decodes and counts its characters (the progress of its parse);
    None when it must be read whole (another format, or neither UTF-8 nor marked by a BOM).
    Raises ParseError as ``read_bytes`` would (binary data, junk, nothing but whitespace)."""
    suffix = _check_suffix(name)
    if suffix not in STREAMED_SUFFIXES:
        return None
    _check_size(name, size, max_bytes)

    def pieces() -> Iterator[str]:
        return _tidied(name, _decoded(name, open_binary))

    try:
        length = sum(len(piece) for piece in pieces())
    except _NotUtf8:
        return None
    if not length:
        raise ParseError(name, "empty file" if _blank(open_binary) else "empty: no text found after parsing")
    return ParsedDocument(name=name, text="", mime=_MIME[suffix], stream=pieces, stream_chars=length)


def _blank(open_binary: Callable[[], BinaryIO]) -> bool:
    """Whether the bytes are all ASCII whitespace (read_bytes' "empty file")."""
    with open_binary() as source:
        return all(not block.strip() for block in iter(lambda: source.read(_BLOCK_BYTES), b""))


def _decoded(name: str, open_binary: Callable[[], BinaryIO]) -> Iterator[str]:
    """The file's text as decode_text decodes it, a block at a time (before its junk check)."""
    with open_binary() as source:
        first = source.read(max(_BLOCK_BYTES, 4))  # a byte-order mark is up to 4 bytes
        encoding, marked = "utf-8", False
        for bom, bom_encoding in _BOMS:
            if first.startswith(bom):
                encoding, marked, first = bom_encoding, True, first[len(bom):]
                break
        decoder = codecs.getincrementaldecoder(encoding)("strict")
        for block in chain([first], iter(lambda: source.read(_BLOCK_BYTES), b""), [b""]):
            if not marked and b"\x00" in block:
                raise ParseError(name, "looks like a binary file (contains NUL bytes), not text")
            try:
                text = decoder.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                if marked:
                    raise ParseError(name, f"not valid {encoding} despite its byte-order mark") from exc
                raise _NotUtf8 from exc
            if text:
                yield text


def _tidied(name: str, decoded: Iterator[str]) -> Iterator[str]:
    """decode_text's junk check and _tidy, piece by piece: leading U+FEFF dropped, the junk check on
    the first 100,000 characters (stray replacement and private-use characters dropped when it
    finds some), CR LF and CR as LF, whitespace stripped at both ends of the whole text."""
    sample, pieces = _head(_without_leading_bom(decoded), _SAMPLE_CHARS)
    _reject_junk(name, sample[:_SAMPLE_CHARS])  # raises on junk
    drop = _DROPPABLE.search(sample[:_SAMPLE_CHARS]) is not None
    carry_cr, started, spaces = False, False, ""
    for piece in pieces:
        if drop:
            piece = _DROPPABLE.sub("", piece)
        if carry_cr:
            piece = "\r" + piece
        # a CR at the end may be the first half of a CR LF
        carry_cr = piece.endswith("\r")
        if carry_cr:
            piece = piece[:-1]
        piece = piece.replace("\r\n", "\n").replace("\r", "\n")
        if not started:
            piece = piece.lstrip()
            started = bool(piece)
        body = piece.rstrip()
        if body:
            # whitespace is held back until text follows it: the text's end is stripped
            yield spaces + body
            spaces = piece[len(body):]
        else:
            spaces += piece


def _without_leading_bom(decoded: Iterator[str]) -> Iterator[str]:
    for piece in decoded:
        piece = piece.lstrip("\ufeff")
        if piece:
            yield piece
            break
    yield from decoded


def _head(pieces: Iterator[str], chars: int) -> tuple[str, Iterator[str]]:
    """The first pieces joined, at least ``chars`` characters of them (or all), and every piece
    from the start."""
    taken: list[str] = []
    have = 0
    for piece in pieces:
        taken.append(piece)
        have += len(piece)
        if have >= chars:
            break
    head = "".join(taken)
    return head, chain([head], pieces)
