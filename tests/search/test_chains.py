"""Passage chains (kbgraph.search.chains): the second hop of a question through an entity two passages
share, followed only on evidence: a start that matches the question, a specific entity, a landing
passage that matches the question on its own; and never ahead of a passage that matches the question."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kbgraph.search.chains import (
    Chain,
    ChainGraph,
    ChainParams,
    NeighbourFn,
    best_chains,
    chain_starts,
    chain_steps,
    described_entities,
    entity_lines,
    naive_cosines,
    place_chains,
    sample_ids,
    with_context,
    z_scores,
)
from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.engine import Engine
from kbgraph.meta.schemas import GraphConfig
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


def entity_number(cites: dict[str, list[str]], entity: str) -> int:
    entities = sorted({e for es in cites.values() for e in es})
    return len(cites) + entities.index(entity)


def hit(cid: str, similarity: float) -> ChunkHit:
    return ChunkHit(chunk_id=cid, kb_id="k", doc_id=cid, doc_name=f"{cid}.txt", content="", position=0,
                    similarity=similarity, vector_similarity=similarity, term_similarity=0.0)


PARAMS = ChainParams()

# "Who was the first president of the society that publishes the Journal of Quiet Rivers?"
CITES = {
    "journal": ["journal of quiet rivers", "brenford society"],  # the question's own passage
    "presidents": ["brenford society", "alma reyes"],  # the answer: never named by the question
    "survey": ["brenford society", "river survey"],  # the society's other page, off the question
    "distractor": ["ostrava archivists", "river survey"],  # repeats "first president" for another society
    "weak": ["river survey"],
}
# naive's order: the journal matches the question; the distractor and the weak page share a word or two
NAIVE = [hit("journal", 0.9), hit("distractor", 0.5), hit("weak", 0.3)]
# each passage's cosine z to the question: the presidents' page matches it on its own (first president)
Z = {"journal": 4.0, "distractor": 2.0, "weak": 0.5, "presidents": 2.5, "survey": -0.5}
SHARES = {h.chunk_id: h.similarity / NAIVE[0].similarity for h in NAIVE}


def chains(cites: dict[str, list[str]] = CITES, params: ChainParams = PARAMS, mentions: dict[str, int] | None = None,
           facts: dict[int, dict[str, float]] | None = None, named: dict[int, float] | None = None,
           z: dict[str, float] = Z, described: set[int] | None = None):  # type: ignore[no-untyped-def]
    graph = graph_of(cites, mentions)
    steps = chain_steps(graph, chain_starts(NAIVE, params), params, named)
    return best_chains(steps, z, SHARES, params, facts, described)


def test_chains_start_only_from_passages_that_match_the_question() -> None:
    assert chain_starts(NAIVE, PARAMS) == ["journal"]
    # the weak page cites the river survey, as does the society's other page: no chain from it
    assert all(c.start == "journal" for c in chains(z={**Z, "survey": 3.0}))
    assert chain_starts(NAIVE, ChainParams(start_share=0.5)) == ["journal", "distractor"]
    assert chain_starts([], PARAMS) == [] and chain_starts([hit("a", 0.0)], PARAMS) == []


def test_a_chain_lands_only_on_a_passage_that_matches_the_question_itself() -> None:
    found = chains()
    # the society's survey page shares the entity but not the question: no chain to it
    assert [c.target for c in found] == ["presidents"]
    assert found[0].evidence == pytest.approx(2.5 - 0.5 * math.log(3))
    assert chains(z={**Z, "presidents": PARAMS.min_z - 0.01}) == []


def test_a_busy_entity_needs_more_evidence_and_a_hub_takes_no_step() -> None:
    # the society cited by 40 passages elsewhere (a busy sender, a list's name): the step costs 1.8 z
    busy = chains(mentions={"brenford society": 40})
    assert busy[0].evidence == pytest.approx(2.5 - 0.5 * math.log(40))
    # through 64 (cost 2.1 z) a page barely matching the question falls under min_evidence
    assert chains(mentions={"brenford society": 64}, z={**Z, "presidents": 1.05}) == []
    assert [c.target for c in chains(mentions={"brenford society": 64}, z={**Z, "presidents": 1.2})] == ["presidents"]
    assert chains(mentions={"brenford society": PARAMS.max_mentions + 1}) == []  # a hub: no step at all


def test_a_fact_of_the_question_carries_a_chain_from_the_passage_stating_it() -> None:
    society = entity_number(CITES, "brenford society")
    # the presidents' page barely matches the question's words, but the journal states the fact
    # "published by the Brenford Society" that the question asks about
    weak = {**Z, "presidents": 0.3}
    assert chains(z=weak) == []
    found = chains(z=weak, facts={society: {"journal": 0.9}})
    # the fact leads to the society's pages; the one matching the question better comes first
    assert [c.target for c in found] == ["presidents", "survey"]
    assert found[0].evidence == pytest.approx(0.3 + 0.9 - 0.5 * math.log(3))
    # a fact far under the best one is no evidence of its own
    assert chains(z=weak, facts={society: {"journal": PARAMS.fact_gate - 0.01}}) == []
    # the same fact stated by another page does not make the journal's step the one the question asks
    assert chains(z=weak, facts={society: {"survey": 0.9}}) == []


def test_no_chain_runs_through_an_entity_the_question_names() -> None:
    society = entity_number(CITES, "brenford society")
    free = chains()[0].evidence
    barely = chains(named={society: 1e-4})[0].evidence
    half = chains(named={society: 0.5})[0].evidence
    assert free - barely < 1e-3 and half == pytest.approx(free - PARAMS.named_cost)
    assert chains(named={society: 1.0}) == []


def test_a_chained_passage_never_pushes_a_passage_that_matches_the_question_down() -> None:
    order = ["journal", "second", "distractor", "weak", "presidents"]
    found = chains()
    # the two passages matching the question keep their places; the chained page comes next, ahead
    # of naive's weaker hits
    assert place_chains(order, ["journal", "second"], found, PARAMS) == \
        ["journal", "second", "presidents", "distractor", "weak"]
    # one naive ranks among the passages matching the question stays where it is
    assert place_chains(["journal", "presidents", "weak"], ["journal", "presidents"], found, PARAMS) == \
        ["journal", "presidents", "weak"]
    # without chains naive's order is untouched
    assert place_chains(order, ["journal"], [], PARAMS) == order


def test_a_chain_along_the_questions_fact_goes_right_after_its_start_within_the_page() -> None:
    society = entity_number(CITES, "brenford society")
    found = chains(facts={society: {"journal": 1.0}})
    assert found[0].target == "presidents" and found[0].along_fact
    # the registry of other societies repeats the question's words and matches it as well as the
    # journal: the page the journal's fact leads to answers what it does not, and goes first
    order = ["journal", "registry", "distractor", "presidents"]
    assert place_chains(order, ["journal", "registry"], found[:1], PARAMS) == \
        ["journal", "presidents", "registry", "distractor"]
    # but no passage matching the question leaves the page for it
    assert place_chains(order, ["journal", "registry"], found[:1], ChainParams(page=2)) == \
        ["journal", "registry", "presidents", "distractor"]
    assert not chains()[0].along_fact


def test_the_best_chain_along_a_fact_leads_with_the_passages_that_match_the_question() -> None:
    society = entity_number(CITES, "brenford society")
    found = chains(facts={society: {"journal": 1.0}})
    second = Chain(start="journal", entity=found[0].entity, target="founding", evidence=found[0].evidence - 1.0,
                   along_fact=True)
    leading: list[str] = []
    placed = place_chains(["journal", "distractor", "weak"], ["journal"], [found[0], second], PARAMS, leading)
    assert placed == ["journal", "presidents", "founding", "distractor", "weak"]
    # the head other graph evidence may not reorder: the matching passage and the best fact's page,
    # not every chain (mix's kg support still competes for the rest of the page)
    assert leading == ["journal", "presidents"]
    leading = []
    place_chains(["journal", "distractor", "weak"], ["journal"], chains(), PARAMS, leading)
    assert leading == ["journal"]  # a chain along no fact leads nothing


def test_only_the_best_chain_along_a_fact_goes_ahead_of_a_passage_that_matches_the_question() -> None:
    society = entity_number(CITES, "brenford society")
    found = chains(facts={society: {"journal": 1.0}})
    second = Chain(start="journal", entity=found[0].entity, target="founding", evidence=found[0].evidence - 1.0,
                   along_fact=True)
    placed = place_chains(["journal", "registry", "distractor"], ["journal", "registry"], [found[0], second], PARAMS)
    assert placed == ["journal", "presidents", "registry", "founding", "distractor"]


def test_at_most_max_chained_passages_go_ahead_of_naives_weaker_hits() -> None:
    cites = {**CITES, "founding": ["brenford society"], "charter": ["brenford society"]}
    found = chains(cites=cites, z={**Z, "founding": 2.0, "charter": 1.5})
    assert [c.target for c in found] == ["presidents", "founding", "charter"]
    placed = place_chains(["journal", "distractor", "weak", "charter"], ["journal"], found, PARAMS)
    assert placed == ["journal", "presidents", "founding", "distractor", "weak", "charter"]


def test_a_start_the_embedder_cannot_tell_from_the_rest_leads_only_along_a_fact() -> None:
    society = entity_number(CITES, "brenford society")
    vague = {**Z, "journal": PARAMS.min_start_z - 0.1}
    assert chains(z=vague) == []
    assert [c.target for c in chains(z=vague, facts={society: {"journal": 1.0}})][:1] == ["presidents"]


def test_the_chunks_read_are_bounded_and_the_most_specific_steps_come_first() -> None:
    cites = {"journal": ["society", "survey"], "a": ["society"], "b": ["survey"], "c": ["survey"]}
    graph = graph_of(cites, mentions={"society": 3, "survey": 50})
    steps = chain_steps(graph, ["journal"], ChainParams(max_reads=1))
    assert [(s.targets) for s in steps] == [["a"]]  # the society (3 citing) before the survey (50)
    assert sum(len(s.targets) for s in chain_steps(graph, ["journal"], ChainParams(max_reads=2))) == 2


def test_z_scores_are_measured_against_the_sample() -> None:
    rng = np.random.default_rng(7)
    sample = rng.normal(size=(64, 8)).astype(np.float32)
    question = rng.normal(size=8).astype(np.float32)
    z, spread = z_scores(sample, question, sample)
    assert z.mean() == pytest.approx(0.0, abs=1e-6) and z.std() == pytest.approx(1.0, abs=1e-5)
    assert 0.0 < spread < 1.0
    # scaling a vector does not change its cosine
    assert z_scores(sample[:3] * 5.0, question * 2.0, sample)[0] == pytest.approx(z[:3], abs=1e-5)


def test_the_sample_is_an_even_spread() -> None:
    ids = [f"c{i:03d}" for i in range(100)]
    assert sample_ids(ids, 4) == ["c000", "c025", "c050", "c075"]
    assert sample_ids(ids[:3], 4) == ids[:3]


def test_a_cosine_naive_measured_is_read_back_from_its_rescaled_score() -> None:
    floor = 0.5
    measured = ChunkHit(chunk_id="c", kb_id="k", doc_id="d", doc_name="c.txt", content="", position=0,
                        similarity=0.5, vector_similarity=(0.96 - floor) / (1 - floor), term_similarity=0.25)
    assert naive_cosines([measured], floor) == {"c": pytest.approx(0.96)}
    # a hit naive scored 0 lay at or below the floor: its cosine is unknown, its vector is read
    assert naive_cosines([ChunkHit(**{**measured.__dict__, "vector_similarity": 0.0})], floor) == {}


def test_graph_evidence_orders_what_follows_the_passages_that_match_the_question() -> None:
    from kbgraph.search.context import RetrievedChunk
    from kbgraph.search.retrieve import leading

    def chunk(cid: str) -> RetrievedChunk:
        return RetrievedChunk(chunk_id=cid, kb_id="k", doc_id=cid, doc_name=cid, content="", position=0, score=0.0)

    # the kg mode's fused ranking put a graph-supported page first: the matching passages go back on top
    fused = [chunk(c) for c in ("hub page", "second", "journal", "bridge")]
    assert [c.chunk_id for c in leading(fused, ["journal", "second"])] == ["journal", "second", "hub page", "bridge"]
    assert [c.chunk_id for c in leading(fused, [])] == ["hub page", "second", "journal", "bridge"]


def test_a_step_through_an_entity_the_question_describes_weighs_more() -> None:
    # "Who was the first president of the society that publishes the Journal of Quiet Rivers?": the
    # question calls the Brenford Society "the society" without naming it
    society = entity_number(CITES, "brenford society")
    plain = chains()[0].evidence
    assert chains(described={society})[0].evidence == pytest.approx(plain + PARAMS.described_bonus)
    # the described bridge's passage goes ahead of one a better-matching passage reaches otherwise
    two = {**CITES, "journal": [*CITES["journal"], "river survey"], "survey": ["river survey"]}
    z = {**Z, "survey": 2.9, "presidents": 2.5}
    assert chains(cites=two, z=z, mentions={"river survey": 3})[0].target == "survey"
    assert chains(cites=two, z=z, mentions={"river survey": 3}, described={society})[0].target == "presidents"


def test_the_entities_a_question_describes_are_read_from_its_own_words() -> None:
    steps = chain_steps(graph_of(CITES), ["journal"], PARAMS)
    society, journal = entity_number(CITES, "brenford society"), entity_number(CITES, "journal of quiet rivers")
    names = {society: "brenford society", journal: "journal of quiet rivers"}
    # "society" is the question's own word; "journal" and "river" belong to the name it gives
    assert described_entities(steps, names, {"societi", "first", "presid"} | {"society"}) == {society}
    assert described_entities(steps, names, set()) == set()
    # a Chinese name is one token to the segmenter: the question's word is read inside it
    chinese = {society: "中国空间技术研究院", journal: "鑫诺二号通信卫星"}
    assert described_entities(steps, chinese, {"研究院", "领导", "造"}) == {society}
    assert described_entities(steps, chinese, {"造", "归"}) == set()  # single characters describe nothing


def test_a_query_hands_the_chains_the_entities_its_question_describes(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbgraph.search import ppr_search

    seen: list[set[int]] = []
    original = ppr_search.best_chains

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(set(args[5] if len(args) > 5 else kwargs.get("described") or set()))
        return original(*args, **kwargs)

    monkeypatch.setattr(ppr_search, "best_chains", spy)
    with Engine.open(settings) as engine:
        engine.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp"))
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR])
        kb_id = engine.kb("lore").id
        # "guild" is the question's own word; the guilds the sample corpus names are steps of its chains
        engine.query(["lore"], "Which guild publishes a yearly atlas that captains carry on board?", mode="ppr")
        graph = ppr_search.entity_graph(engine.store, engine.tenant, [kb_id])
    names = {graph.graph.nodes[n].split("\x1f", 2)[2] for found in seen for n in found}
    assert names and all("guild" in name for name in names)


def test_an_entitys_lines_are_those_that_mention_it_as_a_word() -> None:
    log = ("[23:35] <guillaume> I'm having trouble with Rhythmbox\n[23:35] <brandano> only 60hz here\n"
           "[23:36] <Fryguy--> Guillaume: check your sound setup\n[23:37] <guillaumette> hi")
    assert entity_lines(log, "guillaume") == ("[23:35] <guillaume> I'm having trouble with Rhythmbox "
                                              "[23:36] <Fryguy--> Guillaume: check your sound setup")
    prose = "Alma Reyes led the society. She was born in Lima. Reyes wrote two books."
    assert entity_lines(prose, "alma reyes") == "Alma Reyes led the society."
    assert entity_lines("鑫诺二号由中国空间技术研究院研制。它于1998年发射。", "中国空间技术研究院") == "鑫诺二号由中国空间技术研究院研制。"
    assert entity_lines(prose, "") == ""


# "What sound hardware did the person whose tracks would not play find in their laptop?"
CONTEXT_TEXTS = {
    "start": "<guillaume> my tracks load but would not play\n<eric> anyone know glibc?",
    "laptop": "<guillaume> I got Intel HD sound, it is a two year old laptop\n<eric> thanks",
    "again": "<guillaume> the tracks still would not play\n<eric> the laptop fan is loud",
    "other": "<eric> anyone seen my cat?\n<bob> my laptop has Intel HD sound too",
}
WORDS = {"sound", "hardwar", "person", "track", "play", "find", "laptop"}


def test_a_chain_whose_target_says_of_the_entity_what_its_start_left_open_weighs_more() -> None:
    guillaume, eric = 1, 2
    names = {guillaume: "guillaume", eric: "eric"}
    found = [Chain("start", guillaume, "again", 1.8), Chain("start", eric, "other", 1.7),
             Chain("start", guillaume, "laptop", 1.6)]
    ranked = with_context(found, CONTEXT_TEXTS, names, WORDS, PARAMS)
    # what guillaume says in "laptop" answers the open part; "again" repeats the start, and the laptop
    # in "again" and "other" is not said of the entity the chain steps through
    assert [c.target for c in ranked] == ["laptop", "again", "other"]
    by_target = {c.target: c.evidence for c in ranked}
    assert by_target["again"] == 1.8 and by_target["other"] == 1.7
    assert with_context(found, CONTEXT_TEXTS, names, WORDS, ChainParams(context_weight=0.0)) == found
    assert with_context(found, CONTEXT_TEXTS, names, set(), PARAMS) == found


def test_a_query_weighs_its_chains_by_the_texts_of_their_passages(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbgraph.search import ppr_search

    seen: list[tuple[list[Chain], dict[str, str]]] = []
    original = ppr_search.with_context

    def spy(found, texts, names, words, params):  # type: ignore[no-untyped-def]
        seen.append((list(found), dict(texts)))
        return original(found, texts, names, words, params)

    monkeypatch.setattr(ppr_search, "with_context", spy)
    with Engine.open(settings) as engine:
        engine.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp"))
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR])
        result = engine.query(["lore"], "Which comet was discovered at the observatory funded by the Brightwater Trading "
                                             "Company?", mode="ppr")
    assert seen, "no chain was weighed by its passages' texts"
    for found, texts in seen:
        assert len(found) <= PARAMS.context_top
        assert all(texts.get(c.target) and texts.get(c.start) for c in found)
    # the rows read for them serve the ranking: every chunk shown has its text
    assert result.chunks and all(c.content for c in result.chunks)
