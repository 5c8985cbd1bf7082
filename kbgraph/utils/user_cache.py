"""Files kbgraph prepares once per user and keeps in ``~/.cache/kbgraph`` (``XDG_CACHE_HOME``).

An entry is named by what it was made from: the source file's contents and the format of what was
made, never the source's path or modification time. Every installation of the same package
(another virtualenv, a reinstall, a fresh clone's first run) then finds the entry the first one
made instead of adding its own; keyed by path and mtime, a machine that had seen many installs
held dozens of identical copies (40 MB each for the embedding model).

An entry is touched each time a process uses it. Entries of the same kind left unused for
``UNUSED_DAYS`` (an old format, weights of an older package) are removed when a process opens a
current one: a process of an old version still at work keeps its own entry fresh, and an entry
removed by mistake is only made again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

UNUSED_DAYS = 30

# bytes hashed from each end of a large source: a different file of the same size and name
# differs there too (a header, the last tensors), and hashing all 70 MB would cost ~0.3 s a process
_END_BYTES = 1 << 20


def cache_dir(kind: str) -> Path:
    """``~/.cache/kbgraph/<kind>``, under ``XDG_CACHE_HOME`` when it is set."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kbgraph" / kind


def content_key(source: Path, *made_with: object) -> str:
    """16 hex digits naming what is made from ``source`` with ``made_with`` (a format number, a
    library version): its size and contents (the whole file, or its first and last megabyte)."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(repr(made_with).encode())
    size = source.stat().st_size
    digest.update(str(size).encode())
    with open(source, "rb") as handle:
        if size <= 2 * _END_BYTES:
            digest.update(handle.read())
        else:
            digest.update(handle.read(_END_BYTES))
            handle.seek(-_END_BYTES, os.SEEK_END)
            digest.update(handle.read(_END_BYTES))
    return digest.hexdigest()


def mark_used(entry: Path) -> None:
    """Record that ``entry`` (a file or folder) was used now."""
    try:
        os.utime(entry)
    except OSError:
        pass  # a read-only cache: the entry may be pruned sooner, never lost while in use


def prune_unused(folder: Path, prefix: str, keep: Path, days: float = UNUSED_DAYS) -> list[Path]:
    """Remove the entries of ``folder`` named ``prefix``... other than ``keep`` that no process has
    used for ``days``; returns those removed. Temporary entries (a leading dot) are left alone."""
    cutoff = time.time() - days * 86400
    removed: list[Path] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if entry.name == keep.name or not entry.name.startswith(prefix):
            continue
        try:
            if entry.stat().st_mtime >= cutoff:
                continue
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError:
            continue  # another process removed it first, or may not: it stays for the next one
        removed.append(entry)
    return removed
