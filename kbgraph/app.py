"""The embedded engine: metadata DB + document store + models, and the operations users run.

The CLI, the Celery tasks and the web app all drive kbgraph through this class, so that a
knowledge base behaves the same whichever way it is used. It holds no state of its own beyond
open connections and lazily built models.
"""

from __future__ import annotations

import difflib
import dataclasses
import hashlib
import io
import threading
import time
from contextlib import AbstractContextManager
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Literal

from kbgraph.config import Settings
from kbgraph.llm.base import CancelCheck, ChatModel, Embedder, UsageLedger
from kbgraph.llm.limits import PROCESS_LIMITS, CallLimits
from kbgraph.meta import MAX_CHUNK_TOKENS, DocumentFile, MetaDB, NotFound
from kbgraph.meta.schemas import DEFAULT_TENANT, Document, GraphConfig, KnowledgeBase, MetaError
from kbgraph.parse.readers import SUPPORTED_SUFFIXES, iter_paths
from kbgraph.utils.progress import Progress, ProgressFn, never, no_progress
from kbgraph.store import DocStore, open_store

if TYPE_CHECKING:
    # the indexing pipeline is imported by the methods that index: a query never loads it
    from kbgraph import pipeline
    from kbgraph.indexing import DocOutcome, DocumentInput, RunEstimate
    from kbgraph.pipeline import KBContext
    from kbgraph.chat import Dialog
    from kbgraph.chunk_edit import ChunkChange, ChunkPage, ChunkRecord
    from kbgraph.search.retrieve import RetrievalResult


def _reader(path: Path, readable: bool, within_limit: bool) -> Callable[[], bytes | None]:
    """A file's bytes when the run gets to it: b"" for a type kbgraph cannot read (it then fails with
    that reason), None over the size limit."""
    def read() -> bytes | None:
        if not within_limit:
            return None
        return path.read_bytes() if readable else b""

    return read


def _binary_opener(path: Path) -> Callable[[], BinaryIO]:
    return lambda: path.open("rb")


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class KBGraphError(RuntimeError):
    """An operation cannot be done as asked; the message tells the user what to change."""


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """' (did you mean 'X' or 'Y'?)' for the known names closest to a misspelled one, else ''."""
    by_fold = {k.casefold(): k for k in known}
    close = difflib.get_close_matches(name.casefold(), list(by_fold), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(by_fold[c]) for c in close) + "?)"


GraphAction = Literal["none", "build", "remove", "rebuild", "refresh"]
# the settings that decide what extraction wrote; changing one makes the stored mentions outdated
_EXTRACTION_SETTINGS = ("method", "entity_types", "max_gleanings")


@dataclass(frozen=True)
class GraphChange:
    """What a change of a knowledge base's graph settings did, and what is left to do.

    ``action``: "build" (graph switched on: extract the documents, ``Engine.build_graph``), "remove"
    (switched off: the graph is already gone), "rebuild" (extraction settings changed: the stored
    graph stays until ``Engine.build_graph(rebuild=True)``), "refresh" (community or resolution
    settings changed: ``Engine.refresh_graph``), "none". ``documents``: how many it concerns.
    """

    kb: KnowledgeBase
    before: GraphConfig
    action: GraphAction
    documents: int = 0

    def describe(self) -> str:
        name, n = self.kb.name, self.documents
        docs = f"{n} document{'s' if n != 1 else ''}"
        if self.action == "build":
            return f"graph switched on ({self.kb.graph.method}); {docs} to extract"
        if self.action == "remove":
            return f"graph switched off; the graph of {name!r} was removed (its chunks stay)"
        if self.action == "rebuild":
            changed = ", ".join(f for f in _EXTRACTION_SETTINGS
                                if getattr(self.before, f) != getattr(self.kb.graph, f))
            return (f"extraction settings changed ({changed}): the graph of {docs} will be extracted again "
                    f"with them by `kbgraph graph refresh --kb {name} --rebuild`; until then the graph stays as it was")
        if self.action == "refresh":
            return "community/resolution settings changed; the graph's communities and reports are recomputed"
        if self.before != self.kb.graph:
            return "graph settings saved; the graph is off, and they apply once it is switched on"
        return "graph settings unchanged"


@dataclass
class IndexReport:
    documents: list[DocOutcome] = field(default_factory=list)
    refresh: pipeline.RefreshResult | None = None
    ledger: UsageLedger = field(default_factory=UsageLedger)

    def count(self, status: str) -> int:
        return sum(1 for d in self.documents if d.status == status)


KBLock = Callable[[str], AbstractContextManager]
# kept in KnowledgeBase.extra while the stored graph was extracted with settings since changed
_REBUILD_MARK = "graph_rebuild_pending"


def _without_rebuild_mark(extra: dict) -> dict:
    return {k: v for k, v in extra.items() if k != _REBUILD_MARK}


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


class Engine:
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
        self.store = store
        self.tenant = tenant
        self._embedder: Embedder | None = embedder  # built on first use unless shared by the caller
        self._kb_embedders: dict[str, Embedder] = {}  # knowledge bases indexed with another model
        self._chats: dict[tuple[tuple[tuple[str, str], ...], str], ChatModel | None] = {}
        self.ledger = UsageLedger()

    @classmethod
    def open(cls, settings: Settings, tenant: str = DEFAULT_TENANT, kb_lock: KBLock | None = None,
             limits: CallLimits = PROCESS_LIMITS) -> "Engine":
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        meta = MetaDB.open(settings.meta_url)
        meta.ensure_tenant(tenant)
        store = open_store(settings)
        store.ensure_index(tenant)
        _warm_up(settings)
        return cls(settings, meta, store, tenant, kb_lock, limits=limits)

    def close(self) -> None:
        self.store.close()
        self.meta.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- models -------------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from kbgraph.llm.factory import build_embedder

            self._embedder = build_embedder(self.settings, ledger=self.ledger)
        return self._embedder

    def embedder_for(self, kb: KnowledgeBase) -> Embedder:
        """The model a knowledge base was indexed with: it keeps its model when the configured one
        changes, until ``reembed_kb`` moves it to the configured one."""
        model = kb.embedding_model
        if not model or model == self.embedder.model_name:
            return self.embedder
        if model not in self._kb_embedders:
            from kbgraph.llm.base import LLMNotConfigured
            from kbgraph.llm.factory import build_embedder_for

            try:
                self._kb_embedders[model] = build_embedder_for(self.settings, model, ledger=self.ledger)
            except LLMNotConfigured as exc:
                raise KBGraphError(
                    f"knowledge base {kb.name!r} was indexed with embedding model {model!r}, which cannot run "
                    f"here ({exc}); re-embed it with the configured model {self.embedder.model_name!r}: "
                    f"`kbgraph kb reembed {kb.name}`") from None
        return self._kb_embedders[model]

    @property
    def chat(self) -> ChatModel | None:
        """The configured chat model (None without an LLM)."""
        return self.chat_for(None)

    def chat_for(self, kb: KnowledgeBase | None, model: str = "") -> ChatModel | None:
        """The chat model for a knowledge base: the engine's, with the KB's own LLM settings on top;
        ``model`` names another model of the same endpoint (a chat assistant's own choice)."""
        wanted = dict(kb.extra.get("llm") or {}) if kb is not None else {}
        if model and self.settings.llm_configured and model != wanted.get("llm_model", self.settings.llm_model):
            wanted["llm_model"] = model
        overrides = tuple(sorted(wanted.items()))
        key = (overrides, kb.id if kb is not None else "")
        if key not in self._chats:
            from kbgraph.llm.factory import build_chat

            # a knowledge base's chat has its own concurrency limit inside the process-wide one
            self._chats[key] = build_chat(self.settings.replace(**dict(overrides)), ledger=self.ledger, kb_id=key[1],
                                          limits=self.limits)
        return self._chats[key]

    # -- knowledge bases ----------------------------------------------------------------------

    def create_kb(self, name: str, *, graph: GraphConfig | None = None, description: str = "",
                  chunk_tokens: int | None = None, chunk_overlap: int | None = None,
                  llm: dict[str, str] | None = None) -> KnowledgeBase:
        """Create a knowledge base. ``llm`` overrides the chat settings for it (llm_model, llm_base_url,
        llm_api_key, llm_temperature...), e.g. a cheaper model for extraction."""
        graph = graph or GraphConfig()
        llm = {k: v for k, v in (llm or {}).items() if v not in (None, "")}
        unknown = sorted(k for k in llm if not k.startswith("llm_") or not hasattr(self.settings, k))
        if unknown:
            raise KBGraphError(f"unknown LLM setting(s) for a knowledge base: {', '.join(unknown)}")
        self._check_graph_llm(graph, llm)
        return self.meta.create_kb(
            self.tenant, name, description=description, embedding_model=self.embedder.model_name,
            chunk_tokens=chunk_tokens or self.settings.chunk_tokens,
            chunk_overlap=chunk_overlap if chunk_overlap is not None else self.settings.chunk_overlap, graph=graph,
            extra={"llm": llm} if llm else None)

    def _check_graph_llm(self, graph: GraphConfig, llm: dict[str, str]) -> None:
        if graph.enabled and graph.method != "nlp" and not self.settings.replace(**llm).llm_configured:
            raise KBGraphError(
                f"graph method {graph.method!r} needs a chat model: set KBGRAPH_LLM_BASE_URL and KBGRAPH_LLM_MODEL "
                "(and KBGRAPH_LLM_API_KEY), or use --graph nlp, which needs no LLM")

    def set_graph(self, kb_name: str, graph: GraphConfig) -> GraphChange:
        """Store new graph settings for a knowledge base and say what that leaves to do.

        Switching the graph off removes it at once. Everything else that costs extraction or LLM
        calls is left to the caller (see GraphChange.action), which can show progress or queue it.
        """
        from kbgraph import pipeline
        kb = self.kb(kb_name)
        before = kb.graph
        self._check_graph_llm(graph, kb.extra.get("llm") or {})
        if graph == before:
            return GraphChange(kb, before, "none")
        extracted = [d for d in self.meta.list_documents(kb.id, limit=None) if d.extracted]
        if not graph.enabled:
            with self.kb_lock(kb.id):
                if before.enabled or extracted:
                    pipeline.drop_graph(self.context(kb))
                for doc in extracted:
                    self.meta.set_document_graph_state(doc.id, extracted=False)
                kb = self.meta.update_kb(self.tenant, kb.id, graph=graph, extra=_without_rebuild_mark(kb.extra))
            return GraphChange(kb, before, "remove" if before.enabled else "none", len(extracted))
        if not before.enabled:
            kb = self.meta.update_kb(self.tenant, kb.id, graph=graph)
            return GraphChange(kb, before, "build", self.meta.count_documents(kb.id, "done"))
        if any(getattr(before, f) != getattr(graph, f) for f in _EXTRACTION_SETTINGS):
            kb = self.meta.update_kb(self.tenant, kb.id, graph=graph, extra={**kb.extra, _REBUILD_MARK: True})
            return GraphChange(kb, before, "rebuild", len(extracted))
        kb = self.meta.update_kb(self.tenant, kb.id, graph=graph)
        return GraphChange(kb, before, "refresh", len(extracted))

    def build_graph(self, kb_name: str, *, rebuild: bool = False, progress: ProgressFn = no_progress,
                    cancel: CancelCheck = never) -> IndexReport:
        """Extract the graph of every indexed document that lacks one (all of them when ``rebuild``,
        with the current extraction settings), then refresh the knowledge base's graph."""
        from kbgraph import pipeline
        from kbgraph.indexing import DocumentInput, IndexRun
        kb = self.kb(kb_name)
        if not kb.graph.enabled:
            raise KBGraphError(f"knowledge base {kb_name!r} has no knowledge graph; switch it on with "
                               f"`kbgraph kb set {kb_name} --graph nlp`")
        todo = [d for d in self.meta.list_documents(kb.id, limit=None)
                if d.status == "done" and (rebuild or not d.extracted)]
        report = IndexReport(ledger=self.ledger)
        # the same bounded pipeline as indexing: the chunks of many documents extracted at once,
        # merged together; summaries wait for the refresh's summary pass
        run = IndexRun(self.context(kb), self.meta, kb, self.kb_lock, progress=progress, cancel=cancel)
        report.documents = run.run((DocumentInput.parsed(d) for d in todo), total=len(todo))
        progress(Progress("documents", len(todo), len(todo)))
        if report.count("cancelled"):
            return report
        with self.kb_lock(kb.id):
            report.refresh = pipeline.refresh_kb(self.context(kb), progress=progress, cancel=cancel)
            if rebuild and _REBUILD_MARK in kb.extra:
                self.meta.update_kb(self.tenant, kb.id, extra=_without_rebuild_mark(kb.extra))
        return report

    def clear_graph_for_rebuild(self, kb_name: str) -> KnowledgeBase:
        """Drop the stored graph and mark every document unextracted, so that a whole-KB build (the
        worker's, which extracts the documents not in the graph) extracts them all again with the
        current settings; for callers that queue the build instead of calling ``build_graph``."""
        from kbgraph import pipeline
        kb = self.kb(kb_name)
        with self.kb_lock(kb.id):
            pipeline.drop_graph(self.context(kb))
            for doc in self.meta.list_documents(kb.id, limit=None):
                if doc.extracted or doc.graph_version:
                    self.meta.set_document_graph_state(doc.id, extracted=False, graph_version=0)
            return self.meta.update_kb(self.tenant, kb.id, extra=_without_rebuild_mark(kb.extra))

    def graph_needs_rebuild(self, kb: KnowledgeBase) -> bool:
        """Whether the extraction settings changed since the stored graph was extracted."""
        return bool(kb.extra.get(_REBUILD_MARK))

    def kb(self, name: str) -> KnowledgeBase:
        found = self.meta.get_kb_by_name(self.tenant, name)
        if found is None:
            names = [k.name for k in self.meta.list_kbs(self.tenant)]
            raise KBGraphError(f"no knowledge base named {name!r}{did_you_mean(name, names)} "
                               f"(known: {', '.join(names) or 'none yet'}); create it with `kbgraph kb create {name}`")
        return found

    def list_kbs(self) -> list[KnowledgeBase]:
        return self.meta.list_kbs(self.tenant)

    def reembed_kb(self, name: str, *, progress: ProgressFn = no_progress) -> int:
        """Move a knowledge base to the configured embedding model: every vector is recomputed from
        the text it was made of (nothing is re-parsed or re-extracted). Returns the rows changed."""
        from kbgraph.reembed import reembed_rows

        kb = self.kb(name)
        embedder = self.embedder
        with self.kb_lock(kb.id):
            changed = reembed_rows(self.store, self.tenant, kb.id, embedder,
                                   lambda phase, done, total: progress(Progress(f"reembed {phase}", done, total)),
                                   relations_from_chunks=self.settings.relation_vectors_from_chunks,
                                   entities_from_chunk=self.settings.entity_vectors_from_chunk)
            self.meta.update_kb(self.tenant, kb.id, embedding_model=embedder.model_name)
        return changed

    def delete_kb(self, name: str) -> None:
        kb = self.kb(name)
        self.store.delete(self.tenant, [kb.id])
        self.meta.delete_kb(self.tenant, kb.id)

    def context(self, kb: KnowledgeBase) -> KBContext:
        from kbgraph.pipeline import KBContext
        embedder = self.embedder_for(kb)
        return KBContext(store=self.store, tenant=self.tenant, kb_id=kb.id, settings=self.settings,
                         embedder=embedder, chat=self.chat_for(kb) if kb.graph.method != "nlp" else None, graph=kb.graph,
                         chunk_tokens=kb.chunk_tokens, chunk_overlap=kb.chunk_overlap, ledger=self.ledger)

    # -- documents ----------------------------------------------------------------------------

    def index_paths(self, kb_name: str, paths: Sequence[Path], *, progress: ProgressFn = no_progress,
                    cancel: CancelCheck = never, force: bool = False, refresh: bool = True) -> IndexReport:
        """Index files and folders into a KB; unchanged files are skipped unless ``force``.

        The documents go through one IndexRun (kbgraph.indexing): many of them parsed, extracted
        and merged at once. Then the graph's KB phases are refreshed once, with their own progress.
        """
        from kbgraph import pipeline
        from kbgraph.indexing import DocOutcome, DocumentInput, IndexRun
        kb = self.kb(kb_name)
        report = IndexReport(ledger=self.ledger)
        files = self._named_files(paths)
        settled: dict[str, DocOutcome] = {}  # files with nothing to run: unchanged, or unreadable
        names: list[str] = []

        def inputs() -> Iterator[DocumentInput]:
            batch = max(1, self.settings.index_batch_documents)
            for start in range(0, len(files), batch):
                for (name, _), item in zip(files[start:start + batch],
                                           self._register_files(kb, files[start:start + batch], force)):
                    names.append(name)
                    if isinstance(item, DocOutcome):
                        settled[name] = item
                    else:
                        yield item

        progress(Progress("documents", 0, len(files)))
        # summaries wait for the refresh's summary pass only when a refresh follows the run
        ctx = self.context(kb) if refresh else replace(self.context(kb), defer_summaries=False)
        run = IndexRun(ctx, self.meta, kb, self.kb_lock, progress=progress, cancel=cancel,
                       chunking=self._document_chunking)
        indexed = {o.name: o for o in run.run(inputs(), total=len(files))}
        report.documents = [settled.get(n) or indexed[n] for n in names if n in settled or n in indexed]
        progress(Progress("documents", len(files), len(files)))
        if refresh and kb.graph.enabled and report.count("indexed"):
            with self.kb_lock(kb.id):
                report.refresh = pipeline.refresh_kb(self.context(kb), progress=progress, cancel=cancel)
            self._fail_unsummarized(report)
        return report

    def estimate_index(self, kb_name: str, paths: Sequence[Path]) -> RunEstimate:
        """What indexing these files would roughly cost (chunks, LLM calls, seconds), from the sizes of
        those not indexed yet with the same size."""
        from kbgraph.indexing import estimate_run

        kb = self.kb(kb_name)
        # a file indexed already with the same size is most likely unchanged (the run compares digests)
        indexed = {d.name: d.size for d in self.meta.list_documents(kb.id, limit=None) if d.status == "done"}
        sizes = []
        for name, path in self._named_files(paths):
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if indexed.get(name) != size:
                sizes.append(size)
        return estimate_run(self.context(kb), sizes)

    def _fail_unsummarized(self, report: IndexReport) -> None:
        """Documents of this run whose descriptions the model could not summarize end failed (the
        descriptions keep their stand-ins), so that the next run indexes them again."""
        failures = report.refresh.summary_failures if report.refresh is not None else {}
        for number, outcome in enumerate(report.documents):
            error = failures.get(outcome.doc_id)
            if outcome.status == "indexed" and error:
                self.meta.set_document_status(outcome.doc_id, "failed", message=f"{outcome.message}; {error}",
                                              error=error)
                report.documents[number] = dataclasses.replace(outcome, status="failed", message=error)

    @staticmethod
    def _named_files(paths: Sequence[Path]) -> list[tuple[str, Path]]:
        named: list[tuple[str, Path]] = []
        for given in paths:
            given = Path(given)
            if not given.exists():
                raise KBGraphError(f"{given} does not exist")
            if given.is_dir():
                # every file, supported or not: one kbgraph cannot read fails with its reason
                # instead of vanishing from the report
                named += [(p.relative_to(given).as_posix(), p) for p in iter_paths([given], supported_only=False)]
            else:
                named.append((given.name, given))
        return named

    def _register_files(self, kb: KnowledgeBase, files: Sequence[tuple[str, Path]],
                        force: bool) -> list[DocumentInput | DocOutcome]:
        """The files' document rows, registered or updated in one transaction; an outcome for each
        file with nothing to run (unchanged, or unreadable)."""
        from kbgraph.indexing import DocOutcome, DocumentInput
        limit = self.settings.max_file_bytes
        out: list[DocumentInput | DocOutcome | None] = [None] * len(files)
        found: list[tuple[int, DocumentFile, bool]] = []
        for number, (name, path) in enumerate(files):
            # an unreadable file is registered unread, to fail with its reason (type, size,
            # permissions, a dangling link)
            try:
                size = path.stat().st_size
                readable = path.suffix.lower() in SUPPORTED_SUFFIXES and size <= limit
                digest = _file_digest(path) if readable else hashlib.sha256(b"").hexdigest()
            except OSError as exc:
                doc, _ = self.meta.upsert_document(kb.id, name, location=str(path.absolute()))
                reason = f"{name}: cannot read the file ({exc.strerror or exc})"
                self.meta.set_document_status(doc.id, "failed", message="could not be read", error=reason)
                out[number] = DocOutcome(name, "failed", doc.id, 0, reason)
                continue
            found.append((number, DocumentFile(name, str(path.resolve()), size, digest), readable))
        registered = self.meta.upsert_documents(kb.id, [f for _, f, _ in found])
        for (number, file, readable), (doc, changed) in zip(found, registered):
            if not changed and not force:
                out[number] = DocOutcome(file.name, "skipped", doc.id, doc.chunk_count, "unchanged")
            else:
                within = readable and file.size <= limit
                out[number] = DocumentInput(doc, _reader(Path(file.location), readable, file.size <= limit), file.size,
                                            open=_binary_opener(Path(file.location)) if within else None)
        return [o for o in out if o is not None]

    def _tracked(self, doc_id: str, outer: ProgressFn) -> ProgressFn:
        """A progress callback that also records the document's progress (at most twice a second)."""
        spans = {"parse": (0.0, 0.3), "extract": (0.3, 0.9), "merge": (0.9, 0.99)}
        last = {"at": 0.0, "phase": ""}

        def report(event: Progress) -> None:
            outer(event)
            if event.phase not in spans or not event.total:
                return
            now = time.monotonic()
            if event.phase == last["phase"] and now - last["at"] < 0.5 and event.done < event.total:
                return
            low, high = spans[event.phase]
            last.update(at=now, phase=event.phase)
            self.meta.set_document_status(doc_id, "running", progress=low + (high - low) * event.done / event.total,
                                          message=f"{event.phase} {event.done}/{event.total}"
                                          + (f", {event.llm_calls} LLM calls, {event.tokens} tokens"
                                             if event.llm_calls else ""))

        return report

    def index_bytes(self, kb: KnowledgeBase, doc: Document, data: bytes | None, size: int, *,
                    progress: ProgressFn = no_progress, cancel: CancelCheck = never) -> DocOutcome:
        """Run the pipeline for one registered document; failures are recorded on the document."""
        from kbgraph.indexing import DocumentInput, IndexRun
        ctx = replace(self.context(kb), defer_summaries=False)  # its graph is final when it is done
        run = IndexRun(ctx, self.meta, kb, self.kb_lock, cancel=cancel, document_progress=self._tracked(doc.id, progress),
                       chunking=self._document_chunking)
        opener = (lambda: io.BytesIO(data)) if data is not None else None
        outcomes = run.run([DocumentInput(doc, lambda: data, size, open=opener)], total=1)
        if doc.id in run.vanished:
            raise NotFound(f"document {doc.id!r} was deleted while it was indexed")
        return outcomes[0]

    @staticmethod
    def _document_chunking(ctx: KBContext, doc: Document) -> KBContext:
        """A document's own chunk size (its ``parser_config.chunk_token_num``, set through the REST API)
        over the knowledge base's."""
        own = (doc.extra.get("parser_config") or {}).get("chunk_token_num")
        if isinstance(own, bool) or not isinstance(own, int) or not 1 <= own <= MAX_CHUNK_TOKENS \
                or own == ctx.chunk_tokens:
            return ctx
        return dataclasses.replace(ctx, chunk_tokens=own, chunk_overlap=min(ctx.chunk_overlap, own // 8))

    def list_documents(self, kb_name: str) -> list[Document]:
        return self.meta.list_documents(self.kb(kb_name).id, limit=None)

    def document(self, kb: KnowledgeBase, name_or_id: str) -> Document:
        doc = self.meta.find_document(kb.id, name_or_id)
        if doc is None:
            names = [d.name for d in self.meta.list_documents(kb.id, limit=None)]
            raise KBGraphError(f"no document {name_or_id!r} in knowledge base {kb.name!r}{did_you_mean(name_or_id, names)}")
        return doc

    def delete_document(self, kb_name: str, name_or_id: str, *, refresh: bool = True) -> pipeline.DeriveResult:
        from kbgraph import pipeline
        kb = self.kb(kb_name)
        doc = self.document(kb, name_or_id)
        ctx = self.context(kb)
        with self.kb_lock(kb.id):
            change = pipeline.delete_document(ctx, doc.id)
            self.meta.delete_document(kb.id, doc.id)
            if refresh and kb.graph.enabled and change.changed:
                pipeline.refresh_kb(ctx)
        return change

    def refresh_graph(self, kb_name: str, *, force: bool = False,
                      progress: ProgressFn = no_progress) -> pipeline.RefreshResult:
        from kbgraph import pipeline
        kb = self.kb(kb_name)
        if not kb.graph.enabled:
            raise KBGraphError(f"knowledge base {kb_name!r} has no knowledge graph; switch it on with "
                               f"`kbgraph kb set {kb_name} --graph nlp`")
        with self.kb_lock(kb.id):
            return pipeline.refresh_kb(self.context(kb), force=force, progress=progress)

    # -- chunks edited by hand ----------------------------------------------------------------

    def chunk_page(self, kb: KnowledgeBase, doc_id: str, *, keywords: str = "", offset: int = 0,
                   limit: int | None = 30) -> "ChunkPage":
        from kbgraph.chunk_edit import list_chunks

        return list_chunks(self.context(kb), doc_id, keywords=keywords, offset=offset, limit=limit)

    def get_chunk(self, kb: KnowledgeBase, chunk_id: str) -> "ChunkRecord | None":
        from kbgraph.chunk_edit import get_chunk

        return get_chunk(self.context(kb), chunk_id)

    def find_chunk(self, chunk_id: str) -> "ChunkRecord | None":
        """The tenant's chunk with this id, in whichever of its knowledge bases it is."""
        from kbgraph.chunk_edit import find_chunk

        return find_chunk(self.store, self.tenant, [kb.id for kb in self.list_kbs()], chunk_id)

    def add_chunk(self, kb: KnowledgeBase, doc: Document, content: str, *, important_keywords: Sequence[str] = (),
                  questions: Sequence[str] = ()) -> "ChunkChange":
        """Add a chunk to a document: searchable at once, and in the graph when the KB has one."""
        from kbgraph.chunk_edit import add_chunk

        change = add_chunk(self.context(kb), doc.id, doc.name, content, important_keywords=important_keywords,
                           questions=questions, lock=lambda: self.kb_lock(kb.id))
        self.meta.add_document_counts(kb.id, doc.id, chunks=change.chunks_delta, tokens=change.tokens_delta)
        return change

    def update_chunk(self, kb: KnowledgeBase, chunk: "ChunkRecord", *, content: str | None = None,
                     important_keywords: Sequence[str] | None = None, questions: Sequence[str] | None = None,
                     available: bool | None = None) -> "ChunkChange":
        from kbgraph.chunk_edit import update_chunk

        change = update_chunk(self.context(kb), chunk, content=content, important_keywords=important_keywords,
                              questions=questions, available=available, lock=lambda: self.kb_lock(kb.id))
        self.meta.add_document_counts(kb.id, chunk.doc_id, tokens=change.tokens_delta)
        return change

    def delete_chunks(self, kb: KnowledgeBase, doc: Document, chunk_ids: Sequence[str] | None) -> "ChunkChange":
        """Delete these chunks of the document (None or empty: all), their mentions leaving the graph."""
        from kbgraph.chunk_edit import delete_chunks, document_totals

        ctx = self.context(kb)
        change = delete_chunks(ctx, doc.id, chunk_ids, lock=lambda: self.kb_lock(kb.id))
        if change.deleted:
            # recounted: adding the same content twice counts twice (as RAGFlow does) but stores one chunk
            chunks, tokens = document_totals(ctx, doc.id)
            self.meta.set_document_counts(kb.id, doc.id, chunks=chunks, tokens=tokens)
        return change

    def set_document_enabled(self, kb: KnowledgeBase, doc: Document, enabled: bool) -> Document:
        """A disabled document stays listed but its chunks leave retrieval."""
        from kbgraph.chunk_edit import set_document_availability

        set_document_availability(self.context(kb), doc.id, enabled)
        return self.meta.update_document(kb.id, doc.id, enabled=enabled)

    def rename_document(self, kb: KnowledgeBase, doc: Document, name: str) -> Document:
        from kbgraph.chunk_edit import rename_document_chunks

        renamed = self.meta.update_document(kb.id, doc.id, name=name)
        rename_document_chunks(self.context(kb), doc.id, renamed.name)
        return renamed

    def reset_document(self, kb: KnowledgeBase, doc: Document,
                       reason: str = "") -> tuple[Document, pipeline.DeriveResult]:
        """Drop a document's chunks and exactly its part of the graph; it waits to be parsed again."""
        from kbgraph import pipeline
        with self.kb_lock(kb.id):
            change = pipeline.delete_document(self.context(kb), doc.id)
            return self.meta.reset_document(kb.id, doc.id, reason), change

    # -- retrieval ----------------------------------------------------------------------------

    def default_mode(self, kbs: Sequence[KnowledgeBase]) -> str:
        return "mix" if any(kb.graph.enabled for kb in kbs) else "naive"

    def query(self, kb_names: Sequence[str], question: str, *, mode: str | None = None,
              top_n: int | None = None) -> "RetrievalResult":
        """Retrieve for a question in any mode (default: mix when a KB has a graph, else naive)."""
        from kbgraph.graph.extract.nlp.extractor import NLPExtractor
        from kbgraph.search.retrieve import retrieve

        if not question.strip():
            raise KBGraphError("the question is empty")
        kbs = [self.kb(n) for n in kb_names]
        mode = mode or self.default_mode(kbs)
        if mode != "naive" and not any(kb.graph.enabled for kb in kbs):
            raise KBGraphError(f"mode {mode!r} needs a knowledge graph, and {', '.join(kb_names)} has none; "
                               "use --mode naive, or switch the graph on with `kbgraph kb set NAME --graph nlp`")
        embedder = self.embedder_for(kbs[0])
        mixed = sorted({kb.embedding_model for kb in kbs if self.embedder_for(kb) is not embedder})
        if mixed:
            raise KBGraphError(f"{', '.join(kb_names)} were indexed with different embedding models "
                               f"({embedder.model_name}, {', '.join(mixed)}) and cannot be searched together; "
                               "re-embed them with one model: `kbgraph kb reembed NAME`")
        entity_types = list(dict.fromkeys(t for kb in kbs for t in kb.graph.entity_types))
        return retrieve(self.store, self.tenant, [kb.id for kb in kbs], question, mode, embedder=embedder,
                        chat=self.chat_for(kbs[0]), settings=self.settings, top_n=top_n,
                        extractor=NLPExtractor(entity_types=entity_types), entity_types=entity_types)

    def dialog(self, kb_names: Sequence[str], *, mode: str | None = None, system_prompt: str = "",
               top_n: int | None = None) -> "Dialog":
        """A chat bound to these knowledge bases (raises LLMNotConfigured without a chat model)."""
        from kbgraph.chat import AssistantConfig, Dialog

        kbs = [self.kb(n) for n in kb_names]
        mode = mode or self.default_mode(kbs)
        config = AssistantConfig(system_prompt=system_prompt, empty_response=self.settings.empty_response,
                                 language=self.settings.language)
        return Dialog(lambda q: self.query(kb_names, q, mode=mode, top_n=top_n), self.chat_for(kbs[0]), config)
