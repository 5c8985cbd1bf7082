"""The embedded store's in-memory search indexes, kept on disk between processes.

Building a slice's postings or vectors (with its k-means lists) costs seconds on a large knowledge
base: every row is read and tokenized, the centroids trained. A process that built one writes its
arrays here; a new process (a CLI query, a web worker) memory-maps them instead of rebuilding, and
catches up on later writes through the store's change log exactly as an in-memory copy does. A
snapshot is only ever written whole (into a scratch folder, then renamed), names the store
generation it was built at, and replaces older snapshots of the same slice.

Only slices of at least ``PERSIST_MIN_ROWS`` rows are written: smaller ones build in milliseconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Protocol

import numpy as np

PERSIST_MIN_ROWS = 5000
_FORMAT = 1


def strings_array(values: list[str]) -> np.ndarray:
    """A list of strings as one byte array (JSON), to save beside numeric arrays."""
    return np.frombuffer(json.dumps(values, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)


def array_strings(array: np.ndarray) -> list[str]:
    return json.loads(bytes(array).decode("utf-8"))


class Persistable(Protocol):
    """An index that can be written as arrays and memory-mapped back."""

    def to_arrays(self) -> dict[str, np.ndarray]: ...

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Any: ...


class IndexFiles:
    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def for_store(cls, root: Path, store_id: str) -> IndexFiles:
        """The snapshots of the store database with this id, under ``root``; those of databases that
        no longer exist there are removed."""
        if root.is_dir():
            for other in root.iterdir():
                if other.is_dir() and other.name != store_id and not other.name.startswith("."):
                    shutil.rmtree(other, ignore_errors=True)
        return cls(root / store_id)

    def _prefix(self, key: tuple[Any, ...], kind: str) -> str:
        return hashlib.sha1(f"{_FORMAT}|{kind}|{key!r}".encode()).hexdigest()[:20]

    def _snapshots(self, prefix: str) -> list[tuple[int, Path]]:
        if not self.root.is_dir():
            return []
        found = []
        for path in self.root.glob(f"{prefix}-g*"):
            generation = path.name.rsplit("-g", 1)[1]
            if generation.isdigit() and (path / "meta.json").exists():
                found.append((int(generation), path))
        return sorted(found)

    def load(self, key: tuple[Any, ...], cls: type, at_most: int) -> tuple[int, Any] | None:
        """The newest snapshot of ``key`` built at a generation not after ``at_most``, memory-mapped."""
        loaded = self.load_arrays(key, cls.__name__, at_most)
        if loaded is None:
            return None
        try:
            return loaded[0], cls.from_arrays(loaded[1])
        except (ValueError, KeyError):
            return None

    def load_arrays(self, key: tuple[Any, ...], kind: str, at_most: int) -> tuple[int, dict[str, np.ndarray]] | None:
        for generation, path in reversed(self._snapshots(self._prefix(key, kind))):
            if generation > at_most:
                continue
            try:
                names = json.loads((path / "meta.json").read_text())["arrays"]
                # plain ndarray views of the mapped files: a np.memmap's slices are memmaps too, and
                # each costs a Python-level __getitem__ and __array_finalize__ (~5 us; a kg query
                # slices ~650 of them: the probed lists of the vector slices, the postings)
                return generation, {name: np.asarray(np.load(path / f"{name}.npy", mmap_mode="r", allow_pickle=False))
                                    for name in names}
            except (OSError, ValueError, KeyError):
                return None  # half-deleted by a newer writer, or unreadable: build instead
        return None

    def save(self, key: tuple[Any, ...], generation: int, index: Persistable) -> None:
        """Write ``index`` as the snapshot of ``key`` at ``generation``; failures only cost speed."""
        self.save_arrays(key, type(index).__name__, generation, index.to_arrays())

    def save_arrays(self, key: tuple[Any, ...], kind: str, generation: int, arrays: dict[str, np.ndarray]) -> None:
        prefix = self._prefix(key, kind)
        final = self.root / f"{prefix}-g{generation}"
        if final.exists():
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=".write-", dir=self.root))
        except OSError:
            return
        try:
            for name, array in arrays.items():
                np.save(scratch / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
            (scratch / "meta.json").write_text(json.dumps({"key": repr(key), "generation": generation,
                                                            "arrays": sorted(arrays)}))
            os.rename(scratch, final)
        except OSError:
            shutil.rmtree(scratch, ignore_errors=True)
            return
        for older, path in self._snapshots(prefix):
            if older < generation:
                shutil.rmtree(path, ignore_errors=True)

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


__all__ = ["IndexFiles", "PERSIST_MIN_ROWS", "Persistable", "array_strings", "strings_array"]
