"""Crash-safe uploads: a file and its document row appear together or not at all.

The new document's id is chosen first; the bytes stream into the blob store under its key
(``<kb>/<doc>``, kbgraph.blob), which makes them visible only once they are all there (a temporary
file renamed, or a finished S3 upload); only then is the row inserted. A crash at any point leaves
at most a partial upload or a file nobody points at, which ``clean_upload_debris`` removes when a
web process starts; never a row without its file. The database's unique (dataset, name) constraint
decides between concurrent uploads of one name: the loser takes the next free ``name(n)``. A retried
upload (same name, same bytes) is recognised and answered with the document it made.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO

from kbgraph.blob import BlobError, BlobStore, document_key
from kbgraph.config import Settings
from kbgraph.meta import AlreadyExists, Document, KnowledgeBase, MetaDB

log = logging.getLogger(__name__)

_ATTEMPTS = 50  # names tried before giving up (each loss means another upload took that name)


class UploadTooLarge(ValueError):
    """The file is larger than the parse limit (max_file_bytes)."""


@dataclass(frozen=True)
class Received:
    size: int
    sha256: str


class Metered:
    """An upload's stream as the blob store reads it: hashed, counted, and refused past the limit."""

    def __init__(self, stream: IO[bytes], name: str, limit: int) -> None:
        self.stream, self.name, self.limit = stream, name, limit
        self.size, self.digest = 0, hashlib.sha256()

    def read(self, amount: int | None = -1) -> bytes:
        block = self.stream.read(amount if amount is not None and amount >= 0 else self.limit + 1)
        self.size += len(block)
        if self.size > self.limit:
            raise UploadTooLarge(f"{self.name}: the file is larger than the limit of {self.limit} bytes "
                                 "(setting max_file_bytes)")
        self.digest.update(block)
        return block

    def received(self) -> Received:
        return Received(self.size, self.digest.hexdigest())


def name_variants(name: str, n: int) -> str:
    """RAGFlow's ``stem(n).ext`` for the n-th upload of a name (n = 0: the name itself)."""
    if n == 0:
        return name
    path = PurePosixPath(name)
    return f"{path.stem}({n}){path.suffix}"


def _same_upload(docs: list[Document], name: str, received: Received) -> Document | None:
    """A document this upload already made: one of the name's variants with the same bytes."""
    wanted = {name_variants(name, n).casefold() for n in range(_ATTEMPTS)}
    for doc in docs:
        if doc.name.casefold() in wanted and doc.content_hash == received.sha256 and doc.size == received.size:
            return doc
    return None


def commit(meta: MetaDB, kb: KnowledgeBase, name: str, doc_id: str, location: str, received: Received,
           extra: dict[str, object]) -> Document:
    """The document row for a stored file: a new one (id ``doc_id``) under the first free variant of
    ``name``, or the existing one when the same bytes were uploaded under this name before."""
    for _ in range(_ATTEMPTS):
        docs = meta.list_documents(kb.id, limit=None)
        found = _same_upload(docs, name, received)
        if found is not None:
            return found
        taken = {d.name.casefold() for d in docs}
        candidate = next(v for v in (name_variants(name, n) for n in range(10_000)) if v.casefold() not in taken)
        try:
            return meta.create_document(kb.id, candidate, location, received.size, received.sha256,
                                        doc_id=doc_id, extra=extra)
        except AlreadyExists:  # another upload took the name between our read and our write
            continue
    raise AlreadyExists(f"{name}: could not find a free name after {_ATTEMPTS} concurrent uploads; retry")


def store_upload(settings: Settings, meta: MetaDB, blobs: BlobStore, kb: KnowledgeBase, name: str,
                 stream: IO[bytes], kind: str) -> Document:
    """Keep an uploaded file in the blob store and register it (the file first: a row never points
    at nothing). Raises UploadTooLarge past max_file_bytes, BlobError when the store fails."""
    doc_id = uuid.uuid1().hex
    key = document_key(kb.id, doc_id)
    metered = Metered(stream, name, settings.max_file_bytes)
    blobs.put(key, metered)  # streamed, and atomic: a failed put leaves nothing under the key
    extra = {"type": kind, "chunk_method": kb.extra.get("chunk_method", "naive")}
    try:
        doc = commit(meta, kb, name, doc_id, blobs.location(key), metered.received(), extra)
    except BaseException:
        _forget(blobs, key)
        raise
    if doc.id != doc_id:  # a retry of an upload that made its document before: this copy is spare
        _forget(blobs, key)
    return doc


def _forget(blobs: BlobStore, key: str) -> None:
    try:
        blobs.delete(key)
    except BlobError as exc:  # the debris sweep of the next start removes it
        log.warning("could not delete the unused upload %s: %s", key, exc)


def clean_upload_debris(blobs: BlobStore, meta: MetaDB, *, older_than: float) -> list[str]:
    """Remove what crashed uploads left: partial uploads, and files no document row points at.

    Only what is untouched for ``older_than`` seconds (longer than any request may run) goes, so an
    upload in flight in another web process is never touched. Returns the keys of the removed files.
    """
    partial = blobs.clean_partial(older_than)
    cutoff = time.time() - older_than
    by_kb: dict[str, list[str]] = defaultdict(list)
    for info in blobs.list():
        kb_id, _, doc_id = info.key.partition("/")
        if doc_id and info.modified < cutoff:
            by_kb[kb_id].append(doc_id)
    removed: list[str] = []
    for kb_id, names in by_kb.items():
        try:
            known = {d.id for d in meta.list_documents(kb_id, limit=None)}
        except Exception:  # unreadable metadata: leave everything as it is
            log.exception("cannot list the documents of %s; its uploads are left alone", kb_id)
            continue
        for name in names:
            if name not in known:
                blobs.delete(f"{kb_id}/{name}")
                removed.append(f"{kb_id}/{name}")
    if removed or partial:
        log.warning("removed %d file(s) and %d partial upload(s) left by interrupted uploads in %s", len(removed),
                    partial, blobs.where)
    return removed
