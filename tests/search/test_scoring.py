"""Scoring of the graph modes on a hand-made graph whose numbers can be worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbgraph.config import Settings
from kbgraph.parse.token_count import count_tokens
from kbgraph.search.chunks import ChunkHit
from kbgraph.search.context import (
    Budget,
    EntityHit,
    RetrievedChunk,
    any_of_scores,
    citation_map,
    entity_row,
    normalize_scores,
    render_context,
    within_budget,
)
from kbgraph.search.kg.expand import expand
from kbgraph.search.kg.params import KGParams
from kbgraph.search.kg.ranking import rank_entities
from kbgraph.search.kg.retrieval import retrieve_kg
from kbgraph.search.kg.rows import fetch_chunks
from kbgraph.search.kg.scoring import chunk_support, hop_factor, name_match
from kbgraph.search.ppr_graph import clear_cache, entity_graph
from kbgraph.search.ppr_search import PPRParams, retrieve_ppr
from kbgraph.search.query_analysis import QueryAnalysis
from kbgraph.search.fusion import FusionParams, fuse_rankings, rank_fusion
from kbgraph.search.retrieve import retrieve
from kbgraph.store.records import GraphMeta

from . import EMBEDDER, KB, TENANT, cid, toy_kb

QUESTION = "What is the emblem of the guild founded by Mira Castell?"
ANALYSIS = QueryAnalysis(QUESTION, ["Mira Castell"], ["emblem", "guild", "founded"], "nlp")


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    s = toy_kb(tmp_path)
    yield s
    s.close()


def test_hop_factor_decays_with_weight() -> None:
    assert hop_factor(2.0, 2.0, 0.5) == pytest.approx(0.5)
    assert hop_factor(1.0, 2.0, 0.5) == pytest.approx(0.375)
    assert hop_factor(0.0, 2.0, 0.5) == pytest.approx(0.25)  # a weightless relation still leads on
    assert hop_factor(5.0, 2.0, 0.5) == pytest.approx(0.5)  # never more than the decay


def test_expansion_decays_per_hop(store) -> None:  # type: ignore[no-untyped-def]
    seeds = {(KB, "mira castell"): 1.0}
    scores, hops, walked = expand(store, TENANT, [KB], seeds, KGParams(hops=2, hop_decay=0.5))
    # mira's relations: guild (w 2, its heaviest) and varrow (w 1)
    assert scores[(KB, "lumen cartographers guild")] == pytest.approx(0.5)
    assert scores[(KB, "varrow")] == pytest.approx(0.375)
    # second hop from the guild (score 0.5): heron over w 1 where the guild's heaviest is 2
    assert scores[(KB, "silver heron")] == pytest.approx(0.5 * 0.375)
    assert (KB, "saltmere") not in scores  # three hops away
    assert hops[(KB, "mira castell")] == 0 and hops[(KB, "varrow")] == 1 and hops[(KB, "silver heron")] == 2
    assert len(walked) == 3
    one_hop, _, _ = expand(store, TENANT, [KB], seeds, KGParams(hops=1))
    assert (KB, "silver heron") not in one_hop


def test_two_seeds_reinforce_their_common_neighbour(store) -> None:  # type: ignore[no-untyped-def]
    scores, _, _ = expand(store, TENANT, [KB], {(KB, "mira castell"): 1.0, (KB, "silver heron"): 1.0},
                          KGParams(hops=1))
    alone, _, _ = expand(store, TENANT, [KB], {(KB, "mira castell"): 1.0}, KGParams(hops=1))
    bridge = (KB, "lumen cartographers guild")
    assert alone[bridge] < scores[bridge] <= 1.0
    assert scores[bridge] == pytest.approx(any_of_scores(0.5, 0.5))  # 0.5 from each side


def test_scores_are_normalized_with_a_small_pagerank_prior() -> None:
    docs = {("kb", k): {"id": k, "kb_id": "kb", "entity_key_kwd": k, "name_kwd": k, "pagerank_flt": pr}
            for k, pr in (("a", 0.4), ("b", 0.1), ("c", 0.0))}
    hits = rank_entities({("kb", "a"): 1.0, ("kb", "b"): 0.9, ("kb", "c"): 0.2}, {}, docs, 0.1)
    assert [h.key for h in hits] == ["a", "b", "c"]
    assert hits[0].score == pytest.approx(1.0)
    assert hits[1].score == pytest.approx(0.9 * 0.9 + 0.1 * 0.25)
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert normalize_scores({"x": 2.0, "y": 1.0}) == {"x": 1.0, "y": 0.5}
    assert normalize_scores({"x": 0.0}) == {"x": 0.0}
    assert any_of_scores() == 0.0 and any_of_scores(1.0, 0.3) == 1.0
    assert name_match(["bubye", "river"], "bubye river") == 1.0
    assert name_match(["river"], "bubye river") == 0.5


def test_chunk_support_prefers_specific_entities() -> None:
    support = chunk_support([(1.0, ["c1"]), (1.0, ["c1", "c2", "c3", "c4", "c5", "c6", "c7"]), (0.5, ["c2"])])
    assert support["c1"] == 1.0  # normalized: the best chunk gets 1
    assert support["c1"] > support["c2"] > support["c3"] > 0
    assert support["c3"] == support["c7"]
    assert chunk_support([(0.0, ["c1"])]) == {}


def test_budget_keeps_leading_rows_that_fit() -> None:
    rows = [EntityHit(id=str(i), kb_id="kb", key=str(i), name=f"E{i}", type="t", description="word " * 20,
                      score=1.0 - i / 10) for i in range(8)]
    cost = count_tokens(entity_row(rows[0]))
    kept = within_budget(rows, entity_row, cost * 3 + 1)
    assert [e.name for e in kept] == ["E0", "E1", "E2"]
    assert within_budget(rows, entity_row, 1) == rows[:1]  # the best row is never dropped for length
    assert within_budget(rows, entity_row, 0) == []


def test_kg_returns_both_hops_with_stable_citations(store) -> None:  # type: ignore[no-untyped-def]
    vector = EMBEDDER.embed([QUESTION])[0]
    first = retrieve_kg(store, TENANT, [KB], ANALYSIS, vector, KGParams(chunk_top_n=3), EMBEDDER)
    again = retrieve_kg(store, TENANT, [KB], ANALYSIS, vector, KGParams(chunk_top_n=3), EMBEDDER)
    ids = [c.chunk_id for c in first.chunks]
    assert {cid("mira"), cid("guild")} <= set(ids[:3])
    assert first.citations == again.citations == {n: c for n, c in enumerate(ids)}
    assert first.context == again.context
    for n, chunk in enumerate(first.chunks):
        assert f"[ID:{n}] {chunk.doc_name}" in first.context
    assert first.entities[0].name == "Mira Castell"
    assert all(0.0 <= x.score <= 1.0 for x in [*first.entities, *first.relations, *first.reports, *first.chunks])
    assert first.reports[0].title == "The Lumen guild and its heron"
    assert "---- Entities ----" in first.context and "---- Relations ----" in first.context


def test_kg_section_budgets_are_enforced(store) -> None:  # type: ignore[no-untyped-def]
    vector = EMBEDDER.embed([QUESTION])[0]
    tight = Budget(entities=1, relations=1, reports=0, chunks=1)
    found = retrieve_kg(store, TENANT, [KB], ANALYSIS, vector, KGParams(budget=tight), EMBEDDER)
    assert len(found.entities) == 1 and len(found.relations) == 1 and found.reports == [] and len(found.chunks) == 1


def test_ppr_finds_the_second_hop_and_caches_the_graph(store) -> None:  # type: ignore[no-untyped-def]
    clear_cache()
    vector = EMBEDDER.embed([QUESTION])[0]
    found = retrieve_ppr(store, TENANT, [KB], ANALYSIS, vector, [], PPRParams(chunk_top_n=2), EMBEDDER)
    assert {c.chunk_id for c in found.chunks} == {cid("mira"), cid("guild")}
    assert found.citations == {0: found.chunks[0].chunk_id, 1: found.chunks[1].chunk_id}
    graph = entity_graph(store, TENANT, [KB])
    assert entity_graph(store, TENANT, [KB]) is graph  # same version: reused
    store.upsert(TENANT, KB, [GraphMeta(kb_id=KB, version=2).to_doc()])
    rebuilt = entity_graph(store, TENANT, [KB])
    assert rebuilt is not graph and rebuilt.versions == ((KB, 2),)


def test_fusion_ranks_agreement_first_and_cuts_weak_graph_support() -> None:
    def hit(name: str, sim: float) -> ChunkHit:
        return ChunkHit(chunk_id=name, kb_id="kb", doc_id=name, doc_name=name, content=name, position=0,
                        similarity=sim, vector_similarity=sim, term_similarity=sim)

    def graph(*scored: tuple[str, float]) -> list[RetrievedChunk]:
        return [RetrievedChunk(chunk_id=n, kb_id="kb", doc_id=n, doc_name=n, content=n, score=s, graph_score=s,
                               sources=["kg"]) for n, s in scored]

    naive = [hit("a", 0.8), hit("b", 0.6), hit("d", 0.5)]
    # b (2nd in both lists) beats a (1st of naive only); c, found by the graph alone, enters after them
    fused = fuse_rankings(naive, [(graph(("c", 1.0), ("b", 0.8)), 1.0)], FusionParams(rrf_k=5.0))
    assert [c.chunk_id for c in fused] == ["b", "a", "c", "d"]
    assert fused[0].sources == ["naive", "kg"] and fused[0].similarity == 0.6 and fused[0].graph_score == 0.8
    assert fused[2].similarity is None and fused[2].sources == ["kg"]
    assert fused[0].score == 1.0 and [c.score for c in fused] == sorted((c.score for c in fused), reverse=True)
    # a graph ranking at a low weight cannot push a naive chunk below one only the graph found
    weak = fuse_rankings(naive, [(graph(("c", 1.0), ("b", 0.8)), 0.25)], FusionParams(rrf_k=5.0))
    assert [c.chunk_id for c in weak] == ["b", "a", "d", "c"]
    # support under the floor (a hub's echo) does not count as a rank
    echo = fuse_rankings(naive, [(graph(("c", 1.0), ("d", 0.05)), 1.25)], FusionParams(rrf_k=5.0, graph_floor=0.1))
    assert [c.chunk_id for c in echo] == ["c", "a", "b", "d"] and echo[3].sources == ["naive", "kg"]


def test_fusion_breaks_ties_by_naive_rank_then_document_not_by_chunk_id() -> None:
    """Chunk ids derive from random document ids: ordering equal fused scores by them gave two builds
    of one corpus different pages. Naive's rank decides, then the graph's, then the document."""
    def hit(cid: str, doc: str) -> ChunkHit:
        return ChunkHit(chunk_id=cid, kb_id="kb", doc_id=doc, doc_name=doc, content=doc, position=0,
                        similarity=0.5, vector_similarity=0.5, term_similarity=0.5)

    def graph(*chunks: tuple[str, str]) -> list[RetrievedChunk]:
        return [RetrievedChunk(chunk_id=c, kb_id="kb", doc_id=d, doc_name=d, content=d, score=1.0, graph_score=1.0,
                               sources=["kg"]) for c, d in chunks]

    # z is naive's first and the graph's second, y the other way round: a tie naive's order breaks
    fused = fuse_rankings([hit("z", "one.txt"), hit("y", "two.txt")], [(graph(("y", "two.txt"), ("z", "one.txt")), 1.0)])
    assert [c.chunk_id for c in fused] == ["z", "y"]
    # two chunks only the graph found, each first of a list of the same weight: the document's name
    fused = fuse_rankings([], [(graph(("q", "b.txt")), 0.5), (graph(("p", "c.txt")), 0.5), (graph(("r", "a.txt")), 0.5)])
    assert [c.chunk_id for c in fused] == ["r", "q", "p"]


def test_graph_chunks_of_equal_score_come_in_their_documents_order(store) -> None:  # type: ignore[no-untyped-def]
    """kg's chunk list cuts ties by the documents' names and places, not by the chunk ids (random per
    build), also at its last place: every chunk tied with it is read before the cut."""
    scores = {cid("salt"): 0.5, cid("heron"): 0.5, cid("mira"): 0.5, cid("guild"): 1.0}
    got = fetch_chunks(store, TENANT, [KB], scores, 3, "kg")
    assert [c.doc_name for c in got] == ["guild.md", "heron.md", "mira.md"]
    assert [c.doc_name for c in fetch_chunks(store, TENANT, [KB], scores, 1, "kg")] == ["guild.md"]
    assert fetch_chunks(store, TENANT, [KB], scores, 0, "kg") == []


def test_rank_fusion_sums_weighted_reciprocal_ranks() -> None:
    fused = rank_fusion([["x", "y"], ["y"]], [1.0, 0.5], k=2.0)
    assert fused == pytest.approx({"x": 1 / 3, "y": 1 / 4 + 0.5 / 3})
    with pytest.raises(ValueError):
        rank_fusion([["x"]], [1.0, 2.0], k=1.0)


@pytest.mark.parametrize("mode", ["naive", "kg", "ppr", "mix"])
def test_every_mode_gives_json_ready_results(store, mode: str) -> None:  # type: ignore[no-untyped-def]
    result = retrieve(store, TENANT, [KB], QUESTION, mode, embedder=EMBEDDER, top_n=3, analysis=ANALYSIS)
    assert result.mode == mode and result.chunks
    assert result.citations == citation_map(result.chunks)
    assert result.context == render_context(result.chunks, result.entities, result.relations, result.reports)
    data = json.loads(json.dumps(result.to_json()))
    assert data["citations"]["0"] == result.chunks[0].chunk_id
    assert {"chunk_id", "doc_id", "doc_name", "content", "score", "similarity"} <= set(data["chunks"][0])
    if mode != "naive":
        assert result.entities


@pytest.mark.parametrize(("provider", "weight"), [("hash", 0.3), ("local", 0.7)])
def test_naive_search_weighs_vectors_by_the_embedders_default(store, provider: str, weight: float) -> None:  # type: ignore[no-untyped-def]
    # the settings name no weight: hybrid search takes the embedder kind's own (the bundled e5 ranks
    # better than BM25, so it weighs more); the toy store's vectors come from the hash embedder either way
    settings = Settings(embedding_provider=provider)
    assert settings.vector_similarity_weight is None
    chunks = retrieve(store, TENANT, [KB], QUESTION, "naive", embedder=EMBEDDER, settings=settings, top_n=3).chunks
    assert chunks and any(c.term_similarity and c.vector_similarity for c in chunks)
    for c in chunks:
        assert c.similarity == pytest.approx((1 - weight) * c.term_similarity + weight * c.vector_similarity, abs=1e-4)
    chosen = retrieve(store, TENANT, [KB], QUESTION, "naive", embedder=EMBEDDER, top_n=3,
                      settings=settings.replace(vector_similarity_weight=1.0)).chunks
    assert all(c.similarity == pytest.approx(c.vector_similarity, abs=1e-4) for c in chosen)


def test_unknown_mode_is_refused(store) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="unknown retrieval mode"):
        retrieve(store, TENANT, [KB], QUESTION, "local", embedder=EMBEDDER)


def test_graph_modes_on_a_kb_without_graph_fall_back_gracefully(tmp_path: Path) -> None:
    from kbgraph.store.sqlite import SQLiteStore

    empty = SQLiteStore(tmp_path / "empty.db")
    empty.ensure_index(TENANT)
    for mode in ("kg", "ppr", "mix"):
        result = retrieve(empty, TENANT, [KB], QUESTION, mode, embedder=EMBEDDER, analysis=ANALYSIS)
        assert result.chunks == [] and result.entities == []
    empty.close()
