"""The local blob store: one folder (``data_dir/uploads`` by default), a file per key.

A put streams into a temporary file beside its final name (``.upload-<random>`` in the same folder,
so the rename never crosses a file system), flushes it to disk, and renames it over the final name:
``os.replace`` is atomic, so a reader sees the old file or the whole new one. A crash leaves at
most a temporary file, which no key names and ``clean_partial`` removes once it is old.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO

from kbgraph.blob.base import BlobInfo, BlobNotFound, BlobStore, BlobUnavailable, check_key, check_prefix

TEMP_PREFIX = ".upload-"
BLOCK = 1 << 20  # bytes read and written at a time: an upload is never held in memory whole


class LocalBlobStore(BlobStore):
    def __init__(self, root: Path) -> None:
        self.root = Path(root).absolute()

    @property
    def where(self) -> str:
        return f"the folder {self.root}"

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*check_key(key).split("/"))

    def location(self, key: str) -> str:
        return str(self._path(key))

    def put(self, key: str, stream: IO[bytes]) -> int:
        final = self._path(key)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BlobUnavailable(f"cannot create {final.parent} ({exc.strerror or exc}): check the folder "
                                  "(settings data_dir, blob_dir)") from exc
        partial = final.parent / f"{TEMP_PREFIX}{uuid.uuid4().hex}"
        size = 0
        try:
            with partial.open("wb") as out:
                while block := stream.read(BLOCK):
                    size += len(block)
                    out.write(block)
                out.flush()
                os.fsync(out.fileno())  # on disk before it has its name: a crash never leaves a torn file
            os.replace(partial, final)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        _sync_folder(final.parent)
        return size

    def open(self, key: str) -> BinaryIO:
        try:
            return self._path(key).open("rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise BlobNotFound(f"no file {key!r} in {self.where}") from None

    def size(self, key: str) -> int:
        path = self._path(key)
        try:
            if path.is_file():
                return path.stat().st_size
        except OSError:
            pass
        raise BlobNotFound(f"no file {key!r} in {self.where}")

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, NotADirectoryError):
            self._path(key).unlink()

    def delete_prefix(self, prefix: str) -> int:
        check_prefix(prefix)
        if prefix.endswith("/"):  # a knowledge base's folder: gone whole, partial uploads too
            folder = self.root.joinpath(*prefix.rstrip("/").split("/"))
            count = sum(1 for _ in self.list(prefix))
            shutil.rmtree(folder, ignore_errors=True)
            return count
        count = 0
        for info in list(self.list(prefix)):
            self.delete(info.key)
            count += 1
        return count

    def _files(self, prefix: str) -> Iterator[tuple[Path, os.stat_result]]:
        """Every regular file under the deepest folder ``prefix`` names, partial uploads included."""
        start = self.root.joinpath(*prefix.split("/")[:-1]) if "/" in prefix else self.root
        for folder, dirs, files in os.walk(start):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                path = Path(folder) / name
                with contextlib.suppress(FileNotFoundError):
                    yield path, path.stat()

    def list(self, prefix: str = "") -> Iterator[BlobInfo]:
        check_prefix(prefix)
        for path, stat in self._files(prefix):
            key = path.relative_to(self.root).as_posix()
            if key.startswith(prefix) and not any(part.startswith(".") for part in key.split("/")):
                yield BlobInfo(key, stat.st_size, stat.st_mtime)

    def clean_partial(self, older_than: float) -> int:
        cutoff = time.time() - older_than
        removed = 0
        for path, stat in self._files(""):
            if path.name.startswith(TEMP_PREFIX) and stat.st_mtime < cutoff:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def check(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BlobUnavailable(f"cannot create {self.root} ({exc.strerror or exc}) (settings data_dir, "
                                  "blob_dir)") from exc
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise BlobUnavailable(f"cannot write to {self.where} (settings data_dir, blob_dir)")


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (the new directory entry), where the platform allows it."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


__all__ = ["TEMP_PREFIX", "LocalBlobStore"]
