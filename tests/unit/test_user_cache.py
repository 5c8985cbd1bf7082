"""The per-user cache (~/.cache/kbgraph): one entry per content, not per installation, and entries
left unused for a month go away."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from kbgraph.utils import user_cache
from kbgraph.llm.e5 import preparation
from kbgraph.parse import token_table
from kbgraph.parse.token_count import ENCODING_NAME

DAY = 86400


def _install(folder: Path, name: str, data: bytes, age_days: float = 0) -> Path:
    """``data`` as ``folder/name``, last modified ``age_days`` ago (a package installed then)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    stamp = time.time() - age_days * DAY
    os.utime(path, (stamp, stamp))
    return path


def _age(path: Path, days: float) -> None:
    stamp = time.time() - days * DAY
    os.utime(path, (stamp, stamp))


@pytest.fixture
def fake_prepare(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Preparing writes a placeholder graph and records which weights it was asked for."""
    calls: list[Path] = []

    def prepare(weights_path: Path, target: Path) -> None:
        calls.append(weights_path)
        target.mkdir(parents=True, exist_ok=True)
        (target / "encoder.onnx").write_bytes(b"graph of " + weights_path.read_bytes()[:16])

    monkeypatch.setattr(preparation, "prepare", prepare)
    return calls


@pytest.mark.parametrize("size", [4096, 3 * 1024 * 1024])
def test_installations_of_the_same_weights_share_one_prepared_folder(tmp_path: Path, fake_prepare: list[Path],
                                                                    size: int) -> None:
    weights = os.urandom(size)
    first = _install(tmp_path / "venv-a", "e5-small-q4.bin", weights, age_days=3)
    second = _install(tmp_path / "venv-b", "e5-small-q4.bin", weights)  # same file, installed today
    root = tmp_path / "models"
    folder = preparation.prepared_dir(first, root)
    assert preparation.prepared_dir(second, root) == folder
    assert fake_prepare == [first], "the second installation prepared the model again"
    assert [p.name for p in root.iterdir() if not p.name.startswith(".")] == [folder.name]


def test_different_weights_or_format_get_their_own_folder(tmp_path: Path, fake_prepare: list[Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    weights = bytearray(os.urandom(3 * 1024 * 1024))
    root = tmp_path / "models"
    one = preparation.prepared_dir(_install(tmp_path / "a", "e5-small-q4.bin", bytes(weights)), root)
    weights[-1] ^= 0xFF  # e.g. the last tensor of a new release
    two = preparation.prepared_dir(_install(tmp_path / "b", "e5-small-q4.bin", bytes(weights)), root)
    monkeypatch.setattr(preparation, "_FORMAT", preparation._FORMAT + 1)
    three = preparation.prepared_dir(_install(tmp_path / "c", "e5-small-q4.bin", bytes(weights)), root)
    assert len({one, two, three}) == 3 and len(fake_prepare) == 3


def test_prepared_folders_unused_for_a_month_are_removed(tmp_path: Path, fake_prepare: list[Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "models"
    weights = _install(tmp_path / "venv", "e5-small-q4.bin", b"new weights" * 100)
    current_format = preparation._FORMAT
    monkeypatch.setattr(preparation, "_FORMAT", current_format - 1)
    old = preparation.prepared_dir(weights, root)  # what an older kbgraph prepared...
    _age(old, 40)  # ...and last used 40 days ago
    recent = preparation.prepared_dir(_install(tmp_path / "other", "e5-small-q4.bin", b"older release"), root)
    _age(recent, 10)  # another installation's, used ten days ago: still in use
    unrelated = root / "another-model-0123456789abcdef"
    unrelated.mkdir()
    _age(unrelated, 400)
    monkeypatch.setattr(preparation, "_FORMAT", current_format)
    current = preparation.prepared_dir(weights, root)
    assert not old.exists()
    assert recent.exists() and unrelated.exists() and current.exists()
    assert time.time() - current.stat().st_mtime < DAY


def test_using_a_folder_keeps_it(tmp_path: Path, fake_prepare: list[Path]) -> None:
    root = tmp_path / "models"
    weights = _install(tmp_path / "venv", "e5-small-q4.bin", b"weights" * 100)
    folder = preparation.prepared_dir(weights, root)
    _age(folder, 40)
    assert preparation.prepared_dir(weights, root) == folder  # opened again: used today
    assert time.time() - folder.stat().st_mtime < DAY
    assert user_cache.prune_unused(root, "e5-small-q4-", keep=root / "none") == []


def test_token_tables_are_shared_by_content_and_old_ones_removed(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    source = token_table._source_file(ENCODING_NAME)
    assert source is not None
    copies = [tmp_path / f"site-{i}" / source.name for i in range(2)]
    for i, copy in enumerate(copies):
        copy.parent.mkdir()
        shutil.copyfile(source, copy)
        _age(copy, i)
    root = tmp_path / "tokenizers"
    stale = _install(root, f"{ENCODING_NAME}-00000000deadbeef.npz", b"an old format's table", age_days=45)
    fresh = _install(root, f"{ENCODING_NAME}-00000000cafebabe.npz", b"another version's table", age_days=2)
    found = iter(copies)
    monkeypatch.setattr(token_table, "_source_file", lambda name: next(found))
    first = token_table.load_encoding(ENCODING_NAME, root=root)
    second = token_table.load_encoding(ENCODING_NAME, root=root)
    assert first.encode_ordinary("Varrow harbor") == second.encode_ordinary("Varrow harbor")
    tables = sorted(p.name for p in root.glob("*.npz"))
    assert len(tables) == 2 and fresh.name in tables and not stale.exists()


def test_a_read_only_cache_entry_is_still_used(tmp_path: Path, fake_prepare: list[Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "models"
    weights = _install(tmp_path / "venv", "e5-small-q4.bin", b"weights" * 100)
    folder = preparation.prepared_dir(weights, root)

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError("read-only")

    monkeypatch.setattr(user_cache.os, "utime", refuse)
    assert preparation.prepared_dir(weights, root) == folder and len(fake_prepare) == 1
