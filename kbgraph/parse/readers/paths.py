"""The files a list of paths names: folders expanded recursively into their supported files, and
every folder a walk could not enter, with the reason (``walk_folder``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kbgraph.parse.readers.formats import _MIME


@dataclass(frozen=True)
class Unwalked:
    """A folder a walk did not enter, and why (permissions, a symbolic link loop...)."""

    path: Path
    reason: str


def iter_paths(paths: Sequence[Path], *, supported_only: bool = True) -> list[Path]:
    """Expand folders recursively into their files; files named directly are kept as given.

    Inside folders, hidden files and folders are skipped, order is sorted by relative path, and
    (unless ``supported_only`` is False) only files with a supported suffix are returned, so a
    stray image in a folder is not an error while an unsupported file named explicitly still is.
    Folders that cannot be entered are left out here: ``walk_folder`` says which and why.
    """
    result: list[Path] = []
    seen: set[Path] = set()
    for given in paths:
        given = Path(given)
        found = [given] if not given.is_dir() else walk_folder(given, supported_only=supported_only)[0]
        for path in found:
            if path not in seen:
                seen.add(path)
                result.append(path)
    return result


def walk_folder(root: Path, *, supported_only: bool = True) -> tuple[list[Path], list[Unwalked]]:
    """A folder's files (as ``iter_paths`` lists them) and the folders below it the walk could not
    enter. Symbolic links to folders are followed (a linked folder's files are the folder's), once
    each: a link back to a folder the walk is inside is a loop, and a second link to a folder
    walked already would index its files twice; both are reported instead of entered."""
    files: list[Path] = []
    unwalked: list[Unwalked] = []

    def cannot_enter(error: OSError) -> None:
        where = Path(error.filename) if error.filename else root
        unwalked.append(Unwalked(where, f"cannot enter the folder ({error.strerror or error})"))

    visited: dict[tuple[int, int], Path] = {}
    try:
        top = root.stat()
        visited[(top.st_dev, top.st_ino)] = root
    except OSError as exc:
        cannot_enter(exc)
    for folder, dirs, names in os.walk(root, onerror=cannot_enter, followlinks=True):
        dirs[:] = [d for d in sorted(dirs) if not d.startswith(".")
                   and _enter_once(Path(folder) / d, visited, unwalked)]
        for file_name in names:
            if file_name.startswith("."):
                continue
            if supported_only and Path(file_name).suffix.lower() not in _MIME:
                continue
            files.append(Path(folder) / file_name)
    unwalked.sort(key=lambda u: str(u.path))
    return sorted(files, key=lambda p: p.relative_to(root).parts), unwalked


def _enter_once(path: Path, visited: dict[tuple[int, int], Path], unwalked: list[Unwalked]) -> bool:
    """Whether the walk should enter this folder: not when it is (through links) one walked already."""
    try:
        stat = path.stat()
    except OSError as exc:
        unwalked.append(Unwalked(path, f"cannot enter the folder ({exc.strerror or exc})"))
        return False
    key = (stat.st_dev, stat.st_ino)
    first = visited.get(key)
    if first is None:
        visited[key] = path
        return True
    inside = first in path.parents  # the walk is in that folder now: entering it again never ends
    reason = (f"a symbolic link loop: it leads back to {first}" if inside
              else f"a second link to {first}, whose files are indexed under that name")
    unwalked.append(Unwalked(path, reason))
    return False
