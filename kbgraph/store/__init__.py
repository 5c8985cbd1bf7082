"""Storage behind one interface: ``DocStore`` (base.py), opened from Settings by the engine the
settings name (factory.py: engines registered by name; sqlite/ and elastic/ are built in)."""

from __future__ import annotations

from kbgraph.store.base import DocStore, StoreError, StoreUnavailable
from kbgraph.store.factory import engines, open_store, register_engine

__all__ = ["DocStore", "StoreError", "StoreUnavailable", "engines", "open_store", "register_engine"]
