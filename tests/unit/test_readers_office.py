"""Spreadsheet (.xlsx, .xls) and presentation (.pptx) readers, from real files built with openpyxl,
xlwt and python-pptx, and their bad-file behaviour."""

from __future__ import annotations

import io
import zipfile

import openpyxl
import pptx
import pytest
from pptx.util import Inches
from support.documents import SALES, STAFF, make_pptx, make_xls, make_xlsx

from kbgraph.parse import ParseError, read_bytes

# -- spreadsheets -------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix, make", [(".xlsx", make_xlsx), (".xls", make_xls)])
def test_sheets_become_header_named_rows_one_page_each(suffix: str, make) -> None:
    doc = read_bytes(f"book{suffix}", make({"Sales": SALES, "Staff": STAFF}))
    assert doc.text.splitlines()[:3] == [
        "Sheet: Sales", "Region: North; Revenue: 1200; Closed: 2024-03-01", "Region: South; Revenue: 875.5"]
    staff = doc.text.index("Sheet: Staff")
    assert "Name: Mira Castell; Role: founder" in doc.text[staff:]
    assert doc.pages == [(0, 1), (staff, 2)] and doc.sections == [staff]
    assert doc.page_at(doc.text.index("Tobias")) == 2


def test_each_sheet_is_its_own_chunk_group() -> None:
    rows = [("Item", "Note")] + [(f"item {i}", f"note number {i} about the harbour") for i in range(60)]
    doc = read_bytes("book.xlsx", make_xlsx({"Long": rows, "Short": STAFF}))
    spans = doc.chunks(chunk_tokens=64, overlap=8)
    staff = doc.sections[0]
    assert len(spans) > 3 and [s.position for s in spans] == list(range(len(spans)))
    assert all(s.end <= staff or s.start >= staff for s in spans)  # no chunk holds two sheets
    assert spans[-1].text.startswith("Sheet: Short")
    # a chunk cut inside the long sheet still names every value's column
    assert all(line.startswith("Item: ") for s in spans[1:-1] for line in s.text.splitlines())
    assert all(s.text == doc.text[s.start:s.end] for s in spans)


def test_header_only_and_blank_sheets() -> None:
    doc = read_bytes("book.xlsx", make_xlsx({"Empty": [], "Heads": [("Name", "Role")]}))
    assert doc.text == "Sheet: Heads\nName; Role" and doc.pages == [(0, 2)] and doc.sections == []


def test_formula_cells_read_as_their_last_computed_value() -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["a", "b", "sum"])
    sheet.append([1, 2, "=A2+B2"])
    out = io.BytesIO()
    book.save(out)
    # openpyxl stores no computed value, so the cell has none to show: the formula text is not indexed
    assert read_bytes("f.xlsx", out.getvalue()).text.splitlines()[1] == "a: 1; b: 2"


def test_xlsx_saved_as_xls_is_read_as_xlsx() -> None:
    assert "Mira Castell" in read_bytes("old.xls", make_xlsx({"Staff": STAFF})).text


_BAD_SPREADSHEETS = [
    ("broken.xlsx", b"PK\x03\x04" + b"\x00" * 40, "corrupt or unreadable XLSX"),
    ("text.xlsx", b"Region,Revenue\nNorth,1200\n", "not a ZIP-based Office file"),
    ("locked.xlsx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600, "encrypted (password-protected)"),
    ("broken.xls", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600, "corrupt or unreadable XLS"),
    ("text.xls", b"just some text", "not an Excel 97-2003 workbook"),
    ("empty.xlsx", make_xlsx({"Blank": []}), "empty: no text found"),
]


# named by file: a built file's bytes hold the time it was built, and every process collecting the
# tests (pytest -n) must name them alike
@pytest.mark.parametrize("name, data, reason", _BAD_SPREADSHEETS, ids=[name for name, _, _ in _BAD_SPREADSHEETS])
def test_bad_spreadsheets_fail_with_their_reason(name: str, data: bytes, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        read_bytes(name, data)
    assert reason in str(info.value) and str(info.value).startswith(name)


def test_truncated_xlsx() -> None:
    data = make_xlsx({"Staff": STAFF})
    with pytest.raises(ParseError, match="corrupt or unreadable XLSX"):
        read_bytes("cut.xlsx", data[: len(data) // 2])


# -- presentations ------------------------------------------------------------------------------


def test_slides_with_notes_one_page_and_section_each() -> None:
    data = make_pptx([("The Lumen Guild", "Founded by Mira Castell in 781", "Mention the emblem"),
                      ("", "", ""),
                      ("Archives", "Kept by Tobias Wren", "")])
    doc = read_bytes("deck.pptx", data)
    assert doc.text.splitlines()[:3] == ["Slide 1", "The Lumen Guild", ""]
    assert "Founded by Mira Castell in 781" in doc.text and "Notes: Mention the emblem" in doc.text
    third = doc.text.index("Slide 3")
    assert doc.pages == [(0, 1), (third, 3)] and doc.sections == [third]  # the blank slide has no text
    assert doc.page_at(doc.text.index("Tobias")) == 3


def test_tables_and_groups_on_slides() -> None:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(1), Inches(4), Inches(1)).table
    for (r, c), text in {(0, 0): "Name", (0, 1): "Year", (1, 0): "Glass Tower", (1, 1): "802"}.items():
        table.cell(r, c).text = text
    group = slide.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(3), Inches(2), Inches(1)).text_frame.text = "Inside a group"
    out = io.BytesIO()
    deck.save(out)
    text = read_bytes("t.pptx", out.getvalue()).text
    assert "Name | Year\nGlass Tower | 802" in text and "Inside a group" in text


def _rich_deck() -> bytes:
    """Slides reordered after creation, line breaks and several runs in a paragraph, a group inside
    a group, a table with an empty and a multi-paragraph cell, notes, and a slide with only a
    picture-free connector."""
    deck = pptx.Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Glass Tower\vsecond line"
    body = first.placeholders[1].text_frame
    body.text = "Built in 802"
    para = body.add_paragraph()
    for word in ("by ", "the ", "Lumen Guild"):
        para.add_run().text = word
    outer = first.shapes.add_group_shape()
    inner = outer.shapes.add_group_shape()
    inner.shapes.add_textbox(Inches(1), Inches(4), Inches(2), Inches(1)).text_frame.text = "Deep inside"
    outer.shapes.add_textbox(Inches(4), Inches(4), Inches(2), Inches(1)).text_frame.text = "In the group"
    first.notes_slide.notes_text_frame.text = "Speaker note\nsecond paragraph"
    second = deck.slides.add_slide(deck.slide_layouts[6])
    table = second.shapes.add_table(3, 3, Inches(1), Inches(1), Inches(6), Inches(2)).table
    table.cell(0, 0).text = "Name"
    table.cell(0, 2).text = "Note"
    table.cell(1, 0).text = "Archive"
    table.cell(1, 2).text_frame.text = "kept"
    table.cell(1, 2).text_frame.add_paragraph().text = "by Tobias Wren"
    second.shapes.add_connector(1, Inches(1), Inches(5), Inches(3), Inches(5))
    second.shapes.add_textbox(Inches(1), Inches(6), Inches(2), Inches(1)).text_frame.text = "   "
    third = deck.slides.add_slide(deck.slide_layouts[5])
    third.shapes.title.text = "Moved to the front"
    ids = deck.slides._sldIdLst  # python-pptx has no public reorder: move the last slide first
    ids.insert(0, ids[-1])
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def test_pptx_text_is_what_python_pptx_shows() -> None:
    # the reader parses the slide XML itself (python-pptx is only a test dependency); the text
    # must be the one python-pptx's object model gives for the same deck
    data = _rich_deck()

    def shape_texts(shape) -> list[str]:
        if shape.shape_type == pptx.enum.shapes.MSO_SHAPE_TYPE.GROUP:
            return [text for inner in shape.shapes for text in shape_texts(inner)]
        if shape.has_table:
            rows = [" | ".join(" ".join(c.text.split()) for c in row.cells) for row in shape.table.rows]
            return ["\n".join(row for row in rows if row.strip(" |"))]
        return [shape.text_frame.text] if shape.has_text_frame else []

    expected = []
    for number, slide in enumerate(pptx.Presentation(io.BytesIO(data)).slides, start=1):
        blocks = [text for shape in slide.shapes for text in shape_texts(shape)]
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame.text.strip():
            blocks.append("Notes: " + slide.notes_slide.notes_text_frame.text.strip())
        expected.append(f"Slide {number}\n" + "\n\n".join(b.strip() for b in blocks if b.strip()))
    text = read_bytes("rich.pptx", data).text
    assert text == "\n\n".join(expected)
    assert text.startswith("Slide 1\nMoved to the front\n\nSlide 2\nGlass Tower\vsecond line")
    for part in ("by the Lumen Guild", "Deep inside", "In the group", "Name |  | Note",
                 "Archive |  | kept by Tobias Wren", "Notes: Speaker note\nsecond paragraph"):
        assert part in text


_BAD_PRESENTATIONS = [
    ("broken.pptx", b"PK\x03\x04" + b"\x00" * 40, "corrupt or unreadable PPTX"),
    ("locked.pptx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600, "encrypted (password-protected)"),
    ("blank.pptx", make_pptx([("", "", "")]), "empty: no text found"),
]


@pytest.mark.parametrize("name, data, reason", _BAD_PRESENTATIONS, ids=[name for name, _, _ in _BAD_PRESENTATIONS])
def test_bad_presentations_fail_with_their_reason(name: str, data: bytes, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        read_bytes(name, data)
    assert reason in str(info.value)


def test_a_zip_that_is_no_presentation() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("hello.txt", "not a deck")
    with pytest.raises(ParseError, match="corrupt or unreadable PPTX"):
        read_bytes("fake.pptx", out.getvalue())
