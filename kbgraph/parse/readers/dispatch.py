"""Reading one file: the reader its suffix chooses, after the checks every read starts with;
sheets and slides (read as numbered parts) become pages and sections of one document."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kbgraph.parse.readers.document import ParsedDocument, ParseError
from kbgraph.parse.readers.formats import _MIME, DEFAULT_MAX_BYTES, _check_size, _check_suffix
from kbgraph.parse.readers.html import _read_html
from kbgraph.parse.readers.office import _read_docx, _read_xls, _read_xlsx
from kbgraph.parse.readers.pdf import _read_pdf
from kbgraph.parse.readers.slides import _read_pptx
from kbgraph.parse.readers.structured import _read_csv, _read_json, _read_jsonl
from kbgraph.parse.readers.text import _read_text, _tidy


def read_document(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> ParsedDocument:
    """Read and parse one file; the document is named by the file name."""
    path = Path(path)
    _check_suffix(path.name)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ParseError(str(path), f"cannot read file ({exc.strerror or exc})") from exc
    if not path.is_file():
        raise ParseError(str(path), "not a regular file")
    _check_size(path.name, size, max_bytes)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ParseError(str(path), f"cannot read file ({exc.strerror or exc})") from exc
    return read_bytes(path.name, data, max_bytes)


def read_bytes(name: str, data: bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> ParsedDocument:
    """Parse an in-memory file (an upload); ``name``'s suffix chooses the reader."""
    suffix = _check_suffix(name)
    _check_size(name, len(data), max_bytes)
    if not data.strip():
        raise ParseError(name, "empty file")
    if suffix in _PART_READERS:
        parsed = _from_parts(name, _PART_READERS[suffix](name, data), _MIME[suffix])
        parsed.tabular = suffix in _SPREADSHEETS
        return parsed
    text, pages = _READERS[suffix](name, data)
    text = _tidy(text)
    if not text:
        raise ParseError(name, "empty: no text found after parsing")
    return ParsedDocument(name=name, text=text, pages=pages, mime=_MIME[suffix])


def _from_parts(name: str, parts: list[tuple[int, str]], mime: str) -> ParsedDocument:
    """One document from numbered parts (sheets, slides): each part a page and a section of its own."""
    texts: list[str] = []
    pages: list[tuple[int, int]] = []
    offset = 0
    for number, part in parts:
        part = _tidy(part)
        if not part:
            continue
        if texts:
            offset += 2  # the "\n\n" joining parts
        pages.append((offset, number))
        texts.append(part)
        offset += len(part)
    if not texts:
        raise ParseError(name, "empty: no text found after parsing")
    return ParsedDocument(name=name, text="\n\n".join(texts), pages=pages, mime=mime,
                          sections=[start for start, _ in pages[1:]])


_SPREADSHEETS = frozenset({".xlsx", ".xlsm", ".xls"})
_PART_READERS: dict[str, Callable[[str, bytes], list[tuple[int, str]]]] = {
    ".xlsx": _read_xlsx,
    ".xlsm": _read_xlsx,
    ".xls": _read_xls,
    ".pptx": _read_pptx,
}

_READERS: dict[str, Callable[[str, bytes], tuple[str, list[tuple[int, int]]]]] = {
    ".txt": _read_text,
    ".md": _read_text,
    ".markdown": _read_text,
    ".html": _read_html,
    ".htm": _read_html,
    ".pdf": _read_pdf,
    ".docx": _read_docx,
    ".csv": _read_csv,
    ".json": _read_json,
    ".jsonl": _read_jsonl,
}
