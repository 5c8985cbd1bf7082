"""The graph rows' searchable text lives in a field of its own (records.GRAPH_TEXT): BM25 takes its
collection statistics from the whole field, so with the descriptions in the chunks' field a graph
moved every chunk's IDF and naive search ranked differently with the graph on. Rows an older
kbgraph wrote, their text in the chunks' field, are still found by the graph searches."""

from __future__ import annotations

import json

from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR, SAMPLE_QUESTIONS
from kbgraph.engine import Engine
from kbgraph.meta.schemas import GraphConfig
from kbgraph.parse.tokenize import token_string, tokenize_query
from kbgraph.search.kg.rows import kind_search
from kbgraph.store.records import GRAPH_TEXT, LEGACY_GRAPH_TEXT, Entity, graph_text_fields


def _naive(settings: Settings, graph: bool) -> list[list[tuple[str, int, float]]]:
    questions = [q["question"] for q in json.loads(SAMPLE_QUESTIONS.read_text(encoding="utf-8"))]
    with Engine.open(settings) as engine:
        engine.create_kb("lore", graph=GraphConfig(enabled=graph, method="nlp"))
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR])
        return [[(c.doc_name, c.position, round(c.similarity, 9))
                 for c in engine.query(["lore"], q, mode="naive", top_n=8).chunks] for q in questions]


def test_naive_search_ranks_alike_with_the_graph_on_or_off(settings: Settings) -> None:
    # two stores of their own (on Elasticsearch, two index prefixes under the test's own)
    with_graph = _naive(settings.replace(data_dir=settings.data_dir / "graph",
                                         es_index_prefix=settings.es_index_prefix + "graph_"), True)
    without = _naive(settings.replace(data_dir=settings.data_dir / "plain",
                                      es_index_prefix=settings.es_index_prefix + "plain_"), False)
    assert with_graph == without


def test_graph_rows_keep_their_text_out_of_the_chunks_field(settings: Settings) -> None:
    with Engine.open(settings) as engine:
        kb = engine.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp"))
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR])
        rows = list(engine.store.scan(engine.tenant, [kb.id], fields=["knowledge_graph_kwd", GRAPH_TEXT,
                                                                      LEGACY_GRAPH_TEXT]))
    graph_rows = [r for r in rows if r.get("knowledge_graph_kwd") in ("entity", "relation", "community_report")]
    assert graph_rows and all(r.get(GRAPH_TEXT) for r in graph_rows)
    assert not any(r.get(LEGACY_GRAPH_TEXT) for r in graph_rows)
    assert all(r.get(LEGACY_GRAPH_TEXT) for r in rows if r.get("knowledge_graph_kwd") is None)


def test_a_graph_row_an_older_kbgraph_wrote_is_still_found(settings: Settings) -> None:
    with Engine.open(settings) as engine:
        kb = engine.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp"))
        new = Entity(kb_id=kb.id, key="ada", name="Ada", type="person", description="Ada charts the tides",
                     name_tokens="ada", description_tokens=token_string("Ada charts the tides")).to_doc()
        old = Entity(kb_id=kb.id, key="bo", name="Bo", type="person", description="Bo charts the reefs",
                     name_tokens="bo", description_tokens="").to_doc()
        del old[GRAPH_TEXT]
        old[LEGACY_GRAPH_TEXT] = token_string("Bo charts the reefs")
        for row in (new, old):
            row["available_int"] = 1  # the graph refresh makes the rows it wrote searchable
        engine.store.upsert(engine.tenant, kb.id, [new, old])
        hits = kind_search(engine.store, engine.tenant, [kb.id], Entity.KIND, tokenize_query("who charts"),
                           graph_text_fields(), None, 10, 0.0)
        assert {h.doc["entity_key_kwd"] for h in hits} == {"ada", "bo"}
        read = engine.store.get(engine.tenant, [kb.id], [old["id"]])
        assert Entity.from_doc(read[0]).description_tokens == token_string("Bo charts the reefs")
