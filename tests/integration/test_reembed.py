"""A knowledge base keeps the embedding model it was indexed with, and `kb reembed` moves it to another."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kbgraph.engine import Engine, KBGraphError
from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.meta.schemas import GraphConfig
from kbgraph.index.reembed import ROW_KINDS
from kbgraph.store.base import eq, missing, vector_field

QUESTION = "Who founded the Lumen Cartographers Guild?"


def index_sample(settings: Settings, name: str) -> None:
    with Engine.open(settings) as engine:
        engine.create_kb(name, graph=GraphConfig(enabled=True, method="nlp", community=True))
        engine.index_paths(name, [SAMPLE_CORPUS_DIR])


def ranked(settings: Settings, name: str, mode: str) -> list[str]:
    with Engine.open(settings) as engine:
        return [c.chunk_id for c in engine.query([name], QUESTION, mode=mode).chunks]


@pytest.mark.slow
def test_kb_keeps_its_model_then_reembeds_to_the_configured_one(settings: Settings) -> None:
    old, new = settings.replace(embedding_dim=64), settings.replace(embedding_dim=32)
    index_sample(old, "lore")
    before = {mode: ranked(old, "lore", mode) for mode in ("naive", "kg")}

    # the configured model changed: the knowledge base still answers with the model it was indexed with
    assert {mode: ranked(new, "lore", mode) for mode in before} == before

    with Engine.open(new) as engine:
        seen: list[str] = []
        changed = engine.reembed_kb("lore", progress=lambda p: seen.append(p.phase))
        kb = engine.kb("lore")
        assert kb.embedding_model == "hash-32"
        rows = engine.store.count(engine.tenant, [kb.id], [missing("knowledge_graph_kwd")])
        with_vectors = [d for d in engine.store.scan(engine.tenant, [kb.id], fields=["id", vector_field(32)])
                        if d.get(vector_field(32)) is not None]
        assert changed == len(with_vectors) > rows  # chunks and graph rows alike
        assert {"reembed chunks", "reembed entities", "reembed relations", "reembed reports"} <= set(seen)



@pytest.mark.parametrize(("relation_vectors", "entity_vectors"), [("text", "text"), ("chunks", "chunk")])
def test_reembedded_vectors_equal_fresh_indexing(settings: Settings, relation_vectors: str,
                                                 entity_vectors: str) -> None:
    # every vector re-embedding writes is the one indexing with the new model writes for that row
    # (a relation's from its chunks' new vectors, where relation vectors are made from chunks; a
    # single-chunk entity's from its chunk's new vector and its name's, where entity vectors are)
    settings = settings.replace(relation_vectors=relation_vectors, entity_vectors=entity_vectors)
    old, new = settings.replace(embedding_dim=64), settings.replace(embedding_dim=32)
    index_sample(old, "lore")
    index_sample(new, "fresh")
    field = vector_field(32)
    with Engine.open(new) as engine:
        engine.reembed_kb("lore")

        def vectors(name: str) -> dict[tuple[str, str], np.ndarray]:
            kb = engine.kb(name)
            rows = [(kind, doc) for kind in ROW_KINDS for doc in engine.store.scan(engine.tenant, [kb.id], kind.where)]
            stored = {d["id"]: d[field] for d in engine.store.get(engine.tenant, [kb.id], [d["id"] for _, d in rows],
                                                                   fields=["id", field])}
            return {(kind.name, kind.text(doc)): np.asarray(stored[doc["id"]], dtype=np.float32) for kind, doc in rows}

        got, want = vectors("lore"), vectors("fresh")
        assert got.keys() == want.keys() and len(got) > 50
        assert all(np.allclose(got[k], want[k], atol=1e-5) for k in want)
        marks = {doc["embedded_int"] for doc in engine.store.scan(
            engine.tenant, [engine.kb("lore").id], [eq("knowledge_graph_kwd", "entity")], fields=["embedded_int"])}
        assert marks == ({1, 2} if entity_vectors == "chunk" else {1})


def test_unknown_model_names_the_way_out(settings: Settings) -> None:
    index_sample(settings, "lore")
    with Engine.open(settings) as engine:
        engine.meta.update_kb(engine.tenant, engine.kb("lore").id, embedding_model="all-MiniLM-L6-v2")
    with Engine.open(settings) as engine, pytest.raises(KBGraphError, match="kbgraph kb reembed lore"):
        engine.query(["lore"], QUESTION, mode="naive")


def test_cli_reembed(settings: Settings, tmp_path: Path) -> None:
    index_sample(settings, "lore")
    env = {"KBGRAPH_DATA_DIR": str(settings.data_dir), "KBGRAPH_EMBEDDING_PROVIDER": "hash",
           "KBGRAPH_EMBEDDING_DIM": "16", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "kbgraph.cli", "kb", "reembed", "lore"], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "hash-64 -> hash-16" in done.stdout
