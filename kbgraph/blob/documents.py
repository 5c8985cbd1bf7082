"""A document's file: its upload in the blob store, or, for a document registered from a file on this
host and never uploaded (``kbgraph index``, the library's ``upsert_document``: its location is that
file's absolute path), that file, as the workers and the download route read them before the blob
store existed. On another host such a path names nothing, and the blob store's BlobNotFound stands."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from kbgraph.blob.base import BlobNotFound, BlobStore, document_key


@dataclass(frozen=True)
class DocumentFile:
    size: int
    open: Callable[[], BinaryIO]

    def read(self) -> bytes:
        with self.open() as stream:
            return stream.read()


def document_file(blobs: BlobStore, kb_id: str, doc_id: str, location: str) -> DocumentFile:
    """Where the document's bytes are (see the module's docstring); BlobNotFound when nowhere."""
    key = document_key(kb_id, doc_id)
    try:
        return DocumentFile(blobs.size(key), lambda: blobs.open(key))
    except BlobNotFound:
        path = Path(location) if location else None
        if path is None or not path.is_absolute() or not path.is_file():
            raise
        return DocumentFile(path.stat().st_size, lambda: path.open("rb"))


__all__ = ["DocumentFile", "document_file"]
