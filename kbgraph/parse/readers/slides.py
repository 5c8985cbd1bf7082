"""The text of a PowerPoint (.pptx) deck, read from the slide XML inside its zip with lxml.

python-pptx would read the same parts, but it is a library for writing decks: it pulls in Pillow and
XlsxWriter (~25 MB installed) that reading text never uses. This reads what python-pptx's object
model shows (kbgraph's reader used it before, and its tests build their decks with it):

- slides in the order of presentation.xml's slide id list;
- on each slide the shapes of the shape tree in document order: a text shape's text frame
  (paragraphs joined by newlines; a line break inside a paragraph is a vertical tab, as python-pptx
  gives it), a table's rows (cells as lists of their paragraphs), and the shapes inside groups,
  recursively; pictures, connectors and charts carry no text;
- the notes slide's body placeholder, when the slide has notes.

``_read_pptx`` turns them into the document's parts: each slide a page and a section of its own,
"Slide N" over its shapes' text, tables as " | " rows, its notes last.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from dataclasses import dataclass, field
from typing import Any

from kbgraph.parse.readers.document import ParseError
from kbgraph.parse.readers.office import _ZIP_MAGIC, _office_container_problem

_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
_NOTES_SLIDE = _R + "/notesSlide"
# the drawingml table (graphicFrame -> a:graphic -> a:graphicData -> a:tbl)
_TABLE = f"{{{_A}}}graphic/{{{_A}}}graphicData/{{{_A}}}tbl"


@dataclass
class Table:
    rows: list[list[list[str]]] = field(default_factory=list)  # row -> cell -> paragraphs


@dataclass
class Slide:
    shapes: list[str | Table]  # a text frame's paragraphs joined by "\n", or a table
    notes: str | None  # the notes body's text; None without notes


def read_slides(data: bytes) -> list[Slide]:
    """Every slide of the deck in ``data``; zip, XML and missing-part errors propagate."""
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        deck = _Package(package)
        presentation = "ppt/presentation.xml"
        links = deck.relationships(presentation)
        root = deck.xml(presentation)
        slides = []
        for slide_id in root.iterfind(f"{{{_P}}}sldIdLst/{{{_P}}}sldId"):
            path = links[slide_id.get(f"{{{_R}}}id")]
            slides.append(Slide(_tree_shapes(deck.xml(path)), _notes(deck, path)))
        return slides


class _Package:
    def __init__(self, package: zipfile.ZipFile) -> None:
        self.package = package

    def xml(self, path: str) -> Any:
        from lxml import etree

        # no entity expansion or network access from a document's XML
        parser = etree.XMLParser(resolve_entities=False, no_network=True)
        return etree.fromstring(self.package.read(path), parser)

    def relationships(self, path: str) -> dict[str, str]:
        """Relationship id -> the internal part it targets, for the part at ``path``."""
        folder, name = posixpath.split(path)
        rels_path = posixpath.join(folder, "_rels", name + ".rels")
        if rels_path not in self.package.namelist():
            return {}
        found = {}
        for rel in self.xml(rels_path).iterfind(f"{{{_RELS}}}Relationship"):
            if rel.get("TargetMode") == "External":
                continue
            target = rel.get("Target", "")
            resolved = target[1:] if target.startswith("/") else posixpath.join(folder, target)
            found[rel.get("Id")] = posixpath.normpath(resolved)
        return found

    def relationship_of_type(self, path: str, kind: str) -> str | None:
        folder, name = posixpath.split(path)
        rels_path = posixpath.join(folder, "_rels", name + ".rels")
        if rels_path not in self.package.namelist():
            return None
        for rel in self.xml(rels_path).iterfind(f"{{{_RELS}}}Relationship"):
            if rel.get("Type") == kind and rel.get("TargetMode") != "External":
                return self.relationships(path)[rel.get("Id")]
        return None


def _tree_shapes(part: Any) -> list[str | Table]:
    tree = part.find(f"{{{_P}}}cSld/{{{_P}}}spTree")
    return [] if tree is None else _shapes(tree)


def _shapes(container: Any) -> list[str | Table]:
    found: list[str | Table] = []
    for shape in container:
        if shape.tag == f"{{{_P}}}sp":
            body = shape.find(f"{{{_P}}}txBody")
            if body is not None:
                found.append("\n".join(_paragraphs(body)))
        elif shape.tag == f"{{{_P}}}grpSp":
            found.extend(_shapes(shape))
        elif shape.tag == f"{{{_P}}}graphicFrame":
            table = shape.find(_TABLE)
            if table is not None:
                found.append(Table([[_paragraphs(cell.find(f"{{{_A}}}txBody"))
                                     for cell in row.iterfind(f"{{{_A}}}tc")]
                                    for row in table.iterfind(f"{{{_A}}}tr")]))
    return found


def _paragraphs(body: Any) -> list[str]:
    if body is None:
        return []
    return ["".join(_run_text(child) for child in paragraph)
            for paragraph in body.iterfind(f"{{{_A}}}p")]


def _run_text(element: Any) -> str:
    if element.tag == f"{{{_A}}}br":
        return "\v"
    if element.tag in (f"{{{_A}}}r", f"{{{_A}}}fld"):
        return element.findtext(f"{{{_A}}}t") or ""
    return ""  # paragraph and end-of-paragraph properties


def _notes(deck: _Package, slide_path: str) -> str | None:
    notes_path = deck.relationship_of_type(slide_path, _NOTES_SLIDE)
    if notes_path is None:
        return None
    tree = deck.xml(notes_path).find(f"{{{_P}}}cSld/{{{_P}}}spTree")
    for shape in () if tree is None else tree.iterfind(f"{{{_P}}}sp"):
        placeholder = shape.find(f"{{{_P}}}nvSpPr/{{{_P}}}nvPr/{{{_P}}}ph")
        if placeholder is not None and placeholder.get("type") == "body":
            return "\n".join(_paragraphs(shape.find(f"{{{_P}}}txBody")))
    return None


def _read_pptx(name: str, data: bytes) -> list[tuple[int, str]]:
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
