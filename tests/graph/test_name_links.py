"""Name links: a first name or short form that only one full name of the knowledge base can stand for
is that entity ("Jennifer" -> "Jennifer Moore" while the knowledge base has no other Jennifer), by
the refresh after a batch of changes, and the graph after any adds, deletes and refreshes equals a
rebuild's. Real parts: the SQLite store (Elasticsearch when KBGRAPH_ES_URL is set), the chunker,
the nlp extractor, the hash embedder.
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path

import pytest

from kbgraph.config import load_settings
from kbgraph.graph.derive.aliases import name_links, with_name_links
from kbgraph.graph.invariants import check_graph, stored_graph
from kbgraph.index.chunks import parse_document
from kbgraph.index.context import KBContext
from kbgraph.index.delete import delete_document
from kbgraph.index.extraction import extract_document
from kbgraph.index.merge import merge_document
from kbgraph.index.refresh import refresh_kb
from kbgraph.llm.embedders import HashEmbedder
from kbgraph.meta.schemas import GraphConfig
from kbgraph.parse.readers import ParsedDocument
from kbgraph.store import DocStore, open_store
from conftest import store_overrides

DOCS = {
    "full": "Time: 2024-03-01 10:02\nJennifer Moore: the Harbour Street lease is signed\n"
            "Tobias Wren: great, I will tell Ada Quill\n",
    "first": "Time: 2024-03-02 09:15\nJennifer: the movers come on Friday\nTobias Wren: thanks\n",
    "other": "Time: 2024-03-03 16:40\nJennifer Lopez: can we move the Friday call?\nAda Quill: yes\n",
}


def test_a_short_form_links_to_the_one_full_name_that_fits() -> None:
    people = {"jennifer moore": 3, "jennifer": 2, "tobias wren": 1, "wren": 1, "ada": 1, "罗迪奇": 1,
              "亚历山大·罗迪奇": 2}
    assert name_links(people, {"jennifer": 2, "wren": 1, "罗迪奇": 1}) == {
        "jennifer": "jennifer moore", "wren": "tobias wren", "罗迪奇": "亚历山大·罗迪奇"}
    # two Jennifers: "jennifer" is neither; a short form that is mostly no person stays itself
    assert "jennifer" not in name_links({**people, "jennifer lopez": 1}, {"jennifer": 2})
    assert "jennifer" not in name_links(people, {"jennifer": 5})
    # a full name resolution merged elsewhere takes its short forms along; a key resolution grouped
    # itself keeps resolution's group
    assert with_name_links({"jen moore": "jennifer moore"}, {"jen": "jen moore"}) == {
        "jen moore": "jennifer moore", "jen": "jennifer moore"}
    assert with_name_links({"jennifer": "jenny"}, {"jennifer": "jennifer moore"}) == {"jennifer": "jenny"}


def _context(store: DocStore, tenant: str, tmp: Path) -> KBContext:
    settings = load_settings(data_dir=tmp, embedding_provider="hash", embedding_dim=32)
    return KBContext(store=store, tenant=tenant, kb_id="kb", settings=settings, embedder=HashEmbedder(dim=32),
                     graph=GraphConfig(enabled=True, method="nlp", community=True), chunk_tokens=200,
                     chunk_overlap=0)


def _add(ctx: KBContext, name: str) -> None:
    parse_document(ctx, name, ParsedDocument(name=name, text=DOCS[name], pages=[], mime="text/plain"))
    extract_document(ctx, name)
    merge_document(ctx, name)


def _entities(ctx: KBContext) -> dict[str, tuple]:
    return {k: (e.name, e.type, e.aliases, e.doc_ids, e.chunk_ids, e.mention_count, e.description)
            for k, e in stored_graph(ctx.store, ctx.tenant, ctx.kb_id).entities.items()}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DocStore:
    return open_store(load_settings(data_dir=tmp_path_factory.mktemp("links"), **store_overrides()))


def test_the_refresh_links_a_first_name_and_unlinks_it_when_it_turns_ambiguous(store: DocStore,
                                                                             tmp_path: Path) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    store.ensure_index(tenant)
    ctx = _context(store, tenant, tmp_path)
    _add(ctx, "full")
    _add(ctx, "first")
    assert "jennifer" in _entities(ctx)  # merged as extracted, until the refresh
    refresh_kb(ctx)
    entities = _entities(ctx)
    assert "jennifer" not in entities and "first" in entities["jennifer moore"][3]
    assert "Jennifer" in entities["jennifer moore"][2]  # an alias of the row, found by that name
    assert "time" not in entities and "tobias wren" in entities
    assert check_graph(store, tenant, "kb", ctx.describer()) == []

    _add(ctx, "other")  # a second Jennifer: the first name no longer says which
    refresh_kb(ctx)
    entities = _entities(ctx)
    assert "jennifer" in entities and entities["jennifer moore"][3] == ["full"]
    assert check_graph(store, tenant, "kb", ctx.describer()) == []

    delete_document(ctx, "other")
    refresh_kb(ctx)
    assert "jennifer" not in _entities(ctx)
    assert check_graph(store, tenant, "kb", ctx.describer()) == []
    store.drop_index(tenant)


@pytest.mark.parametrize("order", list(itertools.permutations(DOCS))[::2])
def test_any_order_of_adds_and_refreshes_gives_a_rebuilds_graph(store: DocStore, tmp_path: Path,
                                                                order: tuple[str, ...]) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    store.ensure_index(tenant)
    ctx = _context(store, tenant, tmp_path)
    for name in order:
        _add(ctx, name)
        refresh_kb(ctx)
    fresh = _context(store, f"{tenant}f", tmp_path)
    store.ensure_index(fresh.tenant)
    for name in sorted(DOCS):
        _add(fresh, name)
    refresh_kb(fresh)
    assert _entities(ctx) == _entities(fresh)
    assert check_graph(store, tenant, "kb", ctx.describer()) == []
    store.drop_index(tenant)
    store.drop_index(fresh.tenant)
