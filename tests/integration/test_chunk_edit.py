"""Chunks edited by hand through the engine (no web layer): the graph follows every edit exactly."""

from __future__ import annotations

from typing import Any

import pytest

from kbgraph.engine import Engine
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.meta.schemas import GraphConfig
from kbgraph.store.base import any_of, eq

GRAPH_KINDS = ["entity", "relation"]


def graph_rows(engine: Engine, kb_id: str) -> dict[str, dict[str, Any]]:
    """Entity and relation rows without the fields a later refresh recomputes."""
    rows = engine.store.scan(engine.tenant, [kb_id], [any_of("knowledge_graph_kwd", GRAPH_KINDS)])
    volatile = {"pagerank_flt", "community_ids_kwd"}
    return {r["id"]: {k: v for k, v in r.items() if k not in volatile and not k.endswith("_vec")} for r in rows}


@pytest.fixture
def engine(settings):
    with Engine.open(settings) as engine:
        engine.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp"))
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR / "mira_castell.md", SAMPLE_CORPUS_DIR / "salt_war.md"],
                           refresh=False)
        yield engine


def test_add_update_delete_leave_the_graph_as_it_was(engine: Engine) -> None:
    kb = engine.kb("lore")
    doc = engine.list_documents("lore")[0]
    before = graph_rows(engine, kb.id)
    added = engine.add_chunk(kb, doc, "Quillon Marrowby founded the Obsidian Ferry Consortium in Port Halvane.",
                             important_keywords=["ferry"], questions=["Who founded the ferry consortium?"])
    assert added.chunk is not None and added.graph.entities_created >= 2
    with_chunk = graph_rows(engine, kb.id)
    new_names = {r.get("name_kwd") for i, r in with_chunk.items() if i not in before and r["knowledge_graph_kwd"] == "entity"}
    assert any("Quillon" in (n or "") for n in new_names), new_names
    assert engine.meta.get_document(kb.id, doc.id).chunk_count == doc.chunk_count + 1

    chunk = engine.get_chunk(kb, added.chunk.id)
    assert chunk is not None and chunk.questions == ["Who founded the ferry consortium?"]
    updated = engine.update_chunk(kb, chunk, content="Perrin Oakhollow charted the Saltmere Narrows.")
    assert updated.graph.changed
    names = {r.get("name_kwd") for r in graph_rows(engine, kb.id).values()}
    assert not any("Quillon" in (n or "") for n in names) and any("Perrin" in (n or "") for n in names)

    removed = engine.delete_chunks(kb, doc, [chunk.id])
    assert removed.deleted == 1 and removed.graph.changed
    assert list(engine.store.scan(engine.tenant, [kb.id], [eq("chunk_id_kwd", chunk.id)])) == []
    assert graph_rows(engine, kb.id) == before  # exactly as before, descriptions and doc ids included
    assert engine.meta.get_document(kb.id, doc.id).chunk_count == doc.chunk_count


def test_deleting_all_chunks_of_a_document_removes_its_part_of_the_graph(engine: Engine) -> None:
    kb = engine.kb("lore")
    docs = engine.list_documents("lore")
    gone, kept = docs[0], docs[1]
    engine.delete_chunks(kb, gone, None)
    rows = graph_rows(engine, kb.id)
    assert rows and all(gone.id not in r.get("doc_ids_kwd", []) for r in rows.values())
    assert all(kept.id in r.get("doc_ids_kwd", []) for r in rows.values())
    assert engine.chunk_page(kb, gone.id).total == 0 and engine.chunk_page(kb, kept.id).total == kept.chunk_count
