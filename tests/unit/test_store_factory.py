"""The store factory opens engines by their registered name: a third engine registers itself and
needs no edit of kbgraph/store/factory.py, and an unknown name is told which engines there are."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbgraph.config import Settings, load_settings
from kbgraph.store import StoreError, engines, factory, open_store, register_engine
from kbgraph.store.base import SearchRequest, eq
from kbgraph.store.sqlite import SQLiteStore


class JournalStore(SQLiteStore):
    """A third engine for the test: the embedded store under another name."""

    engine = "journal"


@pytest.fixture(autouse=True)
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(factory, "_ENGINES", dict(factory._ENGINES))  # registrations end with the test
    yield


def test_a_registered_engine_is_opened_by_name(tmp_path: Path) -> None:
    register_engine("journal", lambda settings: JournalStore(settings.data_dir / "journal.db"))
    settings = load_settings(data_dir=tmp_path, store="journal")  # the settings accept the name
    store = open_store(settings)
    try:
        assert isinstance(store, JournalStore) and store.engine == "journal"
        store.upsert("t1", "kb1", [{"id": "a", "kind_kwd": "x"}])
        hits = store.search("t1", SearchRequest(kb_ids=["kb1"], where=[eq("kind_kwd", "x")])).hits
        assert [hit.id for hit in hits] == ["a"]
    finally:
        store.close()
    assert (tmp_path / "journal.db").exists()


def test_an_engine_named_as_module_and_attribute_is_imported_when_opened(tmp_path: Path) -> None:
    register_engine("embedded-too", "kbgraph.store.sqlite:SQLiteStore.from_settings")
    store = open_store(Settings(data_dir=tmp_path, store="embedded-too"))
    try:
        assert type(store) is SQLiteStore
    finally:
        store.close()


def test_an_unknown_engine_names_the_registered_ones() -> None:
    register_engine("journal", lambda settings: JournalStore(settings.data_dir / "journal.db"))
    assert {"sqlite", "elasticsearch", "journal"} <= set(engines())
    with pytest.raises(StoreError, match="unknown store engine 'nosuch'") as err:
        open_store(Settings(store="nosuch"))
    assert "elasticsearch, journal, sqlite" in str(err.value)


def test_an_opener_must_be_callable_or_module_and_attribute() -> None:
    with pytest.raises(ValueError):
        register_engine("broken", "kbgraph.store.sqlite")
    with pytest.raises(ValueError):
        register_engine("", "kbgraph.store.sqlite:SQLiteStore.from_settings")
    assert "broken" not in engines()


def test_choosing_sqlite_never_imports_elasticsearch(tmp_path: Path) -> None:
    code = ("import sys\n"
            "from kbgraph.config import load_settings\n"
            "from kbgraph.store import open_store\n"
            f"store = open_store(load_settings(data_dir={str(tmp_path)!r}, store='sqlite'))\n"
            "store.upsert('t1', 'kb1', [{'id': 'a'}])\n"
            "store.close()\n"
            "print('elasticsearch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
