"""What every reader gives (``ParsedDocument``: the text, its pages and sections, or its text in
pieces) and the error a file a reader cannot read raises (``ParseError``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kbgraph.parse.chunker import TextSpan, chunk_sections, chunk_stream


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
