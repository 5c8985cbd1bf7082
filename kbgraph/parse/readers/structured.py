"""Structured text: CSV rows with each cell named by its column ("Region: North; Revenue: 1200"),
JSON and JSON Lines flattened to "path: value" lines, one block per record."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from kbgraph.parse.readers.document import ParseError
from kbgraph.parse.readers.text import decode_text


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
