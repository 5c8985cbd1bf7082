"""After indexing, the embedded store's search structures (postings, vector slices, the ppr walk's
graph) are on disk already: the first question of a new process builds none of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.engine import Engine
from kbgraph.meta.schemas import GraphConfig
from kbgraph.search import ppr_graph
from kbgraph.store.sqlite import slice_cache, text_index, vector_index

QUESTIONS = ["Who founded the Lumen Cartographers Guild?", "What did Tobias Wren build in Varrow?"]
MODES = ["naive", "kg", "ppr", "mix"]


@pytest.fixture
def everything_persisted(monkeypatch: pytest.MonkeyPatch) -> None:
    # the sample corpus is small: every slice and graph counts as worth keeping on disk
    monkeypatch.setattr(slice_cache, "PERSIST_MIN_ROWS", 1)
    monkeypatch.setattr(ppr_graph, "PERSIST_MIN_ROWS", 1)


def no_build(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every build of a search structure from the rows record itself and fail."""
    built: list[str] = []

    def refusing(name: str):  # type: ignore[no-untyped-def]
        def build(*args: object, **kwargs: object) -> None:
            built.append(name)
            raise AssertionError(f"the first query built {name} from the rows")
        return build

    monkeypatch.setattr(text_index.FieldPostings, "__init__", refusing("postings"))
    monkeypatch.setattr(vector_index.VectorSlice, "__init__", refusing("a vector slice"))
    monkeypatch.setattr(ppr_graph, "build_entity_graph", refusing("the walk graph"))
    return built


def answers(engine: Engine, kb: str) -> list[list[str]]:
    return [[c.chunk_id for c in engine.query([kb], q, mode=mode).chunks] for q in QUESTIONS for mode in MODES]


@pytest.mark.parametrize("graph", [True, False], ids=["graph", "chunks only"])
def test_a_new_process_builds_nothing_for_its_first_question(
        settings: Settings, monkeypatch: pytest.MonkeyPatch, everything_persisted: None, graph: bool) -> None:
    settings = settings.replace(store="sqlite")  # the structures are the embedded store's
    modes = MODES if graph else ["naive"]
    with Engine.open(settings) as engine:
        engine.create_kb("lore", graph=GraphConfig(enabled=graph, method="nlp"))
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR])
        assert not engine.store._vectors and not engine.store._postings  # the indexer keeps none in memory
    index_dir = Path(f"{settings.data_dir}/store.db.indexes")
    assert list(index_dir.glob("*/*-g*")), "nothing was written to disk"

    ppr_graph.clear_cache()
    built = no_build(monkeypatch)
    with Engine.open(settings) as engine:  # a new process, in effect
        for question in QUESTIONS:
            for mode in modes:
                assert engine.query(["lore"], question, mode=mode).chunks
    assert not built


def test_prepared_structures_answer_as_built_ones(settings: Settings, everything_persisted: None) -> None:
    settings = settings.replace(store="sqlite")
    with Engine.open(settings) as engine:
        engine.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp"))
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR])
    ppr_graph.clear_cache()
    with Engine.open(settings) as engine:
        prepared = answers(engine, "lore")
        engine.store._index_files = None  # built from the rows, in memory
        engine.store._vectors.clear()
        engine.store._postings.clear()
        ppr_graph.clear_cache()
        assert answers(engine, "lore") == prepared
