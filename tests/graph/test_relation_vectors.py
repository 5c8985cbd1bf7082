"""Relation vectors made from the chunks a relation is found in (``relation_vectors``): each is the
normalized mean of its chunks' stored vectors, made without a model call, and after any adds,
deletes and re-indexing it equals the vector a KB that only saw the remaining documents gives it.
Real parts: the SQLite (or Elasticsearch) store, the chunker, the nlp extractor, the hash embedder.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings as hsettings

from kbgraph.config import load_settings
from kbgraph.graph.derive.vectors import entity_text, relation_text
from kbgraph.graph.invariants import check_graph
from kbgraph.llm.base import UsageLedger
from kbgraph.llm.embedders import HashEmbedder, _words
from kbgraph.meta.schemas import GraphConfig
from kbgraph.parse.readers import ParsedDocument
from kbgraph.index.chunks import parse_document
from kbgraph.index.context import KBContext
from kbgraph.index.embed_rows import embed_pending
from kbgraph.index.extraction import extract_document
from kbgraph.index.merge import merge_document
from kbgraph.index.refresh_state import _graph_rows
from kbgraph.store import DocStore, open_store
from kbgraph.store.base import eq, vector_field
from kbgraph.store.records import Relation
from conftest import store_overrides
from support.vector_history import build, operations, replay

PEOPLE = ["Mira Castell", "Tobias Wren", "Ada Quill", "Hector Vane"]
PLACES = ["Varrow", "Glass Tower", "Kestrel Bay"]


def _document(seed: int) -> str:
    return " ".join(f"{PEOPLE[(seed + i) % 4]} travelled to {PLACES[(seed * 2 + i) % 3]} in the year"
                    f" {1700 + seed * 7 + i}. {PEOPLE[(seed + i) % 4]} met {PEOPLE[(seed + i + 1) % 4]} there."
                    for i in range(3))


DOCS = {f"doc{n}": _document(n) for n in range(4)}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DocStore:
    return open_store(load_settings(data_dir=tmp_path_factory.mktemp("relvec"), **store_overrides()))


def _context(store: DocStore, tmp: Path, mode: str = "chunks", tenant: str = "") -> KBContext:
    tenant = tenant or f"t{uuid.uuid4().hex[:8]}"
    store.ensure_index(tenant)
    settings = load_settings(data_dir=tmp, embedding_provider="hash", embedding_dim=32, relation_vectors=mode)
    return KBContext(store=store, tenant=tenant, kb_id="kb", settings=settings,
                     embedder=HashEmbedder(dim=32, ledger=(ledger := UsageLedger())), ledger=ledger,
                     graph=GraphConfig(enabled=True, method="nlp"), chunk_tokens=40, chunk_overlap=8)


def _add(ctx: KBContext, name: str, text: str | None = None) -> None:
    parse_document(ctx, name, ParsedDocument(name=name, text=text or DOCS[name], pages=[], mime="text/plain"))
    extract_document(ctx, name)
    merge_document(ctx, name)


def _relations(ctx: KBContext) -> dict[tuple[str, str], dict]:
    field = vector_field(32)
    return {(d["src_key_kwd"], d["tgt_key_kwd"]): d for d in ctx.store.scan(
        ctx.tenant, ["kb"], [eq("knowledge_graph_kwd", "relation")],
        fields=["src_key_kwd", "tgt_key_kwd", "chunk_ids_kwd", "embedded_int", "content_with_weight",
                "src_name_kwd", "tgt_name_kwd", "keywords_kwd", field])}


def _chunk_mean(ctx: KBContext, chunk_ids: list[str]) -> np.ndarray:
    field = vector_field(32)
    docs = {d["id"]: d[field] for d in ctx.store.get(ctx.tenant, ["kb"], chunk_ids, fields=["id", field])}
    total = np.sum([np.asarray(docs[c], dtype=np.float64) for c in sorted(chunk_ids)], axis=0)
    return total / np.linalg.norm(total)


def test_a_relation_vector_is_the_mean_of_its_chunks_and_costs_no_model_call(store: DocStore, tmp_path: Path) -> None:
    ctx = _context(store, tmp_path)
    for name in DOCS:
        _add(ctx, name)
    before = ctx.ledger.by_phase["embed"].prompt_tokens
    rows = _graph_rows(ctx)
    entities = sum(1 for e in rows.entities if e.id in rows.unembedded)
    embedded = embed_pending(ctx, rows)
    relations = _relations(ctx)
    assert embedded == entities + len(relations) and len(relations) > 5
    assert any(len(r["chunk_ids_kwd"]) > 1 for r in relations.values())
    for row in relations.values():
        assert row["embedded_int"] == 2
        assert np.allclose(row[vector_field(32)], _chunk_mean(ctx, row["chunk_ids_kwd"]), atol=1e-6)
    # the embedder read the entities' texts only: no relation text was embedded
    assert ctx.ledger.by_phase["embed"].prompt_tokens - before == sum(
        len(_words(entity_text(e))) for e in rows.entities)
    assert check_graph(ctx.store, ctx.tenant, "kb", ctx.describer()) == []


def test_text_mode_embeds_the_relation_text(store: DocStore, tmp_path: Path) -> None:
    ctx = _context(store, tmp_path, mode="text")
    _add(ctx, "doc0")
    embed_pending(ctx, _graph_rows(ctx))
    relations = _relations(ctx)
    embedder = HashEmbedder(dim=32)
    for row in relations.values():
        assert row["embedded_int"] == 1
        text = relation_text(Relation.from_doc({**row, "kb_id": "kb"}))
        assert np.allclose(row[vector_field(32)], embedder.embed([text])[0], atol=1e-6)


@hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations(DOCS))
def test_relation_vectors_after_adds_deletes_and_edits_equal_a_fresh_kb(store: DocStore, tmp_path: Path,
                                                                        ops: list[tuple[str, str]]) -> None:
    ctx = _context(store, tmp_path)
    present = replay(ctx, ops, DOCS, _add)
    fresh = _context(store, tmp_path)
    build(fresh, present, _add)
    got, want = _relations(ctx), _relations(fresh)
    assert got.keys() == want.keys()
    for pair, row in want.items():
        assert got[pair]["embedded_int"] == row["embedded_int"] == 2
        assert np.allclose(got[pair][vector_field(32)], row[vector_field(32)], atol=1e-6)
    store.drop_index(ctx.tenant)
    store.drop_index(fresh.tenant)
