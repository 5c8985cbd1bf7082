"""Real files of every format the readers take, built with the libraries that write them."""

from __future__ import annotations

import datetime
import io

import docx
import openpyxl
import pptx
import xlwt
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject


def make_pdf(pages: list[str], password: str | None = None) -> bytes:
    """A PDF whose pages show the given lines in Helvetica ("" = a page with no text)."""
    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    for text in pages:
        page = writer.add_blank_page(612, 792)
        if not text:
            continue
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    if password is not None:
        writer.encrypt(user_password=password, owner_password="owner-secret", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx() -> bytes:
    document = docx.Document()
    document.add_heading("Harbor report", level=1)
    document.add_paragraph("The Glass Tower stands at the end of the Long Quay.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Name"
    table.cell(0, 1).text = "Year"
    table.cell(1, 0).text = "Glass Tower"
    table.cell(1, 1).text = "802"
    document.add_paragraph("After the table comes the closing paragraph.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


SALES = [("Region", "Revenue", "Closed"), ("North", 1200, datetime.date(2024, 3, 1)), ("South", 875.5, None)]
STAFF = [("Name", "Role"), ("Mira Castell", "founder"), ("Tobias Wren", "archivist")]


def make_xlsx(sheets: dict[str, list[tuple]]) -> bytes:
    book = openpyxl.Workbook()
    book.remove(book.active)
    for title, rows in sheets.items():
        sheet = book.create_sheet(title)
        for row in rows:
            sheet.append(list(row))
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def make_xls(sheets: dict[str, list[tuple]]) -> bytes:
    book = xlwt.Workbook()
    dates = xlwt.easyxf(num_format_str="YYYY-MM-DD")
    for title, rows in sheets.items():
        sheet = book.add_sheet(title)
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                if isinstance(value, datetime.date):
                    sheet.write(r, c, datetime.datetime.combine(value, datetime.time()), dates)
                elif value is not None:
                    sheet.write(r, c, value)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def make_pptx(slides: list[tuple[str, str, str]]) -> bytes:
    """Slides of (title, body, notes); an all-empty triple gives a blank slide."""
    deck = pptx.Presentation()
    for title, body, notes in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[6 if not (title or body) else 1])
        if title:
            slide.shapes.title.text = title
        if body:
            slide.placeholders[1].text = body
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()
