"""Entity vectors made from the one chunk an entity is found in (``entity_vectors``): an entity of a
single chunk gets the normalized sum of that chunk's stored unit vector and 0.3 of its name's unit
vector (the name is all the embedder reads for it); an entity of several chunks embeds its text.
After adds, deletes and edits every entity vector equals the one a KB that only saw the remaining
documents gives it. Real parts: the SQLite (or Elasticsearch) store, the chunker, the nlp
extractor, the hash embedder.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings as hsettings

from kbgraph.config import load_settings
from kbgraph.graph.derive.vectors import entity_text
from kbgraph.graph.invariants import check_graph
from kbgraph.llm.base import UsageLedger
from kbgraph.llm.embedders import HashEmbedder, _words
from kbgraph.meta.schemas import GraphConfig
from kbgraph.parse.readers import ParsedDocument
from kbgraph.index.chunks import parse_document
from kbgraph.index.context import KBContext
from kbgraph.index.delete import delete_document
from kbgraph.index.embed_rows import embed_pending
from kbgraph.index.extraction import extract_document
from kbgraph.index.merge import merge_document
from kbgraph.index.refresh_state import _graph_rows
from kbgraph.store import DocStore, open_store
from kbgraph.store.base import eq, vector_field
from kbgraph.store.records import Entity
from conftest import store_overrides
from support.vector_history import build, operations, replay

DIM = 32
FIELD = vector_field(DIM)
PEOPLE = ["Mira Castell", "Tobias Wren", "Ada Quill"]
# each named in one document, in one sentence: an entity of a single chunk
LONERS = ["Odile Farrow", "Bram Tolliver", "Isolde Marsh", "Percival Dunn"]


def _document(seed: int) -> str:
    shared = " ".join(f"{PEOPLE[(seed + i) % 3]} met {PEOPLE[(seed + i + 1) % 3]} in Varrow in the year"
                      f" {1700 + seed * 7 + i}." for i in range(3))
    return f"{LONERS[seed]} repaired the lighthouse lamp. {shared}"


DOCS = {f"doc{n}": _document(n) for n in range(4)}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DocStore:
    return open_store(load_settings(data_dir=tmp_path_factory.mktemp("entvec"), **store_overrides()))


def _context(store: DocStore, tmp: Path, mode: str = "chunk") -> KBContext:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    store.ensure_index(tenant)
    # relation vectors from their chunks too: the embedder reads entity rows only
    settings = load_settings(data_dir=tmp, embedding_provider="hash", embedding_dim=DIM, entity_vectors=mode,
                             relation_vectors="chunks")
    return KBContext(store=store, tenant=tenant, kb_id="kb", settings=settings,
                     embedder=HashEmbedder(dim=DIM, ledger=(ledger := UsageLedger())), ledger=ledger,
                     graph=GraphConfig(enabled=True, method="nlp"), chunk_tokens=40, chunk_overlap=8)


def _add(ctx: KBContext, name: str, text: str | None = None) -> None:
    parse_document(ctx, name, ParsedDocument(name=name, text=text or DOCS[name], pages=[], mime="text/plain"))
    extract_document(ctx, name)
    merge_document(ctx, name)


def _entities(ctx: KBContext) -> dict[str, dict]:
    return {d["name_kwd"]: d for d in ctx.store.scan(
        ctx.tenant, ["kb"], [eq("knowledge_graph_kwd", "entity")],
        fields=["entity_key_kwd", "name_kwd", "entity_type_kwd", "content_with_weight", "chunk_ids_kwd",
                "embedded_int", FIELD])}


def _unit(vector: object) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float64)
    return v / np.linalg.norm(v)


def _from_chunk(ctx: KBContext, row: dict) -> np.ndarray:
    """What the vector of a single-chunk entity must be: unit(unit(chunk) + 0.3 unit(name))."""
    [chunk] = ctx.store.get(ctx.tenant, ["kb"], row["chunk_ids_kwd"], fields=["id", FIELD])
    name = HashEmbedder(dim=DIM).embed([row["name_kwd"]])[0]
    return _unit(_unit(chunk[FIELD]) + 0.3 * _unit(name))


def _text_vector(row: dict) -> np.ndarray:
    entity = Entity.from_doc({**row, "kb_id": "kb"})
    return np.asarray(HashEmbedder(dim=DIM).embed([entity_text(entity)])[0])


def _assert_vector(ctx: KBContext, row: dict) -> None:
    if len(row["chunk_ids_kwd"]) == 1:
        assert row["embedded_int"] == 2
        assert np.allclose(row[FIELD], _from_chunk(ctx, row), atol=1e-6)
    else:
        assert row["embedded_int"] == 1
        assert np.allclose(row[FIELD], _text_vector(row), atol=1e-6)


def test_a_single_chunk_entity_is_its_chunk_plus_its_name_and_embeds_only_the_name(
        store: DocStore, tmp_path: Path) -> None:
    ctx = _context(store, tmp_path)
    for name in DOCS:
        _add(ctx, name)
    before = ctx.ledger.by_phase["embed"].prompt_tokens
    rows = _graph_rows(ctx)
    embed_pending(ctx, rows)
    entities = _entities(ctx)
    assert set(LONERS) <= set(entities)
    assert any(len(row["chunk_ids_kwd"]) > 1 for row in entities.values())
    for row in entities.values():
        _assert_vector(ctx, row)
    # the embedder read the single-chunk entities' names and the others' texts, nothing more
    assert ctx.ledger.by_phase["embed"].prompt_tokens - before == sum(
        len(_words(e.name if len(e.chunk_ids) == 1 else entity_text(e))) for e in rows.entities)
    assert check_graph(ctx.store, ctx.tenant, "kb", ctx.describer()) == []


def test_a_second_chunk_switches_to_the_text_vector_and_back(store: DocStore, tmp_path: Path) -> None:
    ctx = _context(store, tmp_path)
    _add(ctx, "doc0")
    embed_pending(ctx, _graph_rows(ctx))
    alone = _entities(ctx)["Odile Farrow"]
    assert alone["embedded_int"] == 2 and len(alone["chunk_ids_kwd"]) == 1
    _add(ctx, "later", "Odile Farrow sailed to Kestrel Bay with a crate of lamp oil.")
    embed_pending(ctx, _graph_rows(ctx))
    both = _entities(ctx)["Odile Farrow"]
    assert len(both["chunk_ids_kwd"]) == 2 and both["embedded_int"] == 1
    assert np.allclose(both[FIELD], _text_vector(both), atol=1e-6)
    delete_document(ctx, "later")
    embed_pending(ctx, _graph_rows(ctx))
    again = _entities(ctx)["Odile Farrow"]
    assert again["embedded_int"] == 2 and again["chunk_ids_kwd"] == alone["chunk_ids_kwd"]
    assert np.allclose(again[FIELD], alone[FIELD], atol=1e-6)


def test_text_mode_embeds_every_entity_text(store: DocStore, tmp_path: Path) -> None:
    ctx = _context(store, tmp_path, mode="text")
    _add(ctx, "doc0")
    embed_pending(ctx, _graph_rows(ctx))
    entities = _entities(ctx)
    assert any(len(row["chunk_ids_kwd"]) == 1 for row in entities.values())
    for row in entities.values():
        assert row["embedded_int"] == 1
        assert np.allclose(row[FIELD], _text_vector(row), atol=1e-6)


@hsettings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations(DOCS))
def test_entity_vectors_after_adds_deletes_and_edits_equal_a_fresh_kb(store: DocStore, tmp_path: Path,
                                                                      ops: list[tuple[str, str]]) -> None:
    ctx = _context(store, tmp_path)
    present = replay(ctx, ops, DOCS, _add)
    fresh = _context(store, tmp_path)
    build(fresh, present, _add)
    got, want = _entities(ctx), _entities(fresh)
    assert got.keys() == want.keys()
    for name, row in want.items():
        assert got[name]["embedded_int"] == row["embedded_int"]
        assert np.allclose(got[name][FIELD], row[FIELD], atol=1e-6)
        _assert_vector(ctx, got[name])
    store.drop_index(ctx.tenant)
    store.drop_index(fresh.tenant)
