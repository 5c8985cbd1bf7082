"""The formats read (file suffix -> MIME type), and the checks every read starts with: a supported
suffix and the size limit."""

from __future__ import annotations

from pathlib import Path

from kbgraph.parse.readers.document import ParseError

DEFAULT_MAX_BYTES = 50_000_000

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
