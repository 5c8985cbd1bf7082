"""The blob store contract: files of any size kept under keys, behind one interface.

Uploaded documents live here, wherever the web server and the workers run: a folder in ``data_dir``
(``blob_store = "local"``, the embedded default) or a bucket of any S3-compatible server
(``"s3"``). Keys are ``/``-separated segments of letters, digits, ``.``, ``_`` and ``-``; a segment
never starts with ``.`` (the local store keeps its partial uploads under such names). An uploaded
document's key is ``<knowledge base id>/<document id>`` (``document_key``), so a knowledge base's
files are the keys under ``kb_prefix``.

The promises every store keeps (tests/contract/test_blob_contract.py runs them on both):

- ``put`` streams: it never holds the whole file in memory;
- ``put`` is atomic: a reader sees the earlier object under the key or the whole new one, never a
  part, and a put that fails (a read error, a refused size, a dropped connection) leaves nothing
  new under the key;
- what a crash in the middle of a put leaves (a partial file, an unfinished multipart upload) is
  never visible under a key, and ``clean_partial`` removes it once it is old enough;
- every failure the user can do something about is a ``BlobError`` whose message names the place
  (folder or endpoint and bucket) and the setting to look at.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, BinaryIO

_KEY = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*")


class BlobError(Exception):
    """The blob store cannot do what was asked; the message names the place and the setting."""


class BlobUnavailable(BlobError):
    """The blob store cannot be reached at all (a folder that cannot be written, an S3 endpoint that
    does not answer, credentials it refuses, a missing bucket)."""


class BlobNotFound(BlobError):
    """No object under this key."""


@dataclass(frozen=True)
class BlobInfo:
    key: str
    size: int
    modified: float  # seconds since the epoch


def document_key(kb_id: str, doc_id: str) -> str:
    """Where an uploaded document's file is kept."""
    return check_key(f"{kb_id}/{doc_id}")


def kb_prefix(kb_id: str) -> str:
    """The prefix of every file of one knowledge base."""
    return check_key(kb_id) + "/"


def check_key(key: str) -> str:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ValueError(f"{key!r} is not a blob key (segments of letters, digits, '.', '_' and '-' "
                         "joined by '/', none starting with '.')")
    return key


def check_prefix(prefix: str) -> str:
    """A listing prefix: empty (everything), or a key, or a key followed by ``/``."""
    if prefix:
        check_key(prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix


class BlobStore(ABC):
    """Files under keys. Thread-safe: a process holds one and every request and task shares it."""

    @property
    @abstractmethod
    def where(self) -> str:
        """The place, for messages and logs: a folder, or an S3 bucket and endpoint."""

    @abstractmethod
    def put(self, key: str, stream: IO[bytes]) -> int:
        """Store everything ``stream.read`` gives under ``key`` (replacing what was there), read
        block by block; returns the number of bytes. Atomic (see the module's docstring): if
        ``stream`` raises, that exception comes out and nothing new is under ``key``."""

    @abstractmethod
    def open(self, key: str) -> BinaryIO:
        """The object under ``key`` as a readable stream (close it, or use ``with``);
        ``BlobNotFound`` when there is none."""

    def read(self, key: str) -> bytes:
        """The whole object under ``key`` (for files known to be small enough)."""
        with self.open(key) as stream:
            return stream.read()

    @abstractmethod
    def size(self, key: str) -> int:
        """The byte size of the object under ``key``; ``BlobNotFound`` when there is none."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the object under ``key``; nothing happens when there is none."""

    @abstractmethod
    def delete_prefix(self, prefix: str) -> int:
        """Remove every object whose key starts with ``prefix`` (``kb_prefix``); returns how many."""

    @abstractmethod
    def list(self, prefix: str = "") -> Iterator[BlobInfo]:
        """The objects whose keys start with ``prefix`` (finished ones only: a partial upload is
        never listed), in no particular order."""

    @abstractmethod
    def clean_partial(self, older_than: float) -> int:
        """Remove what interrupted puts left (a partial file, an unfinished multipart upload) that
        started more than ``older_than`` seconds ago, so a put still running is left alone; returns
        how many were removed."""

    @abstractmethod
    def check(self) -> None:
        """A cheap probe (for readiness checks): returns when the store can be used, raises
        ``BlobUnavailable`` naming the place and the setting when it cannot."""

    def location(self, key: str) -> str:
        """A description of where ``key`` is kept, stored with a document for people to read."""
        return f"{self.where}: {key}"

    def close(self) -> None:  # noqa: B027 (a store with nothing to release keeps this)
        """Release connections."""

    def __enter__(self) -> BlobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["BlobError", "BlobInfo", "BlobNotFound", "BlobStore", "BlobUnavailable", "check_key", "check_prefix",
           "document_key", "kb_prefix"]
