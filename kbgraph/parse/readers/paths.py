"""The files a list of paths names: folders expanded recursively into their supported files."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kbgraph.parse.readers.formats import _MIME


def iter_paths(paths: Sequence[Path], *, supported_only: bool = True) -> list[Path]:
    """Expand folders recursively into their files; files named directly are kept as given.

    Inside folders, hidden files and folders are skipped, order is sorted by relative path, and
    (unless ``supported_only`` is False) only files with a supported suffix are returned, so a
    stray image in a folder is not an error while an unsupported file named explicitly still is.
    """
    result: list[Path] = []
    seen: set[Path] = set()
    for given in paths:
        given = Path(given)
        found = [given] if not given.is_dir() else _walk(given, supported_only)
        for path in found:
            if path not in seen:
                seen.add(path)
                result.append(path)
    return result


def _walk(root: Path, supported_only: bool) -> list[Path]:
    files: list[Path] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for file_name in names:
            if file_name.startswith("."):
                continue
            if supported_only and Path(file_name).suffix.lower() not in _MIME:
                continue
            files.append(Path(folder) / file_name)
    return sorted(files, key=lambda p: p.relative_to(root).parts)
