"""HTML: the page's text with scripts and styles dropped, tables as " | " rows, block tags as
paragraph breaks, the title on top."""

from __future__ import annotations

import re

from kbgraph.parse.readers.text import decode_text

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
