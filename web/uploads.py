"""Crash-safe uploads: a file and its document row appear together or not at all.

The bytes stream into a temporary file in the dataset's upload folder (``.upload-<random>``), are
flushed to disk, renamed to the new document's id, and only then is the row inserted. A crash at any
point leaves at most a file nobody points at, which ``clean_upload_debris`` removes when a web
process starts; never a row without its file. The database's unique (dataset, name) constraint
decides between concurrent uploads of one name: the loser takes the next free ``name(n)``. A
retried upload (same name, same bytes) is recognised and answered with the document it made.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from kbgraph.config import Settings
from kbgraph.meta import AlreadyExists, Document, KnowledgeBase, MetaDB

log = logging.getLogger(__name__)

TEMP_PREFIX = ".upload-"
_ATTEMPTS = 50  # names tried before giving up (each loss means another upload took that name)


class UploadTooLarge(ValueError):
    """The file is larger than the parse limit (max_file_bytes)."""


@dataclass(frozen=True)
class Received:
    path: Path
    size: int
    sha256: str


def name_variants(name: str, n: int) -> str:
    """RAGFlow's ``stem(n).ext`` for the n-th upload of a name (n = 0: the name itself)."""
    if n == 0:
        return name
    path = PurePosixPath(name)
    return f"{path.stem}({n}){path.suffix}"


def receive(stream: IO[bytes], folder: Path, name: str, limit: int) -> Received:
    """Stream an upload into a temporary file of ``folder``, on disk when this returns."""
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f"{TEMP_PREFIX}{uuid.uuid4().hex}"
    digest, size = hashlib.sha256(), 0
    try:
        with partial.open("wb") as out:  # streamed: an upload is never held in memory whole
            while block := stream.read(1 << 20):
                size += len(block)
                if size > limit:
                    raise UploadTooLarge(f"{name}: the file is larger than the limit of {limit} bytes "
                                         "(setting max_file_bytes)")
                digest.update(block)
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return Received(partial, size, digest.hexdigest())


def _same_upload(docs: list[Document], name: str, received: Received) -> Document | None:
    """A document this upload already made: one of the name's variants with the same bytes."""
    wanted = {name_variants(name, n).casefold() for n in range(_ATTEMPTS)}
    for doc in docs:
        if doc.name.casefold() in wanted and doc.content_hash == received.sha256 and doc.size == received.size:
            return doc
    return None


def commit(meta: MetaDB, kb: KnowledgeBase, folder: Path, name: str, received: Received,
           extra: dict[str, object]) -> Document:
    """The document row for a received file: a new one under the first free variant of ``name``,
    or the existing one when the same bytes were uploaded under this name before."""
    try:
        for _ in range(_ATTEMPTS):
            docs = meta.list_documents(kb.id, limit=None)
            found = _same_upload(docs, name, received)
            if found is not None:
                return found
            taken = {d.name.casefold() for d in docs}
            candidate = next(v for v in (name_variants(name, n) for n in range(10_000)) if v.casefold() not in taken)
            doc_id = uuid.uuid1().hex
            final = folder / doc_id
            os.replace(received.path, final)  # the file first: a row never points at nothing
            try:
                return meta.create_document(kb.id, candidate, str(final.resolve()), received.size, received.sha256,
                                            doc_id=doc_id, extra=extra)
            except AlreadyExists:  # another upload took the name between our read and our write
                os.replace(final, received.path)
            except BaseException:
                final.unlink(missing_ok=True)
                raise
        raise AlreadyExists(f"{name}: could not find a free name after {_ATTEMPTS} concurrent uploads; retry")
    finally:
        received.path.unlink(missing_ok=True)


def store_upload(settings: Settings, meta: MetaDB, kb: KnowledgeBase, folder: Path, name: str, stream: IO[bytes],
                 kind: str) -> Document:
    received = receive(stream, folder, name, settings.max_file_bytes)
    extra = {"type": kind, "chunk_method": kb.extra.get("chunk_method", "naive")}
    return commit(meta, kb, folder, name, received, extra)


def clean_upload_debris(uploads: Path, meta: MetaDB, *, older_than: float) -> list[Path]:
    """Remove what crashed uploads left: temporary files, and files no document row points at.

    Only files untouched for ``older_than`` seconds (longer than any request may run) go, so an
    upload in flight in another web process is never touched. Returns what was removed.
    """
    removed: list[Path] = []
    if not uploads.is_dir():
        return removed
    cutoff = time.time() - older_than
    for folder in uploads.iterdir():
        if not folder.is_dir():
            continue
        try:
            known = {Path(d.location).name for d in meta.list_documents(folder.name, limit=None) if d.location}
        except Exception:  # unreadable metadata: leave everything as it is
            log.exception("cannot list the documents of %s; its uploads are left alone", folder.name)
            continue
        for path in folder.iterdir():
            try:
                if not path.is_file() or path.stat().st_mtime > cutoff or path.name in known:
                    continue
                path.unlink()
                removed.append(path)
            except FileNotFoundError:
                continue
    if removed:
        log.warning("removed %d file(s) left by interrupted uploads under %s", len(removed), uploads)
    return removed
