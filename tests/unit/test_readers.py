"""Readers: every format from real files in tmp_path, and every failure mode as a ParseError."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

import pytest
from support.documents import make_docx, make_pdf

from kbgraph.parse import SUPPORTED_SUFFIXES, ParseError, iter_paths, read_bytes, read_document
from kbgraph.parse.readers.text import decode_text


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


# -- text formats ------------------------------------------------------------------------------


def test_plain_text_utf8_and_crlf(tmp_path: Path) -> None:
    doc = read_document(write(tmp_path, "notes.txt", "  Line one\r\nLine two 港口\r\n\r\n"))
    assert doc.name == "notes.txt"
    assert doc.text == "Line one\nLine two 港口"
    assert doc.mime == "text/plain"
    assert doc.pages == []


@pytest.mark.parametrize("suffix,mime", [(".md", "text/markdown"), (".markdown", "text/markdown")])
def test_markdown(tmp_path: Path, suffix: str, mime: str) -> None:
    doc = read_document(write(tmp_path, "a" + suffix, "# Title\n\nSome *text*."))
    assert doc.text == "# Title\n\nSome *text*."
    assert doc.mime == mime


def test_utf8_bom_is_stripped(tmp_path: Path) -> None:
    doc = read_document(write(tmp_path, "bom.txt", b"\xef\xbb\xbfHello BOM"))
    assert doc.text == "Hello BOM"


def test_utf16_with_bom(tmp_path: Path) -> None:
    doc = read_document(write(tmp_path, "wide.txt", "Varrow 港口".encode("utf-16")))
    assert doc.text == "Varrow 港口"


def test_gbk_text_decodes(tmp_path: Path) -> None:
    text = "南屿商会是东方港口南屿港最大的商人组织，由宋知远创办。商会的船队每年春天向西航行，运送茶叶和瓷器。" * 3
    doc = read_document(write(tmp_path, "gbk.txt", text.encode("gbk")))
    assert doc.text == text


def test_latin1_text_decodes(tmp_path: Path) -> None:
    text = (
        "Le café de la place sert une crème brûlée très appréciée. "
        "Les élèves naïfs préfèrent le thé; à côté, la pâtisserie ferme à midi."
    )
    doc = read_document(write(tmp_path, "latin.txt", text.encode("latin-1")))
    assert doc.text == text


def test_html_drops_script_and_style_keeps_title(tmp_path: Path) -> None:
    html = """<html><head><title>Harbor Guide</title><style>p { color: red }</style>
    <script>var secret = "do not index";</script></head>
    <body><h1>Welcome</h1><p>The <b>Glass</b> Tower<br>is tall.</p>
    <table><tr><th>Year</th><th>Event</th></tr><tr><td>812</td><td>Flood</td></tr></table></body></html>"""
    doc = read_document(write(tmp_path, "guide.html", html))
    assert doc.mime == "text/html"
    assert doc.text.startswith("Harbor Guide\n\nWelcome")
    assert "The Glass Tower\nis tall." in doc.text
    assert "Year | Event\n812 | Flood" in doc.text
    assert "secret" not in doc.text and "color" not in doc.text


def test_htm_suffix(tmp_path: Path) -> None:
    assert read_document(write(tmp_path, "x.HTM", "<p>Upper-case suffix works</p>")).text == "Upper-case suffix works"


def test_csv_rows_become_header_value_lines(tmp_path: Path) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerows([["name", "city", "founded"], ["Lumen Guild", "Varrow", "790"], ["Kestrel", "", "820"]])
    doc = read_document(write(tmp_path, "orgs.csv", buffer.getvalue()))
    assert doc.text == "name: Lumen Guild; city: Varrow; founded: 790\nname: Kestrel; founded: 820"
    assert doc.mime == "text/csv"


def test_csv_semicolon_delimiter_is_sniffed(tmp_path: Path) -> None:
    data = "name;city\nMira Castell;Varrow\nTobias Wren;Hollin Ford\n"
    doc = read_document(write(tmp_path, "people.csv", data))
    assert doc.text.splitlines() == ["name: Mira Castell; city: Varrow", "name: Tobias Wren; city: Hollin Ford"]


def test_json_is_flattened_to_key_paths(tmp_path: Path) -> None:
    value = {"guild": {"name": "Lumen", "emblem": "silver heron", "ranks": ["apprentice", "master"], "hq": None}}
    doc = read_document(write(tmp_path, "g.json", json.dumps(value)))
    assert doc.text.splitlines() == ["guild.name: Lumen", "guild.emblem: silver heron", "guild.ranks: apprentice, master"]
    assert doc.mime == "application/json"


def test_json_list_of_records_gives_blocks(tmp_path: Path) -> None:
    value = [{"name": "A", "year": 1}, {"name": "B", "active": True}]
    doc = read_document(write(tmp_path, "r.json", json.dumps(value)))
    assert doc.text == "name: A\nyear: 1\n\nname: B\nactive: true"


def test_jsonl_line_by_line(tmp_path: Path) -> None:
    data = '{"q": "Who?", "a": "Mira"}\n\n{"q": "Where?", "a": "Varrow"}\n'
    doc = read_document(write(tmp_path, "qa.jsonl", data))
    assert doc.text == "q: Who?\na: Mira\n\nq: Where?\na: Varrow"


# -- paged and office formats --------------------------------------------------------------------


def test_pdf_text_and_page_offsets(tmp_path: Path) -> None:
    doc = read_document(write(tmp_path, "report.pdf", make_pdf(["First page text", "", "Third page text"])))
    assert doc.mime == "application/pdf"
    assert "First page text" in doc.text and "Third page text" in doc.text
    assert [number for _, number in doc.pages] == [1, 2, 3]
    third_start = dict((n, s) for s, n in doc.pages)[3]
    assert doc.text[third_start:].startswith("Third page text")
    assert doc.page_at(doc.text.index("Third")) == 3
    assert doc.page_at(0) == 1


def test_pdf_with_empty_user_password_opens(tmp_path: Path) -> None:
    doc = read_document(write(tmp_path, "open.pdf", make_pdf(["Readable words"], password="")))
    assert "Readable words" in doc.text


def test_encrypted_pdf_needs_password(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="encrypted.*password"):
        read_document(write(tmp_path, "locked.pdf", make_pdf(["Secret words"], password="hunter2")))


def test_pdf_without_text_layer(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="no text layer.*OCR") as info:
        read_document(write(tmp_path, "scan.pdf", make_pdf(["", ""])))
    assert "scan.pdf" in str(info.value)


@pytest.mark.parametrize(
    "data",
    [
        b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >>\nthis is not a pdf at all\n%%EOF",
        b"hello, I am a text file pretending",
    ],
)
def test_corrupt_pdf(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(ParseError, match="broken.pdf: .*(corrupt|not a PDF)"):
        read_document(write(tmp_path, "broken.pdf", data))


def test_truncated_pdf(tmp_path: Path) -> None:
    data = make_pdf(["Some text here"])
    with pytest.raises(ParseError, match="truncated.pdf"):
        read_document(write(tmp_path, "truncated.pdf", data[: len(data) // 3]))


def test_docx_paragraphs_and_tables_in_order(tmp_path: Path) -> None:
    doc = read_document(write(tmp_path, "report.docx", make_docx()))
    assert doc.text == (
        "Harbor report\n\nThe Glass Tower stands at the end of the Long Quay.\n\n"
        "Name | Year\nGlass Tower | 802\n\nAfter the table comes the closing paragraph."
    )
    assert doc.mime.endswith("wordprocessingml.document")


@pytest.mark.parametrize("data", [b"PK\x03\x04 not really a zip", make_pdf(["a pdf, not a docx"])])
def test_corrupt_docx(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(ParseError, match="bad.docx: corrupt or unreadable DOCX"):
        read_document(write(tmp_path, "bad.docx", data))


# -- failure modes -------------------------------------------------------------------------------


def test_random_binary_is_rejected(tmp_path: Path) -> None:
    data = random.Random(7).randbytes(4096)
    with pytest.raises(ParseError, match="junk.txt: .*binary"):
        read_document(write(tmp_path, "junk.txt", data))


def test_control_characters_without_nul_are_rejected(tmp_path: Path) -> None:
    data = bytes(range(1, 9)) * 200 + b"a few words"
    with pytest.raises(ParseError, match="binary"):
        read_bytes("ctl.md", data)


@pytest.mark.parametrize("name,data", [("empty.txt", b""), ("blank.md", b" \n\t\n"), ("empty.json", b"{}")])
def test_empty_documents(tmp_path: Path, name: str, data: bytes) -> None:
    with pytest.raises(ParseError, match="empty") as info:
        read_document(write(tmp_path, name, data))
    assert name in str(info.value)


def test_html_without_text_is_empty(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="empty"):
        read_document(write(tmp_path, "blank.html", "<html><script>x=1</script></html>"))


def test_invalid_json(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match=r"bad.json: invalid JSON at line 2"):
        read_document(write(tmp_path, "bad.json", '{"a": 1,\n "b": }'))


def test_invalid_jsonl_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="invalid JSON on line 3"):
        read_document(write(tmp_path, "bad.jsonl", '{"a": 1}\n{"b": 2}\n{oops\n'))


def test_unsupported_suffix_lists_supported_types(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match=r"unsupported file type \(\.png\).*\.pdf.*\.docx") as info:
        read_document(write(tmp_path, "image.png", b"\x89PNG"))
    assert all(suffix in str(info.value) for suffix in SUPPORTED_SUFFIXES)
    with pytest.raises(ParseError, match="no extension"):
        read_bytes("Makefile", b"all:")


def test_oversize_file_names_size_and_limit(tmp_path: Path) -> None:
    path = write(tmp_path, "big.txt", "x" * 2500)
    with pytest.raises(ParseError, match=r"big.txt: file is 2.5 kB, over the limit of 1.0 kB"):
        read_document(path, max_bytes=1000)
    with pytest.raises(ParseError, match="over the limit"):
        read_bytes("big.txt", b"x" * 2500, max_bytes=1000)
    assert read_document(path, max_bytes=2500).text == "x" * 2500


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="cannot read file"):
        read_document(tmp_path / "nope.txt")


def test_read_bytes_matches_read_document(tmp_path: Path) -> None:
    data = make_docx()
    assert read_bytes("report.docx", data) == read_document(write(tmp_path, "report.docx", data))


# -- paths ---------------------------------------------------------------------------------------


def test_iter_paths_expands_folders(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    for rel in ["b.txt", "a.md", "sub/c.pdf", "sub/deeper/d.json", ".hidden.txt", ".git/e.txt", "img.png"]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    explicit = write(tmp_path, "photo.png", b"x")
    found = iter_paths([root, explicit])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "docs/a.md",
        "docs/b.txt",
        "docs/sub/c.pdf",
        "docs/sub/deeper/d.json",
        "photo.png",
    ]
    everything = iter_paths([root], supported_only=False)
    assert root / "img.png" in everything and root / ".hidden.txt" not in everything
    assert iter_paths([root, root / "a.md"]) == iter_paths([root])


def test_junk_class_is_exactly_the_rejected_unicode_categories() -> None:
    """The one-regex count of junk characters equals the per-character category test it replaces."""
    import sys
    import unicodedata

    from kbgraph.parse.readers.text import _ALLOWED_CONTROLS, _JUNK

    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        expected = ch == "\ufffd" or (unicodedata.category(ch) in ("Cc", "Cs", "Co") and ch not in _ALLOWED_CONTROLS)
        assert bool(_JUNK.fullmatch(ch)) == expected, hex(code)


def test_a_few_replacement_and_private_use_characters_are_dropped_not_fatal() -> None:
    # a short scraped page: 3 odd characters in 40 (7.5%) used to fail it as "binary"
    scraped = "Varrow\ufffds harbor \ue000opened in 818.\U000f0001 Salt!".encode("utf-8")
    assert decode_text("page.txt", scraped) == "Varrows harbor opened in 818. Salt!"
    with pytest.raises(ParseError, match="binary"):  # made mostly of them, it is still junk
        decode_text("junk.txt", ("\ufffd\ue001" * 40 + "ab").encode("utf-8"))
    with pytest.raises(ParseError, match="binary"):  # controls still mark binary data
        decode_text("ctl.txt", ("\x01\x02\x03 text " * 10).encode("utf-8"))
