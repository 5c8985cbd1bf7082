"""Graph corrections through ``Engine`` (the embedded SQLite store, Elasticsearch when KBGRAPH_ES_URL is
set): a correction waits for the knowledge base's lock that indexing holds; vectors follow a changed
description; corrections and curated imports survive the web's drop-and-rebuild of the graph and a
move of the tenant to a new index; a new import of a source replaces the old."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from kbgraph.config import Settings
from kbgraph.engine import Engine, KBGraphError
from kbgraph.graph.curated import CuratedEntity, CuratedGraph, CuratedRelation
from kbgraph.graph.derive.vectors import entity_text
from kbgraph.graph.invariants import check_graph, stored_graph
from kbgraph.meta.schemas import GraphConfig
from kbgraph.store.base import eq, vector_field
from kbgraph.store.records import Entity, entity_id

TEXTS = {
    "voyage.txt": "Mira Castell sailed from Varrow to Kestrel Bay with Tobias Wren. Mira Castell mapped the reefs.",
    "tower.txt": "Ada Quill built the Glass Tower in Ashgrove. The Glass Tower watches over Varrow.",
    "flood.txt": "The Great Flood struck Varrow in 801. Tobias Wren rebuilt the harbour of Varrow.",
}


@pytest.fixture
def engine(settings: Settings, tmp_path: Path):  # type: ignore[no-untyped-def]
    with Engine.open(settings) as opened:
        opened.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp", community=True))
        for name, text in TEXTS.items():
            (tmp_path / name).write_text(text, encoding="utf-8")
        opened.index_paths("lore", [tmp_path / n for n in ("voyage.txt", "tower.txt")])
        yield opened
        if opened.store.index_exists(opened.tenant):
            opened.store.drop_index(opened.tenant)


def _consistent(engine: Engine) -> dict[str, Entity]:
    kb = engine.kb("lore")
    ctx = engine.context(kb)
    assert check_graph(engine.store, engine.tenant, kb.id, ctx.describer()) == []
    return stored_graph(engine.store, engine.tenant, kb.id).entities


def test_a_correction_waits_for_the_lock_indexing_holds(engine: Engine) -> None:
    kb = engine.kb("lore")
    done: list[object] = []
    with engine.kb_lock(kb.id):  # what a merge of a document being indexed holds
        worker = threading.Thread(target=lambda: done.append(engine.rename_entity("lore", "Varrow", "Varrow City")))
        worker.start()
        time.sleep(1.0)
        assert worker.is_alive() and not done and engine.corrections("lore") == []
    worker.join(30)
    assert done and [c.op for c in engine.corrections("lore")] == ["rename"]
    assert _consistent(engine)["varrow city"].name == "Varrow City"


def test_a_new_description_gets_a_new_vector(engine: Engine) -> None:
    kb = engine.kb("lore")
    field = vector_field(engine.embedder_for(kb).dim)

    def row() -> Entity:
        rid = entity_id(kb.id, "glass tower")
        doc = engine.store.get(engine.tenant, [kb.id], [rid])[0]
        vector = engine.store.get(engine.tenant, [kb.id], [rid], fields=["id", field])[0]  # vectors only when asked
        return Entity.from_doc({**doc, **vector})

    before = row()
    engine.set_entity("lore", "Glass Tower", description="A lighthouse of green glass on the Ashgrove cliffs")
    after = row()
    assert after.description.startswith("A lighthouse") and after.vector is not None
    assert not np.allclose(before.vector, after.vector)
    expected = engine.embedder_for(kb).embed([entity_text(after)])[0]
    assert np.allclose(np.asarray(after.vector), expected / np.linalg.norm(expected), atol=1e-5)


def test_corrections_and_curated_rows_survive_the_webs_rebuild(engine: Engine, tmp_path: Path) -> None:
    engine.merge_entities("lore", ["Mira Castell", "Tobias Wren"], into="Mira Castell", force=True)
    engine.delete_entity("lore", "Ashgrove")
    engine.import_graph("lore", CuratedGraph([CuratedEntity("Pell Harbour", "geo", "A harbour town")],
                                             [CuratedRelation("Pell Harbour", "Varrow", "ferries")]), "atlas")
    before = {k: (e.name, e.type, e.description, e.mention_count) for k, e in _consistent(engine).items()}

    engine.clear_graph_for_rebuild("lore")  # DELETE .../knowledge_graph, then run_graphrag's build
    assert {"pell harbour", "varrow"} <= set(_consistent(engine))
    engine.build_graph("lore")
    after = {k: (e.name, e.type, e.description, e.mention_count) for k, e in _consistent(engine).items()}
    assert after == before and "tobias wren" not in after and "ashgrove" not in after

    engine.set_graph("lore", GraphConfig(enabled=False))  # the graph off: its rows go, the corrections stay
    kb = engine.kb("lore")
    assert engine.store.count(engine.tenant, [kb.id], [eq("knowledge_graph_kwd", "entity")]) == 0
    assert len(engine.corrections("lore")) == 3
    engine.set_graph("lore", GraphConfig(enabled=True, method="nlp", community=True))
    engine.build_graph("lore")
    assert {k: (e.name, e.type, e.description, e.mention_count) for k, e in _consistent(engine).items()} == before

    engine.index_paths("lore", [tmp_path / "flood.txt"])  # names Tobias Wren again: still merged
    entities = _consistent(engine)
    assert "tobias wren" not in entities and "flood.txt" in str(engine.list_documents("lore"))
    assert len(entities["mira castell"].doc_ids) == 2  # voyage, and flood through Tobias Wren


def test_a_new_import_of_a_source_replaces_the_old(engine: Engine) -> None:
    engine.import_graph("lore", CuratedGraph([CuratedEntity("Pell Harbour", "geo", "old")], []), "atlas")
    engine.import_graph("lore", CuratedGraph([CuratedEntity("Quay Street", "geo", "new")], []), "atlas")
    entities = _consistent(engine)
    assert "pell harbour" not in entities and entities["quay street"].description == "new"
    assert [(c.op, c.undone) for c in engine.corrections("lore")] == [("import", True), ("import", False)]
    engine.remove_import("lore", "atlas")
    assert "quay street" not in _consistent(engine)
    with pytest.raises(KBGraphError, match="no curated source 'atlas'"):
        engine.remove_import("lore", "atlas")


@pytest.mark.skipif(not os.environ.get("KBGRAPH_ES_URL"), reason="moving a tenant is an Elasticsearch operation")
def test_corrections_move_with_the_tenant(engine: Engine, tmp_path: Path) -> None:
    from kbgraph.store.elastic.admin import move_tenant

    engine.rename_entity("lore", "Varrow", "Varrow City")
    engine.add_entity("lore", "Pell Harbour", "geo", "A harbour town")
    before = {k: (e.name, e.description) for k, e in _consistent(engine).items()}
    report = move_tenant(engine.store, engine.tenant, shards=2)
    assert report.target != report.source
    assert {k: (e.name, e.description) for k, e in _consistent(engine).items()} == before
    assert [c.op for c in engine.corrections("lore")] == ["rename", "add_entity"]
    engine.index_paths("lore", [tmp_path / "flood.txt"])  # names Varrow: it joins Varrow City
    entities = _consistent(engine)
    assert "varrow" not in entities and len(entities["varrow city"].doc_ids) == 3
