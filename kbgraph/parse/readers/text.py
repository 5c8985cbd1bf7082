"""Plain text and Markdown: bytes decoded (a byte-order mark, else strict UTF-8, else a detected
encoding) and checked for binary junk, line breaks made LF. HTML and the structured formats decode
with ``decode_text`` too."""

from __future__ import annotations

import codecs
import re

from kbgraph.parse.readers.document import ParseError

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_ALLOWED_CONTROLS = frozenset("\t\n\r\f\v")
# what _reject_junk counts, as one character class: the replacement character, and the code points
# of Unicode categories Cc (controls), Cs (surrogates) and Co (private use) but the allowed controls
# (the categories' ranges are fixed by the standard; a test checks them against unicodedata)
_JUNK = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ud800-\udfff\ue000-\uf8ff\ufffd"
                   "\U000f0000-\U000ffffd\U00100000-\U0010fffd]")
# the part of it a text scraped from the web or converted from a PDF carries now and then (a glyph
# with no Unicode mapping, a byte the decoder replaced): dropped from text that is otherwise sound
_DROPPABLE = re.compile("[\ue000-\uf8ff\ufffd\U000f0000-\U000ffffd\U00100000-\U0010fffd]")


def decode_text(name: str, data: bytes) -> str:
    """Bytes -> str: BOM, else strict UTF-8, else charset-normalizer's best guess; junk rejected."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom) :].decode(encoding)
            except UnicodeDecodeError as exc:
                raise ParseError(name, f"not valid {encoding} despite its byte-order mark") from exc
            return _reject_junk(name, text)
    if b"\x00" in data:
        raise ParseError(name, "looks like a binary file (contains NUL bytes), not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes

        matches = from_bytes(data)
        best = matches.best()
        if best is None:
            raise ParseError(name, "cannot detect the text encoding; the file looks binary") from None
        # Short Western text often scores the same under several code pages (French in cp1250
        # turns "è" into "č"); on a tie the far more common cp1252 is the better guess.
        tied = [m for m in matches if (m.chaos, m.coherence) == (best.chaos, best.coherence)]
        best = next((m for m in tied if m.encoding in ("cp1252", "latin_1")), best)
        text = str(best)
    return _reject_junk(name, text)


def _reject_junk(name: str, text: str) -> str:
    text = text.lstrip("\ufeff")
    sample = text[:100_000]
    if sample:
        bad = len(_JUNK.findall(sample))
        droppable = len(_DROPPABLE.findall(sample))
        # controls are the mark of binary data; replacement and private-use characters only when
        # they make up much of the text (a few in a scraped page are dropped, not fatal)
        if (bad - droppable) / len(sample) > 0.05 or droppable / len(sample) > 0.3:
            raise ParseError(name, "looks like a binary file (mostly control characters), not text")
        if droppable:
            text = _DROPPABLE.sub("", text)
    return text


def _read_text(name: str, data: bytes) -> tuple[str, list[tuple[int, int]]]:
    return decode_text(name, data), []


def _tidy(text: str) -> str:
    # Offsets are only recorded for PDFs, whose text is tidied page by page before they are taken.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.strip()
