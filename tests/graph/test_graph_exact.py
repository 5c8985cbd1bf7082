"""The graph invariant: after any sequence of document adds and deletes, the derived graph equals a
rebuild from the remaining mentions, and equals the graph of a KB that only ever saw the remaining
documents, and so do the products of the refresh after each change (PageRank, communities, reports).
Real parts throughout: the SQLite store (Elasticsearch when KBGRAPH_ES_URL is set), the chunker, the
nlp extractor, the hash embedder.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from kbgraph.config import load_settings
from kbgraph.graph.invariants import check_graph, stored_graph
from kbgraph.llm.embedders import HashEmbedder
from kbgraph.meta.schemas import GraphConfig
from kbgraph.parse.readers import ParsedDocument
from kbgraph.index.chunks import parse_document
from kbgraph.index.context import KBContext
from kbgraph.index.delete import delete_document
from kbgraph.index.extraction import extract_document
from kbgraph.index.graph_meta import load_graph_meta
from kbgraph.index.merge import merge_document
from kbgraph.index.refresh import refresh_kb
from kbgraph.store.base import eq, missing
from kbgraph.store import DocStore, open_store
from conftest import store_overrides
from support.graph_phases import assert_same_phases, phase_products

PEOPLE = ["Mira Castell", "Tobias Wren", "Ada Quill", "Hector Vane", "Lena Marsh"]
PLACES = ["Varrow", "Glass Tower", "Kestrel Bay", "Ashgrove"]
GROUPS = ["Lumen Guild", "Brightwater Company", "Tidewarden Order"]


def _document(seed: int) -> str:
    """A small document whose entities overlap with the other seeds' documents."""
    sentences = []
    for i in range(4):
        person = PEOPLE[(seed + i) % len(PEOPLE)]
        place = PLACES[(seed * 3 + i) % len(PLACES)]
        group = GROUPS[(seed + 2 * i) % len(GROUPS)]
        sentences.append(f"{person} travelled to {place} with the {group} in the year {1700 + seed * 7 + i}.")
        if (seed + i) % 3 == 0:
            sentences.append(f"{person} and {PEOPLE[(seed + i + 1) % len(PEOPLE)]} argued about {place}.")
    return " ".join(sentences)


DOCS = {f"doc{n}": _document(n) for n in range(6)}
# chat lines naming people by first name: the refresh links "Mira" and "Hector" to the one full name
# the KB has for each (name links), until doc7 brings a second Mira
DOCS["doc6"] = "Mira: the Glass Tower needs new cranes before winter\nTobias Wren: Hector said the roof leaks\n"
DOCS["doc7"] = "Mira Lent: the Kestrel Bay ferry is late again\nHector: then we sail from Varrow\n"


def _context(store: DocStore, tenant: str, kb_id: str, tmp: Path) -> KBContext:
    settings = load_settings(data_dir=tmp, embedding_provider="hash", embedding_dim=32, summary_max_tokens=60)
    return KBContext(store=store, tenant=tenant, kb_id=kb_id, settings=settings, embedder=HashEmbedder(dim=32),
                     graph=GraphConfig(enabled=True, method="nlp", community=True), chunk_tokens=48, chunk_overlap=8)


def _add(ctx: KBContext, name: str) -> None:
    parse_document(ctx, name, ParsedDocument(name=name, text=DOCS[name], pages=[], mime="text/plain"))
    extract_document(ctx, name)
    merge_document(ctx, name)


def _comparable(ctx: KBContext) -> tuple[dict, dict]:
    snapshot = stored_graph(ctx.store, ctx.tenant, ctx.kb_id)
    entities = {k: (e.name, e.type, e.aliases, e.doc_ids, e.chunk_ids, e.mention_count, e.description, e.vector)
                for k, e in snapshot.entities.items()}
    relations = {k: (r.src_name, r.tgt_name, r.weight, r.doc_ids, r.chunk_ids, r.mention_count, r.description,
                     r.vector) for k, r in snapshot.relations.items()}
    return entities, relations


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DocStore:
    """SQLite, or Elasticsearch when KBGRAPH_ES_URL is set."""
    data = tmp_path_factory.mktemp("exact")
    return open_store(load_settings(data_dir=data, **store_overrides()))


operations = st.lists(st.tuples(st.sampled_from(["add", "delete"]), st.sampled_from(sorted(DOCS))),
                      min_size=1, max_size=8)


@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_adds_and_deletes_equal_a_rebuild(store: DocStore, tmp_path: Path, ops: list[tuple[str, str]]) -> None:
    tenant, kb_id = f"t{uuid.uuid4().hex[:8]}", "kb"
    store.ensure_index(tenant)
    ctx = _context(store, tenant, kb_id, tmp_path)
    present: set[str] = set()
    for op, name in ops:
        if op == "add":
            _add(ctx, name)  # adding a present document re-indexes it
            present.add(name)
        elif name in present:
            delete_document(ctx, name)
            present.discard(name)
        assert check_graph(store, tenant, kb_id, ctx.describer()) == []
        meta = load_graph_meta(ctx)  # counts are kept by difference on every merge and delete
        assert meta.entity_count == store.count(tenant, [kb_id], [eq("knowledge_graph_kwd", "entity")])
        assert meta.relation_count == store.count(tenant, [kb_id], [eq("knowledge_graph_kwd", "relation")])
        refresh_kb(ctx)  # the phases after each change, as an indexing run or a deletion refreshes them

    assert_same_as_fresh(ctx, present, tmp_path)


def assert_same_as_fresh(ctx: KBContext, present: set[str], tmp_path: Path,
                         prepare: Callable[[KBContext], None] = lambda _fresh: None) -> None:
    """The graph and its phases equal those of a fresh knowledge base (made ready by ``prepare``)
    that only ever saw the ``present`` documents; both tenants' indices are dropped after."""
    store, tenant, kb_id = ctx.store, ctx.tenant, ctx.kb_id
    fresh = _context(store, f"{tenant}fresh", kb_id, tmp_path)
    store.ensure_index(fresh.tenant)
    prepare(fresh)
    for name in sorted(present):
        _add(fresh, name)
    refresh_kb(fresh)
    assert _comparable(ctx) == _comparable(fresh)
    assert_same_phases(phase_products(store, tenant, kb_id), phase_products(store, fresh.tenant, kb_id))
    store.drop_index(tenant)
    store.drop_index(fresh.tenant)


def test_deleting_every_document_leaves_no_graph(store: DocStore, tmp_path: Path) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    store.ensure_index(tenant)
    ctx = _context(store, tenant, "kb", tmp_path)
    for name in DOCS:
        _add(ctx, name)
    assert store.count(tenant, ["kb"]) > 0
    for name in DOCS:
        delete_document(ctx, name)
    assert store.count(tenant, ["kb"], []) == 1  # only graph_meta is left
    entities, relations = _comparable(ctx)
    assert entities == {} and relations == {}


def test_reindexing_changed_text_forgets_the_old_version(store: DocStore, tmp_path: Path) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    store.ensure_index(tenant)
    ctx = _context(store, tenant, "kb", tmp_path)
    _add(ctx, "doc0")
    DOCS_BEFORE = dict(DOCS)
    try:
        DOCS["doc0"] = "Zora Pell founded the Quiet Lantern Society in Varrow."
        _add(ctx, "doc0")
    finally:
        DOCS.update(DOCS_BEFORE)
    entities, _ = _comparable(ctx)
    assert "zora pell" in entities
    assert not any(name in entities for name in ("ada quill", "hector vane"))
    assert check_graph(store, tenant, "kb", ctx.describer()) == []


def test_pairs_of_documents_commute(store: DocStore, tmp_path: Path) -> None:
    """Indexing order does not change the graph."""
    graphs = []
    for order in itertools.islice(itertools.permutations(["doc1", "doc2", "doc3"]), 3):
        tenant = f"t{uuid.uuid4().hex[:8]}"
        store.ensure_index(tenant)
        ctx = _context(store, tenant, "kb", tmp_path)
        for name in order:
            _add(ctx, name)
        graphs.append(_comparable(ctx))
    assert graphs[0] == graphs[1] == graphs[2]


def test_mentions_stored_by_an_earlier_format_are_upgraded_before_a_merge(store: DocStore, tmp_path: Path) -> None:
    """Relation mentions written before they named their relation row are found all the same: the
    first merge upgrades them once, and the graph still equals a rebuild."""
    tenant = f"t{uuid.uuid4().hex[:8]}"
    store.ensure_index(tenant)
    ctx = _context(store, tenant, "kb", tmp_path)
    for name in ("doc0", "doc1", "doc2"):
        _add(ctx, name)
    old = [{k: v for k, v in d.items() if k != "relation_id_kwd"}
           for d in store.scan(tenant, ["kb"], [eq("knowledge_graph_kwd", "relation_mention")])]
    store.upsert(tenant, "kb", old)  # an upsert replaces the whole row: format 1
    meta = load_graph_meta(ctx)
    meta.mention_format = 1
    store.upsert(tenant, "kb", [meta.to_doc()])

    _add(ctx, "doc3")  # shares pairs with the earlier documents
    assert check_graph(store, tenant, "kb", ctx.describer()) == []
    assert load_graph_meta(ctx).mention_format == 2
    assert store.count(tenant, ["kb"], [eq("knowledge_graph_kwd", "relation_mention"), missing("relation_id_kwd")]) == 0
    delete_document(ctx, "doc1")
    assert check_graph(store, tenant, "kb", ctx.describer()) == []
    store.drop_index(tenant)


class _CountingStore:
    """The store, noting which documents' entity mentions each scan hands out."""

    def __init__(self, inner: DocStore) -> None:
        self._inner = inner
        self.mention_docs: set[str] = set()

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def scan(self, *args, **kwargs):
        for doc in self._inner.scan(*args, **kwargs):
            if doc.get("knowledge_graph_kwd") == "entity_mention":
                self.mention_docs.add(doc["doc_id"])
            yield doc


def test_merging_a_document_does_not_reread_a_frequent_entitys_older_mentions(store: DocStore,
                                                                             tmp_path: Path) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    store.ensure_index(tenant)
    counting = _CountingStore(store)
    ctx = _context(counting, tenant, "kb", tmp_path)  # type: ignore[arg-type]
    for name in ("doc0", "doc1", "doc2", "doc3"):
        _add(ctx, name)
    parse_document(ctx, "doc4", ParsedDocument(name="doc4", text=DOCS["doc4"], pages=[], mime="text/plain"))
    extract_document(ctx, "doc4")
    counting.mention_docs.clear()
    merge_document(ctx, "doc4")
    assert counting.mention_docs <= {"doc4"}  # Mira Castell and the others recur, their history is not read
    assert check_graph(store, tenant, "kb", ctx.describer()) == []
    store.drop_index(tenant)
