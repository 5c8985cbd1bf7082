"""A knowledge base kept equal to the folders it is indexed from: the files a run names (and the
folders its walk could not enter), the documents whose files are gone from those folders, what a run
would change (a dry run), and the gone documents removed, exactly, with their part of the graph.

A document belongs to a folder when its recorded location (the file's resolved path) lies under that
folder, or is where its name under the folder leads (a folder reached through a symbolic link).
Documents indexed from elsewhere (another folder, a file named on its own, an upload) are never
counted gone, and neither is one below a folder the walk could not enter: its file may be there.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kbgraph.engine.core import EngineCore
from kbgraph.engine.errors import KBGraphError
from kbgraph.meta.schemas import Document, KnowledgeBase
from kbgraph.parse.readers import SUPPORTED_SUFFIXES, Unwalked, walk_folder


@dataclass
class NamedFiles:
    """The files a run names (document name, path), the folders given, and those not entered."""

    files: list[tuple[str, Path]] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)
    unwalked: list[tuple[str, Unwalked]] = field(default_factory=list)  # (name under its folder, why)


@dataclass
class FolderChanges:
    """What indexing these paths would change (``kbgraph index --dry-run``)."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # other content, or not indexed to the end before
    unchanged: list[str] = field(default_factory=list)
    gone: list[Document] = field(default_factory=list)
    unwalked: list[tuple[str, Unwalked]] = field(default_factory=list)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def name_files(paths: Sequence[Path]) -> NamedFiles:
    """Every file the paths name, a folder's by their path under it; what a walk could not enter."""
    named = NamedFiles()
    for given in paths:
        given = Path(given)
        if not given.exists() and not given.is_symlink():
            raise KBGraphError(f"{given} does not exist")
        if given.is_dir():
            # every file, supported or not: one kbgraph cannot read fails with its reason
            # instead of vanishing from the report
            files, unwalked = walk_folder(given, supported_only=False)
            named.files += [(p.relative_to(given).as_posix(), p) for p in files]
            named.unwalked += [(_name_under(u.path, given) + "/", u) for u in unwalked]
            named.folders.append(given)
        else:
            named.files.append((given.name, given))
    return named


def _name_under(path: Path, folder: Path) -> str:
    try:
        return path.relative_to(folder).as_posix()
    except ValueError:
        return str(path)


def _belongs(doc: Document, folder: Path, real_folder: str) -> bool:
    if not doc.location or not os.path.isabs(doc.location):
        return False  # an upload's blob, not a file of a folder
    if doc.location.startswith(real_folder + os.sep):
        return True
    return str((folder / doc.name).resolve()) == doc.location  # reached through a linked folder


class FolderSync(EngineCore):
    """Gone files found and removed; a run's changes listed beforehand (part of ``Engine``)."""

    def gone_documents(self, kb: KnowledgeBase, named: NamedFiles) -> list[Document]:
        """The knowledge base's documents from the folders ``named`` walked whose files are no longer there."""
        if not named.folders:
            return []
        present = {name for name, _ in named.files}
        docs = self.meta.list_documents(kb.id, limit=None)
        gone: dict[str, Document] = {}
        for folder in named.folders:
            real = str(folder.resolve())
            skipped = [u.path for _, u in named.unwalked if folder in u.path.parents]
            for doc in docs:
                if doc.name in present or doc.id in gone or not _belongs(doc, folder, real):
                    continue
                if any(skip == folder / doc.name or skip in (folder / doc.name).parents for skip in skipped):
                    continue  # below a folder the walk could not enter: its file may be there
                gone[doc.id] = doc
        return sorted(gone.values(), key=lambda d: d.name)

    def remove_documents(self, kb: KnowledgeBase, docs: Sequence[Document]) -> int:
        """Delete these documents (their chunks and exactly their part of the graph); the graph's
        knowledge-base phases are left to the refresh that follows. Returns how many were removed."""
        removed = 0
        for doc in docs:
            self.delete_document(kb.name, doc.id, refresh=False)  # type: ignore[attr-defined]
            removed += 1
        return removed

    def folder_changes(self, kb_name: str, paths: Sequence[Path], *, force: bool = False) -> FolderChanges:
        """What ``index_paths`` would do with these paths, without doing any of it: the files it would
        index (new, changed) or skip, the documents whose files are gone, the folders it cannot enter."""
        kb = self.kb(kb_name)
        named = name_files(paths)
        known = {d.name: d for d in self.meta.list_documents(kb.id, limit=None)}
        changes = FolderChanges(gone=self.gone_documents(kb, named), unwalked=named.unwalked)
        for name, path in named.files:
            doc = known.get(name)
            if doc is None:
                changes.new.append(name)
                continue
            try:
                readable = path.suffix.lower() in SUPPORTED_SUFFIXES and path.stat().st_size <= self.settings.max_file_bytes
                digest = file_digest(path) if readable else hashlib.sha256(b"").hexdigest()
            except OSError:
                digest = ""
            if force or doc.status != "done" or doc.content_hash != digest:
                changes.changed.append(name)
            else:
                changes.unchanged.append(name)
        return changes
