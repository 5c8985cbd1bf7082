"""What an indexing run takes and gives per document: ``DocumentInput`` (a registered document and how
to read it), ``DocOutcome`` (how it ended), and ``InFlight`` (a document between reading and recording).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from kbgraph.index.extraction import ExtractResult
from kbgraph.meta.schemas import Document
from kbgraph.store.records import Chunk


@dataclass
class DocumentInput:
    """One registered document to index; ``read`` gives its bytes, or None when it is over the
    size limit (recorded as its failure), and is called only when the run gets to it."""

    doc: Document
    read: Callable[[], bytes | None]
    size: int
    # its chunks are in the store already (a graph build): extract and merge, nothing else; its
    # status stays as it is, only its ``extracted`` mark is set once it is in the graph
    stored: bool = False
    # the file's bytes as a binary file, for a long plain-text file read while it is chunked
    # (kbgraph.parse.text_stream); None: ``read`` is the only way
    open: Callable[[], BinaryIO] | None = None

    @classmethod
    def parsed(cls, doc: Document) -> "DocumentInput":
        return cls(doc, lambda: None, doc.size, stored=True)


@dataclass
class DocOutcome:
    name: str
    status: str  # "indexed" | "skipped" | "failed" | "cancelled"
    doc_id: str = ""
    chunks: int = 0
    message: str = ""


@dataclass
class InFlight:
    doc: Document
    chunks: int = 0
    tokens: int = 0
    remaining: int = 0
    mentions: list[dict] = field(default_factory=list)
    stored_mentions: bool = False  # some were written already (a large document)
    has_slot: bool = False
    chunk_rows: list[Chunk] = field(default_factory=list)  # chunked, not stored yet
    extraction: ExtractResult = field(default_factory=ExtractResult)
    failure: str = ""
    graph_only: bool = False  # a parsed document brought into the graph (DocumentInput.stored)
    lock: threading.Lock = field(default_factory=threading.Lock)
