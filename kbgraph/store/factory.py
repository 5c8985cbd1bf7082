"""The store factory: document-store engines registered by name, opened from the settings.

``settings.store`` names an engine registered here with ``register_engine``; a third engine
registers itself (``register_engine("name", "package.module:Opener")`` or a callable) and needs no
edit of this module. An engine given as ``"module:attribute"`` is imported only when it is opened,
so choosing the embedded store never imports the ``elasticsearch`` client. The name is checked when
the store is opened (kbgraph.config cannot know which engines are registered).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from kbgraph.config import Settings
from kbgraph.store.base import DocStore, StoreError

# an engine: a callable that opens the store the settings describe
Opener = Callable[[Settings], DocStore]

_ENGINES: dict[str, str | Opener] = {}


def register_engine(name: str, opener: str | Opener) -> None:
    """Make ``store = name`` open the store ``opener`` gives: a callable taking the Settings, or
    ``"module:attribute"`` (dotted attributes allowed) naming one, imported when first opened.
    Registering a name again replaces its engine."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a store engine needs a name, not {name!r}")
    if isinstance(opener, str):
        module, _, attribute = opener.partition(":")
        if not module or not attribute:
            raise ValueError(f"store engine {name!r}: {opener!r} is not 'module:attribute'")
    elif not callable(opener):
        raise ValueError(f"store engine {name!r}: {opener!r} is neither callable nor 'module:attribute'")
    _ENGINES[name] = opener


def engines() -> list[str]:
    """The names of the registered engines."""
    return sorted(_ENGINES)


def open_store(settings: Settings) -> DocStore:
    """The document store the settings select."""
    opener = _ENGINES.get(settings.store)
    if opener is None:
        raise StoreError(f"unknown store engine {settings.store!r}; choose one of {', '.join(engines())}")
    if isinstance(opener, str):
        opener = _imported(opener)
    return opener(settings)


def _imported(target: str) -> Opener:
    module, _, attribute = target.partition(":")
    found: object = importlib.import_module(module)
    for part in attribute.split("."):
        found = getattr(found, part)
    if not callable(found):
        raise StoreError(f"store engine {target!r} is not callable")
    return found  # type: ignore[return-value]


# the built-in engines
register_engine("sqlite", "kbgraph.store.sqlite:SQLiteStore.from_settings")
register_engine("elasticsearch", "kbgraph.store.elastic:ElasticStore.from_settings")
