"""The PPR walk's graph, written to disk by the process that built it, serves the next process."""

from __future__ import annotations

import numpy as np
import pytest

from kbgraph.engine import Engine
from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.meta.schemas import GraphConfig
from kbgraph.search import ppr_graph as ppr_search

QUESTIONS = ["Who founded the Lumen Cartographers Guild?", "What did Tobias Wren build in Varrow?"]


def test_a_new_process_maps_the_walk_graph_instead_of_reading_every_row(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings.replace(store="sqlite")  # the graph is kept on disk beside the embedded store only
    monkeypatch.setattr(ppr_search, "PERSIST_MIN_ROWS", 1)
    with Engine.open(settings) as engine:
        engine.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp"))
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR])
        kb_id = engine.kb("lore").id
        built = ppr_search.entity_graph(engine.store, engine.tenant, [kb_id])
        expected = [[c.chunk_id for c in engine.query(["lore"], q, mode="ppr").chunks] for q in QUESTIONS]

    ppr_search.clear_cache()

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("the graph was rebuilt from the rows")

    monkeypatch.setattr(ppr_search, "build_entity_graph", no_build)
    with Engine.open(settings) as engine:  # a new process, in effect
        loaded = ppr_search.entity_graph(engine.store, engine.tenant, [kb_id])
        assert loaded.versions == built.versions and loaded.graph.nodes == built.graph.nodes
        assert loaded.graph.matrix.equals(built.graph.matrix)
        assert np.array_equal(loaded.entity_nodes, built.entity_nodes) and loaded.mentions == built.mentions
        assert [[c.chunk_id for c in engine.query(["lore"], q, mode="ppr").chunks] for q in QUESTIONS] == expected


def test_entity_citations_are_read_back_instead_of_scanned(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbgraph.search import graph_cache
    from kbgraph.search.kg import scoring as kg

    settings = settings.replace(store="sqlite")
    monkeypatch.setattr(graph_cache, "PERSIST_MIN_ROWS", 1)
    with Engine.open(settings) as engine:
        engine.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp"))
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR])
        kb_id = engine.kb("lore").id
        state = graph_cache.graph_state(engine.store, engine.tenant, [kb_id])
        built = kg.entity_citations(engine.store, engine.tenant, [kb_id], state)
        assert built.counts and built.total > 0
    graph_cache.clear_caches()
    with Engine.open(settings) as engine:  # a new process, in effect: no entity row is scanned
        def no_scan(*args: object, **kwargs: object) -> None:
            raise AssertionError("the entity rows were scanned again")

        monkeypatch.setattr(engine.store, "scan", no_scan)
        assert kg.entity_citations(engine.store, engine.tenant, [kb_id], state) == built
