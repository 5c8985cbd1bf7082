"""Office documents: DOCX (paragraphs and tables in document order) and spreadsheets (XLSX, XLSM,
XLS), each sheet a page and a section of its own.

A sheet becomes a table of lines, one per row, each cell named by its column's header
("Region: North; Revenue: 1200"), like the CSV reader: a chunk cut anywhere in a sheet still
says what every value means. The sheet's name heads its text.
"""

from __future__ import annotations

import io
from typing import Any

from kbgraph.parse.readers.document import ParseError

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # the container of .xls files and of encrypted Office files
_ZIP_MAGIC = b"PK\x03\x04"


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
