"""What every part of the engine stands on: its connections (metadata database, document store),
its tenant, its per-knowledge-base lock, opening and closing, finding a knowledge base by name, and
the ``KBContext`` the indexing steps run with.

The engine's concerns (kbgraph/engine/*.py) are classes over this one, composed into ``Engine``
(kbgraph/engine/engine.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Self

from kbgraph.config import Settings
from kbgraph.engine.errors import KBGraphError, did_you_mean
from kbgraph.engine.models import ModelSelection
from kbgraph.llm.base import ChatModel, Embedder, UsageLedger
from kbgraph.llm.limits import PROCESS_LIMITS, CallLimits
from kbgraph.meta import MetaDB
from kbgraph.meta.schemas import DEFAULT_TENANT, KnowledgeBase
from kbgraph.store import DocStore, open_store

if TYPE_CHECKING:
    # the indexing pipeline is imported by the methods that index: a query never loads it
    from kbgraph.index.context import KBContext

KBLock = Callable[[str], AbstractContextManager]


class _ThreadLocks:
    """One re-entrant lock per knowledge base, for one process."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()

    def __call__(self, kb_id: str) -> AbstractContextManager:
        with self._guard:
            return self._locks.setdefault(kb_id, threading.RLock())


def _load_parts(settings: Settings) -> None:
    from kbgraph.parse.token_count import get_encoding

    get_encoding()
    if settings.llm_configured or settings.embedding_provider == "openai":
        import kbgraph.llm.openai_chat  # noqa: F401  (the openai client package)


def _warm_up(settings: Settings) -> None:
    """Load the tokenizer (~0.1 s) and the model client's package beside whatever the caller does
    first: a document's first model call then goes out without waiting for them."""
    threading.Thread(target=_load_parts, args=(settings,), name="kbgraph-warm-up", daemon=True).start()


def _require_tenant(meta: MetaDB, settings: Settings) -> None:
    known = [t.id for t in meta.list_tenants()]
    if settings.tenant not in known:
        meta.close()
        raise KBGraphError(f"no tenant {settings.tenant!r}{did_you_mean(settings.tenant, known)} in "
                           f"{settings.data_location} (known: {', '.join(known) or 'none'}); a service makes one "
                           "with `kbgraph-web apikey create --tenant T` or `kbgraph-web user create`")


class EngineCore(ModelSelection):
    """Connections, tenant and lock; the knowledge bases by name; the indexing context."""

    def __init__(self, settings: Settings, meta: MetaDB, store: DocStore, tenant: str = DEFAULT_TENANT,
                 kb_lock: KBLock | None = None, embedder: Embedder | None = None,
                 limits: CallLimits = PROCESS_LIMITS) -> None:
        self.settings = settings
        # the chat model's concurrency limits and budgets: this process's, or a deployment's
        # (task_executor passes limits kept in Redis, shared by all its worker processes)
        self.limits = limits
        # serializes merges and KB phases per knowledge base; in-process by default, a Redis lock
        # when several workers share a knowledge base (task_executor passes one)
        self.kb_lock: KBLock = kb_lock or _ThreadLocks()
        self.meta = meta
        self.tenant = tenant
        self._store = store
        # the tenant's index is made on first use of the store, not when the engine opens: what needs
        # only the metadata database (listing knowledge bases and documents, the web app's start)
        # works while the store is down
        self._store_ready = False
        self._embedder: Embedder | None = embedder  # built on first use unless shared by the caller
        self._kb_embedders: dict[str, Embedder] = {}  # knowledge bases indexed with another model
        self._chats: dict[tuple[tuple[tuple[str, str], ...], str], ChatModel | None] = {}
        self.ledger = UsageLedger()

    @property
    def store(self) -> DocStore:
        """The document store, the tenant's index made on first use (a failure is tried again next time)."""
        if not self._store_ready:
            self._store.ensure_index(self.tenant)
            self._store_ready = True
        return self._store

    @property
    def store_handle(self) -> DocStore:
        """The store without touching it (closing, probing)."""
        return self._store

    @classmethod
    def open(cls, settings: Settings, tenant: str | None = None, kb_lock: KBLock | None = None,
             limits: CallLimits = PROCESS_LIMITS) -> Self:
        """An engine acting for ``tenant`` (made if missing); unset, for the ``tenant`` setting, which
        must name a tenant that exists unless it is the default one (a typo makes no empty tenant)."""
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        meta = MetaDB.open(settings.meta_url)
        if tenant is None and settings.tenant != DEFAULT_TENANT:
            _require_tenant(meta, settings)
        tenant = tenant or settings.tenant
        meta.ensure_tenant(tenant)
        store = open_store(settings)  # opens no connection: the first request does
        _warm_up(settings)
        return cls(settings, meta, store, tenant, kb_lock, limits=limits)

    def close(self) -> None:
        self._store.close()
        self.meta.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def location(self) -> str:
        """Where this engine's knowledge bases are: the data folder (or database) and the tenant, for
        the messages that find nothing."""
        where = self.settings.data_location
        return where if self.tenant == DEFAULT_TENANT else f"{where}, tenant {self.tenant!r}"

    def kb(self, name: str) -> KnowledgeBase:
        found = self.meta.get_kb_by_name(self.tenant, name)
        if found is None:
            names = [k.name for k in self.meta.list_kbs(self.tenant)]
            raise KBGraphError(f"no knowledge base named {name!r}{did_you_mean(name, names)} in {self.location} "
                               f"(known: {', '.join(names) or 'none yet'}); create it with `kbgraph kb create {name}`")
        return found

    def list_kbs(self) -> list[KnowledgeBase]:
        return self.meta.list_kbs(self.tenant)

    def context(self, kb: KnowledgeBase) -> KBContext:
        from kbgraph.index.context import KBContext

        embedder = self.embedder_for(kb)
        return KBContext(store=self.store, tenant=self.tenant, kb_id=kb.id, settings=self.settings,
                         embedder=embedder, chat=self.chat_for(kb) if kb.graph.method != "nlp" else None, graph=kb.graph,
                         chunk_tokens=kb.chunk_tokens, chunk_overlap=kb.chunk_overlap, ledger=self.ledger)
