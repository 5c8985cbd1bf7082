"""Passage chains (kbgraph.search.chains): the second hop of a question through an entity two passages share."""

from __future__ import annotations

import numpy as np
import pytest

from kbgraph.search.chains import (
    ChainGraph,
    ChainParams,
    NeighbourFn,
    base_scores,
    chain_scores,
    chain_targets,
    sample_ids,
    z_scores,
)
from kbgraph.search.chunks import ChunkHit


def graph_of(cites: dict[str, list[str]], mentions: dict[str, int] | None = None) -> ChainGraph:
    """chunk id -> the entities it cites; an entity's mention count is its number of citing chunks
    unless ``mentions`` says otherwise (an entity cited by chunks outside the example)."""
    chunks = sorted(cites)
    entities = sorted({e for es in cites.values() for e in es})
    number = {name: i for i, name in enumerate(chunks + entities)}
    neighbours: dict[int, set[int]] = {i: set() for i in number.values()}
    for chunk, cited in cites.items():
        for entity in cited:
            neighbours[number[chunk]].add(number[entity])
            neighbours[number[entity]].add(number[chunk])
    indptr = np.cumsum([0] + [len(neighbours[i]) for i in range(len(number))])
    indices = np.array([n for i in range(len(number)) for n in sorted(neighbours[i])], dtype=np.int64)
    counts = np.zeros(len(number), dtype=np.int64)
    for entity in entities:
        counts[number[entity]] = (mentions or {}).get(entity, len(neighbours[number[entity]]))
    return ChainGraph(neighbours=NeighbourFn(indices, indptr), chunk_of_node={number[c]: c for c in chunks},
                      node_of_chunk={c: number[c] for c in chunks}, mentions=counts)


def entity_number(graph: ChainGraph, cites: dict[str, list[str]], entity: str) -> int:
    entities = sorted({e for es in cites.values() for e in es})
    return len(cites) + entities.index(entity)


PARAMS = ChainParams(first=2, lead=1.0, step=1.0, specificity=0.5, fit=0.3, fact_bonus=1.0)

# "Who was the first president of the society that publishes the Journal of Quiet Rivers?"
CITES = {
    "journal": ["journal of quiet rivers", "brenford society"],  # the question's own passage
    "presidents": ["brenford society", "alma reyes"],  # the answer: never named by the question
    "survey": ["brenford society", "river survey"],  # the society's other page
    "distractor": ["ostrava archivists"],  # repeats "first president" for another society
    "weak": ["river survey"],
}
BASE = {"journal": 4.0, "distractor": 2.0, "presidents": 1.0, "survey": 0.0, "weak": 0.5}


def test_the_second_hop_joins_right_after_the_passage_that_leads_to_it() -> None:
    graph = graph_of(CITES)
    final, chained = chain_scores(graph, BASE, PARAMS)
    ranked = sorted(final, key=lambda c: -final[c])
    # 4.0 - 1 - 0.5 ln 3 = 2.45 > the distractor's 2.0: the society's page that fits the question
    assert ranked[:2] == ["journal", "presidents"]
    assert final["presidents"] == pytest.approx(4.0 - 1.0 - 0.5 * np.log(3))
    assert "presidents" in chained and "journal" not in chained
    # the passages of the question keep their own scores
    assert final["journal"] == BASE["journal"] and final["distractor"] == BASE["distractor"]


def test_among_the_entitys_passages_the_one_fitting_the_question_takes_the_chain() -> None:
    final, _ = chain_scores(graph_of(CITES), BASE, PARAMS)
    # the survey page is reached through the same entity but matches the rest of the question less
    assert final["survey"] == pytest.approx(final["presidents"] + PARAMS.fit * (BASE["survey"] - BASE["presidents"]))
    assert final["survey"] < final["presidents"]


def test_a_hub_starts_no_chain() -> None:
    # the society cited by hundreds of pages elsewhere: no chain through it, the ranking is the base's
    graph = graph_of(CITES, mentions={"brenford society": PARAMS.max_mentions + 1})
    final, chained = chain_scores(graph, BASE, PARAMS)
    assert final == BASE and not chained
    assert chain_targets(graph, BASE, PARAMS) == set()
    assert chain_targets(graph_of(CITES), BASE, PARAMS) == {"presidents", "survey"}


def test_a_more_cited_entity_leads_less_far() -> None:
    specific, _ = chain_scores(graph_of(CITES), BASE, PARAMS)
    common, _ = chain_scores(graph_of(CITES, mentions={"brenford society": 40}), BASE, PARAMS)
    assert common["presidents"] == pytest.approx(specific["presidents"] - 0.5 * (np.log(40) - np.log(3)))
    assert common["presidents"] < BASE["distractor"] < specific["presidents"]


def test_a_fact_of_the_question_strengthens_the_chain_from_the_passage_stating_it() -> None:
    graph = graph_of(CITES, mentions={"brenford society": 40})
    society = entity_number(graph, CITES, "brenford society")
    plain, _ = chain_scores(graph, BASE, PARAMS)
    final, _ = chain_scores(graph, BASE, PARAMS, facts={society: {"journal": 0.9}})
    assert final["presidents"] == pytest.approx(plain["presidents"] + 0.9 * PARAMS.fact_bonus)
    assert final["presidents"] > BASE["distractor"]
    # the same fact stated by another page does not make the journal's step the one the question asks
    elsewhere, _ = chain_scores(graph, BASE, PARAMS, facts={society: {"survey": 0.9}})
    assert elsewhere == plain


def test_chains_start_from_the_best_passages_only() -> None:
    # with one starting passage (the journal), the weak passage's river survey leads nowhere
    final, _ = chain_scores(graph_of(CITES), BASE, ChainParams(first=1))
    assert set(chain_targets(graph_of(CITES), BASE, ChainParams(first=1))) == {"presidents", "survey"}
    assert final["weak"] == BASE["weak"]


def test_z_scores_are_measured_against_the_sample() -> None:
    rng = np.random.default_rng(7)
    sample = rng.normal(size=(64, 8)).astype(np.float32)
    question = rng.normal(size=8).astype(np.float32)
    z, spread = z_scores(sample, question, sample)
    assert z.mean() == pytest.approx(0.0, abs=1e-6) and z.std() == pytest.approx(1.0, abs=1e-5)
    assert 0.0 < spread < 1.0
    # scaling a vector does not change its cosine
    assert z_scores(sample[:3] * 5.0, question * 2.0, sample)[0] == pytest.approx(z[:3], abs=1e-5)


def test_full_text_counts_as_naive_search_weighs_it() -> None:
    vectors = {"a": np.array([1.0, 0.0], dtype=np.float32), "b": np.array([0.0, 1.0], dtype=np.float32)}
    sample = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)  # cosines 1 and 0: mean 0.5, spread 0.5
    hits = [ChunkHit(chunk_id="b", kb_id="k", doc_id="d", doc_name="b.txt", content="", position=0,
                     similarity=0.5, vector_similarity=0.0, term_similarity=1.0)]
    question = np.array([1.0, 0.0], dtype=np.float32)
    whole = ChainParams(text_share=1.0)
    text_led = base_scores(vectors, question, sample, hits, whole, vector_weight=0.3)
    vector_led = base_scores(vectors, question, sample, hits, whole, vector_weight=0.7)
    assert text_led["a"] == vector_led["a"] == pytest.approx(1.0)  # no full-text score: the z alone
    # one unit of full text is worth (1 - w) / w units of cosine, 1 / spread z units each
    assert text_led["b"] == pytest.approx(-1.0 + (0.7 / 0.3) / 0.5)
    assert vector_led["b"] == pytest.approx(-1.0 + (0.3 / 0.7) / 0.5)
    # naive rescales cosines from the embedder's floor: a cosine unit is worth more there
    floored = base_scores(vectors, question, sample, hits, whole, vector_weight=0.7, floor=0.5)
    assert floored["b"] == pytest.approx(-1.0 + (0.3 / 0.7) * 0.5 / 0.5)
    half = base_scores(vectors, question, sample, hits, ChainParams(text_share=0.5), vector_weight=0.7)
    assert half["b"] == pytest.approx(-1.0 + 0.5 * (0.3 / 0.7) / 0.5)


def test_a_full_text_part_dwarfing_the_cosines_is_scaled_down_with_them() -> None:
    # cosines that spread little (mean 0.99, spread 0.01) and naive weighing the vector at 0.3: one
    # unit of full text would be worth (0.7 / 0.3) / 0.01 = 233 z, and a chain's costs nothing
    question = np.array([1.0, 0.0], dtype=np.float32)
    sample = np.array([[1.0, 0.0], [0.98, np.sqrt(1 - 0.98 ** 2)]], dtype=np.float32)
    level = np.array([0.99, np.sqrt(1 - 0.99 ** 2)], dtype=np.float32)  # the sample's mean cosine: z 0
    vectors = {c: level for c in ("first", "second", "city page")}

    def hit(cid: str, term: float) -> ChunkHit:
        return ChunkHit(chunk_id=cid, kb_id="k", doc_id=cid, doc_name=f"{cid}.txt", content="", position=0,
                        similarity=0.5, vector_similarity=0.0, term_similarity=term)

    hits = [hit("first", 1.0), hit("second", 0.9)]
    capped = base_scores(vectors, question, sample, hits, ChainParams(text_share=1.0), vector_weight=0.3)
    whole = base_scores(vectors, question, sample, hits, ChainParams(text_share=1.0, max_text_z=0),
                        vector_weight=0.3)
    assert whole["first"] == pytest.approx(0.7 / 0.3 / 0.01, rel=1e-3)
    # scaled together: naive's order and ratios stay, one unit of full text is worth max_text_z
    assert capped["first"] == pytest.approx(ChainParams().max_text_z, rel=1e-3)
    assert capped["second"] / capped["first"] == pytest.approx(0.9, rel=1e-3)
    assert sorted(capped, key=lambda c: -capped[c]) == sorted(whole, key=lambda c: -whole[c])
    # a city the first hit names, cited by 40 passages: its page comes right after the first hit
    # unscaled (233 - 1 - 0.5 ln 40 > 210), after naive's second hit once the costs count again
    cites = {"first": ["harbour city"], "city page": ["harbour city"], "second": []}
    graph = graph_of(cites, mentions={"harbour city": 40})
    unscaled, _ = chain_scores(graph, whole, PARAMS)
    scaled, _ = chain_scores(graph, capped, PARAMS)
    assert unscaled["city page"] > unscaled["second"]
    assert scaled["city page"] < scaled["second"]


def test_the_sample_is_an_even_spread() -> None:
    ids = [f"c{i:03d}" for i in range(100)]
    assert sample_ids(ids, 4) == ["c000", "c025", "c050", "c075"]
    assert sample_ids(ids[:3], 4) == ids[:3]


def test_the_chunks_read_are_bounded_and_the_most_promising_come_first() -> None:
    graph = graph_of(CITES, mentions={"brenford society": 3, "river survey": 50})
    # the journal (best start) through the society (3 citing) comes before the weak page's survey entity
    assert chain_targets(graph, BASE, ChainParams(first=5, max_reads=2)) == {"presidents", "survey"}
    assert len(chain_targets(graph, BASE, ChainParams(first=5, max_reads=1))) == 1
    assert chain_targets(graph, BASE, ChainParams(first=5)) >= {"presidents", "survey", "journal"}


def test_a_cosine_naive_measured_scores_as_its_vector_would() -> None:
    from kbgraph.search.chains import naive_cosines

    sample = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
    question = np.array([0.8, 0.6], dtype=np.float32)
    vector = np.array([0.6, 0.8], dtype=np.float32)  # cosine 0.96 to the question
    floor = 0.5
    hit = ChunkHit(chunk_id="c", kb_id="k", doc_id="d", doc_name="c.txt", content="", position=0,
                   similarity=0.5, vector_similarity=(0.96 - floor) / (1 - floor), term_similarity=0.25)
    known = naive_cosines([hit], floor)
    assert known == {"c": pytest.approx(0.96)}
    from_vector = base_scores({"c": vector}, question, sample, [hit], ChainParams(), 0.7, floor)
    from_cosine = base_scores({}, question, sample, [hit], ChainParams(), 0.7, floor, known)
    assert from_cosine["c"] == pytest.approx(from_vector["c"], abs=1e-5)
    # a hit naive scored 0 lay at or below the floor: its cosine is unknown, its vector is read
    assert naive_cosines([ChunkHit(**{**hit.__dict__, "vector_similarity": 0.0})], floor) == {}
