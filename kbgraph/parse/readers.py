"""Files -> plain text, one reader per format.

Every failure a user can cause (wrong type, corrupt or encrypted file, binary junk, nothing to
index) surfaces as ``ParseError`` with a message naming the file, so an upload or an indexing run
can report it as is instead of a traceback.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from kbgraph.parse.chunker import TextSpan, chunk_sections, chunk_stream

__all__ = [
    "ParseError",
    "ParsedDocument",
    "SUPPORTED_SUFFIXES",
    "DEFAULT_MAX_BYTES",
    "read_document",
    "read_bytes",
    "iter_paths",
]

DEFAULT_MAX_BYTES = 50_000_000


class ParseError(Exception):
    """A file that cannot be turned into text; ``str()`` is a message fit for the user."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


@dataclass
class ParsedDocument:
    name: str
    text: str
    # (character offset where the page starts, 1-based page number); empty for unpaged formats.
    # A spreadsheet's sheets and a presentation's slides are its pages.
    pages: list[tuple[int, int]] = field(default_factory=list)
    mime: str = "text/plain"
    # character offsets where a part starts that no chunk may share with the part before it
    # (a sheet, a slide); empty when the text may be chunked as one
    sections: list[int] = field(default_factory=list)
    # rows that each carry their column names: chunks need no overlap, which would start them mid-row
    tabular: bool = False
    # a long plain-text file read while it is chunked (kbgraph.parse.text_stream): its text in
    # pieces, ``text`` is empty, and ``stream_chars`` is its length
    stream: Callable[[], Iterator[str]] | None = None
    stream_chars: int = 0

    @property
    def chars(self) -> int:
        return self.stream_chars if self.stream is not None else len(self.text)

    def chunks(self, chunk_tokens: int, overlap: int) -> list[TextSpan]:
        """The document's chunks: each section on its own, tables without overlap."""
        return list(self.iter_chunks(chunk_tokens, overlap))

    def iter_chunks(self, chunk_tokens: int, overlap: int) -> Iterator[TextSpan]:
        """``chunks``, as the chunker makes them: a long text is never held as a list of chunks, nor
        (streamed) as one string."""
        overlap = 0 if self.tabular else overlap
        if self.stream is not None:
            return chunk_stream(self.stream(), chunk_tokens, overlap)
        if self.sections:
            return iter(chunk_sections(self.text, self.sections, chunk_tokens, overlap))
        return chunk_stream([self.text], chunk_tokens, overlap)

    def page_at(self, offset: int) -> int | None:
        """The page that holds character ``offset``, or None for unpaged documents."""
        page = None
        for start, number in self.pages:
            if start > offset:
                break
            page = number
        return page


_MIME = {
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".csv": "text/csv",
    ".json": "application/json",
    ".jsonl": "application/x-ndjson",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".xlsm": "application/vnd.ms-excel.sheet.macroEnabled.12",
    ".xls": "application/vnd.ms-excel",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
SUPPORTED_SUFFIXES: tuple[str, ...] = tuple(_MIME)


def _human_size(size: int) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000  # type: ignore[assignment]
    raise AssertionError("unreachable")


def _check_suffix(name: str) -> str:
    suffix = Path(name).suffix.lower()
    if suffix not in _MIME:
        shown = suffix or "no extension"
        raise ParseError(name, f"unsupported file type ({shown}); supported: {', '.join(SUPPORTED_SUFFIXES)}")
    return suffix


def _check_size(name: str, size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise ParseError(name, f"file is {_human_size(size)}, over the limit of {_human_size(max_bytes)}")


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


def _tidy(text: str) -> str:
    # Offsets are only recorded for PDFs, whose text is tidied page by page before they are taken.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.strip()


# -- plain text ---------------------------------------------------------------------------------

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


# -- HTML ----------------------------------------------------------------------------------------

_BLOCK_TAGS = frozenset(
    "address article aside blockquote dd div dl dt fieldset figcaption figure footer form h1 h2 h3 h4 "
    "h5 h6 header hr li main nav ol p pre section ul summary details".split()
)
_SPACES = re.compile(r"[ \t\f\v\u00a0]+")
_BLANK_LINES = re.compile(r"\n{3,}")


def _read_html(name: str, data: bytes) -> tuple[str, list[tuple[int, int]]]:
    from bs4 import BeautifulSoup

    # Decoded by us rather than by BeautifulSoup, so HTML gets the same junk checks as text.
    soup = BeautifulSoup(decode_text(name, data), "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(["script", "style", "noscript", "template", "head"]):
        tag.decompose()
    for br in soup.find_all("br"):
        br.replace_with("\n")
    # Inner tables first, so an outer table's cells already hold their nested text.
    for table in reversed(soup.find_all("table")):
        rows = [
            " | ".join(cell.get_text(" ", strip=True) for cell in row.find_all(["td", "th"]))
            for row in table.find_all("tr")
        ]
        table.replace_with("\n\n" + "\n".join(row for row in rows if row.strip(" |")) + "\n\n")
    # Inline tags join their neighbours; block tags become paragraph breaks.
    for block in soup.find_all(_BLOCK_TAGS):
        block.insert_before("\n\n")
        block.append("\n\n")
    lines = [_SPACES.sub(" ", line).strip() for line in soup.get_text().split("\n")]
    body = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    if title and not body.startswith(title):
        body = f"{title}\n\n{body}"
    return body, []


# -- PDF -----------------------------------------------------------------------------------------


def _read_pdf(name: str, data: bytes) -> tuple[str, list[tuple[int, int]]]:
    import logging

    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    # pypdf logs every repair it attempts on damaged files; the ParseError says what matters.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    if b"%PDF" not in data[:1024]:
        raise ParseError(name, "not a PDF file (no %PDF header); the file is corrupt or mislabelled")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                if not reader.decrypt(""):
                    raise ParseError(name, "the PDF is encrypted and needs a password")
            except (FileNotDecryptedError, NotImplementedError) as exc:
                raise ParseError(name, f"the PDF is encrypted and cannot be opened ({exc})") from exc
        parts: list[str] = []
        pages: list[tuple[int, int]] = []
        offset = 0
        for number, page in enumerate(reader.pages, start=1):
            page_text = _tidy(page.extract_text() or "")
            if parts:
                offset += 2  # the "\n\n" joining pages
            pages.append((offset, number))
            parts.append(page_text)
            offset += len(page_text)
    except ParseError:
        raise
    except (PdfReadError, FileNotDecryptedError) as exc:
        raise ParseError(name, f"corrupt or unreadable PDF ({exc})") from exc
    except Exception as exc:  # pypdf raises many kinds (KeyError, ValueError...) on damaged files
        raise ParseError(name, f"corrupt or unreadable PDF ({type(exc).__name__}: {exc})") from exc
    if not any(part.strip() for part in parts):
        raise ParseError(name, "the PDF has no text layer; scanned PDFs need OCR, which kbgraph does not do")
    text = "\n\n".join(parts)
    # Leading empty pages would make read_bytes' strip() shift offsets; keep them exact instead.
    lead = len(text) - len(text.lstrip())
    pages = [(max(0, start - lead), number) for start, number in pages]
    return text.strip(), pages


# -- DOCX ----------------------------------------------------------------------------------------


def _read_docx(name: str, data: bytes) -> tuple[str, list[tuple[int, int]]]:
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
        blocks: list[str] = []
        for item in document.iter_inner_content():
            if isinstance(item, Table):
                blocks.append(_docx_table(item))
            else:
                blocks.append(item.text)
    except Exception as exc:  # zipfile.BadZipFile, KeyError, lxml errors...: all mean a broken file
        raise ParseError(name, f"corrupt or unreadable DOCX ({type(exc).__name__}: {exc})") from exc
    return "\n\n".join(block.strip() for block in blocks if block.strip()), []


def _docx_table(table: Any) -> str:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            value = " ".join(cell.text.split())
            # A merged cell is reported once per grid column it spans.
            if value and (not cells or cells[-1] != value):
                cells.append(value)
        if cells:
            rows.append(" | ".join(cells))
    return "\n".join(rows)


# -- CSV -----------------------------------------------------------------------------------------


def _read_csv(name: str, data: bytes) -> tuple[str, list[tuple[int, int]]]:
    text = decode_text(name, data)
    sample = text[:20_000]
    try:
        dialect: Any = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    try:
        rows = [row for row in csv.reader(io.StringIO(text), dialect) if any(cell.strip() for cell in row)]
    except csv.Error as exc:
        raise ParseError(name, f"malformed CSV ({exc})") from exc
    if not rows:
        return "", []
    header = [h.strip() or f"column {i + 1}" for i, h in enumerate(rows[0])]
    lines = []
    for row in rows[1:]:
        pairs = []
        for i, cell in enumerate(row):
            cell = " ".join(cell.split())
            if cell:
                key = header[i] if i < len(header) else f"column {i + 1}"
                pairs.append(f"{key}: {cell}")
        lines.append("; ".join(pairs))
    if not lines:  # a header alone is still the only text there is
        lines = ["; ".join(header)]
    return "\n".join(lines), []


# -- JSON ----------------------------------------------------------------------------------------


def _flatten(value: Any, path: str, out: list[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list):
        if all(not isinstance(item, (dict, list)) for item in value):
            shown = ", ".join(_scalar(item) for item in value if item is not None)
            if shown:
                out.append(f"{path}: {shown}" if path else shown)
        else:
            for i, item in enumerate(value, start=1):
                # A blank line between records gives the chunker a paragraph break to cut at.
                if out and out[-1] != "":
                    out.append("")
                _flatten(item, f"{path}.{i}" if path else str(i), out)
            out.append("")
    elif value is not None and _scalar(value) != "":
        out.append(f"{path}: {_scalar(value)}" if path else _scalar(value))


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


def _render_json(value: Any) -> str:
    # A top-level list is usually a list of records: one block per record, paths relative to it.
    records = value if isinstance(value, list) and any(isinstance(v, dict) for v in value) else [value]
    blocks = []
    for record in records:
        lines: list[str] = []
        _flatten(record, "", lines)
        block = "\n".join(lines).strip()
        if block:
            blocks.append(block)
    return "\n\n".join(blocks)


def _read_json(name: str, data: bytes) -> tuple[str, list[tuple[int, int]]]:
    text = decode_text(name, data)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(name, f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from exc
    return _render_json(value), []


def _read_jsonl(name: str, data: bytes) -> tuple[str, list[tuple[int, int]]]:
    text = decode_text(name, data)
    blocks = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ParseError(name, f"invalid JSON on line {number}: {exc.msg}") from exc
        rendered = _render_json(value)
        if rendered:
            blocks.append(rendered)
    return "\n\n".join(blocks), []


# -- spreadsheets -------------------------------------------------------------------------------
# A sheet becomes a table of lines, one per row, each cell named by its column's header
# ("Region: North; Revenue: 1200"), like the CSV reader: a chunk cut anywhere in a sheet still
# says what every value means. The sheet's name heads its text.

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # the container of .xls files and of encrypted Office files
_ZIP_MAGIC = b"PK\x03\x04"


def _cell_text(value: Any) -> str:
    import datetime

    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, datetime.datetime) and value.time() == datetime.time(0):
        return value.date().isoformat()
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    return " ".join(str(value).split())


def _sheet_text(title: str, rows: Any) -> str:
    """A sheet's rows (iterables of cell values) as header-named lines under the sheet's title."""
    table = [cells for cells in ([_cell_text(v) for v in row] for row in rows) if any(cells)]
    if not table:
        return ""
    header = [h or f"column {i + 1}" for i, h in enumerate(table[0])]
    lines = []
    for cells in table[1:]:
        pairs = [f"{header[i] if i < len(header) else f'column {i + 1}'}: {cell}"
                 for i, cell in enumerate(cells) if cell]
        lines.append("; ".join(pairs))
    if not lines:  # a header alone is still the only text there is
        lines = ["; ".join(h for h in table[0] if h)]
    return f"Sheet: {title}\n" + "\n".join(lines)


def _office_container_problem(name: str, data: bytes, kind: str) -> ParseError:
    if data.startswith(_OLE_MAGIC):
        return ParseError(name, f"the {kind} is encrypted (password-protected) or in an older format; "
                                "save it unprotected as a current file")
    return ParseError(name, f"corrupt or unreadable {kind}: not a ZIP-based Office file")


def _read_xlsx(name: str, data: bytes) -> list[tuple[int, str]]:
    import warnings

    import openpyxl

    if not data.startswith(_ZIP_MAGIC):
        raise _office_container_problem(name, data, "XLSX")
    try:
        with warnings.catch_warnings():  # openpyxl warns about every unknown extension it skips
            warnings.simplefilter("ignore")
            # data_only: the value a formula last computed (what Excel shows), not the formula
            book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            return [(number, _sheet_text(sheet.title, sheet.iter_rows(values_only=True)))
                    for number, sheet in enumerate(book.worksheets, start=1)]
        finally:
            book.close()
    except ParseError:
        raise
    except Exception as exc:  # zipfile.BadZipFile, KeyError, lxml and openpyxl errors: a broken file
        raise ParseError(name, f"corrupt or unreadable XLSX ({type(exc).__name__}: {exc})") from exc


def _read_xls(name: str, data: bytes) -> list[tuple[int, str]]:
    import xlrd

    if data.startswith(_ZIP_MAGIC):  # an .xlsx saved under the old suffix: read it as what it is
        return _read_xlsx(name, data)
    if not data.startswith(_OLE_MAGIC):
        raise ParseError(name, "corrupt or unreadable XLS: not an Excel 97-2003 workbook")
    try:
        book = xlrd.open_workbook(file_contents=data, on_demand=True)
        try:
            parts = []
            for number in range(book.nsheets):
                sheet = book.sheet_by_index(number)
                rows = ([_xls_value(book, cell) for cell in sheet.row(r)] for r in range(sheet.nrows))
                parts.append((number + 1, _sheet_text(sheet.name, rows)))
            return parts
        finally:
            book.release_resources()
    except xlrd.biffh.XLRDError as exc:
        if "encrypted" in str(exc).lower():
            raise ParseError(name, "the XLS is encrypted (password-protected); save it unprotected") from exc
        raise ParseError(name, f"corrupt or unreadable XLS ({exc})") from exc
    except Exception as exc:  # xlrd raises assorted errors on damaged files
        raise ParseError(name, f"corrupt or unreadable XLS ({type(exc).__name__}: {exc})") from exc


def _xls_value(book: Any, cell: Any) -> Any:
    import xlrd

    if cell.ctype == xlrd.XL_CELL_DATE:
        try:
            return xlrd.xldate.xldate_as_datetime(cell.value, book.datemode)
        except (ValueError, OverflowError, xlrd.xldate.XLDateError):
            return cell.value
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return bool(cell.value)
    if cell.ctype == xlrd.XL_CELL_ERROR:
        return None
    return cell.value


# -- presentations -------------------------------------------------------------------------------


def _read_pptx(name: str, data: bytes) -> list[tuple[int, str]]:
    from kbgraph.parse.slides import Table, read_slides

    if not data.startswith(_ZIP_MAGIC):
        raise _office_container_problem(name, data, "PPTX")
    try:
        slides = read_slides(data)
    except Exception as exc:  # zipfile.BadZipFile, KeyError, lxml errors: a broken file
        raise ParseError(name, f"corrupt or unreadable PPTX ({type(exc).__name__}: {exc})") from exc
    parts = []
    for number, slide in enumerate(slides, start=1):
        blocks = [_table_text(shape) if isinstance(shape, Table) else shape for shape in slide.shapes]
        if slide.notes is not None and slide.notes.strip():
            blocks.append("Notes: " + slide.notes.strip())
        body = "\n\n".join(b.strip() for b in blocks if b.strip())
        parts.append((number, f"Slide {number}\n{body}" if body else ""))
    return parts


def _table_text(table: Any) -> str:
    """One line per row, cells separated by " | ", each cell's text on one line."""
    rows = [" | ".join(" ".join("\n".join(cell).split()) for cell in row) for row in table.rows]
    return "\n".join(row for row in rows if row.strip(" |"))


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


# -- paths ---------------------------------------------------------------------------------------


def iter_paths(paths: Sequence[Path], *, supported_only: bool = True) -> list[Path]:
    """Expand folders recursively into their files; files named directly are kept as given.

    Inside folders, hidden files and folders are skipped, order is sorted by relative path, and
    (unless ``supported_only`` is False) only files with a supported suffix are returned, so a
    stray image in a folder is not an error while an unsupported file named explicitly still is.
    """
    result: list[Path] = []
    seen: set[Path] = set()
    for given in paths:
        given = Path(given)
        found = [given] if not given.is_dir() else _walk(given, supported_only)
        for path in found:
            if path not in seen:
                seen.add(path)
                result.append(path)
    return result


def _walk(root: Path, supported_only: bool) -> list[Path]:
    files: list[Path] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for file_name in names:
            if file_name.startswith("."):
                continue
            if supported_only and Path(file_name).suffix.lower() not in _MIME:
                continue
            files.append(Path(folder) / file_name)
    return sorted(files, key=lambda p: p.relative_to(root).parts)
