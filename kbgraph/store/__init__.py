"""Storage behind one interface: ``DocStore`` (base.py), built here from Settings."""

from __future__ import annotations

from kbgraph.config import Settings
from kbgraph.store.base import DocStore, StoreError, StoreUnavailable


def open_store(settings: Settings) -> DocStore:
    """The document store the settings select. Engines are imported only when chosen."""
    if settings.store == "sqlite":
        from kbgraph.store.sqlite import SQLiteStore

        return SQLiteStore(settings.sqlite_store_path, connections=settings.store_connections)
    if settings.store == "elasticsearch":
        from kbgraph.store.elastic import ElasticStore

        return ElasticStore.from_settings(settings)
    raise StoreError(f"unknown store engine {settings.store!r}")


__all__ = ["DocStore", "StoreError", "StoreUnavailable", "open_store"]
