"""A seed counts as one of the question's anchors by a ramp of its score, not by a cut.

The stores' BM25 differs (Lucene keeps field lengths in one byte, and counts rewritten rows until
merges drop them: kbgraph.store.base), so the same entity seeded at 0.5014 on Elasticsearch and
0.4994 on SQLite. At a cut of 0.5 it was an anchor on one store only and its final score was 0.52
against 0.26; scores either side of the cut must now give nearly the same ranking, and the same cut
(a ramp with both ends at 0.5) must still show the jump, or these tests prove nothing. A seed near 0
must likewise change the expansion as little as its score (the last test).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kbgraph.graph.ppr import SparseGraph
from kbgraph.search.kg.expand import expand
from kbgraph.search.kg.facts import ranked_facts
from kbgraph.search.kg.params import KGParams
from kbgraph.search.kg.retrieval import retrieve_kg
from kbgraph.search.kg.scoring import ramp
from kbgraph.search.kg.seeds import Seeds, seed_entities
from kbgraph.search.ppr_graph import EntityGraph, chunk_node, clear_cache, entity_node
from kbgraph.search.ppr_search import PPRParams, chunk_scores, ppr_seeds, retrieve_ppr, top_entities
from kbgraph.search.query_analysis import QueryAnalysis
from kbgraph.store.records import Relation
from kbgraph.store.sqlite import SQLiteStore

from . import EMBEDDER, KB, TENANT, cid, toy_kb

BELOW, ABOVE = 0.4994, 0.5014  # the seed score of 南屿港 on SQLite and on Elasticsearch
CUT = PPRParams(seed_low=0.5, seed_high=0.5)
NEARLY = 0.01  # what the two may differ by (test_es_matches_sqlite's tolerance for entity scores)


def test_ramp_rises_linearly_between_its_ends() -> None:
    assert [ramp(s, 0.4, 0.6) for s in (0.3, 0.4, 0.45, 0.5, 0.6, 0.9)] == pytest.approx([0, 0, 0.25, 0.5, 1, 1])
    assert (ramp(BELOW, 0.5, 0.5), ramp(ABOVE, 0.5, 0.5)) == (0.0, 1.0)  # both ends together: a cut


# a question naming a firm (its own entity, exact match) and a harbour its name search also found:
# the harbour is the seed near the cut
FIRM, HARBOUR, FOUNDER, CITY = (("kb", k) for k in ("firm", "harbour", "founder", "city"))
CHUNKS = {"c-firm": [FIRM, FOUNDER], "c-harbour": [HARBOUR, CITY], "c-founder": [FOUNDER, CITY],
          "c-city": [CITY], "c-other": [CITY]}


def walk_graph() -> EntityGraph:
    nodes = [entity_node(*n) for n in (FIRM, HARBOUR, FOUNDER, CITY)]
    edges = [(entity_node(*e), chunk_node(c), 1.0) for c, ents in CHUNKS.items() for e in ents]
    edges += [(entity_node(*FIRM), entity_node(*HARBOUR), 1.0), (entity_node(*FIRM), entity_node(*FOUNDER), 2.0)]
    graph = SparseGraph.from_edges(nodes, edges, hubs_first=True, dtype=np.float32)
    chunk_ids = sorted(CHUNKS)
    mentions = {entity_node(*e): sum(e in ents for ents in CHUNKS.values()) for e in (FIRM, HARBOUR, FOUNDER, CITY)}
    return EntityGraph(versions=(), graph=graph, chunk_nodes=np.array([graph.index[chunk_node(c)] for c in chunk_ids]),
                       chunk_ids=chunk_ids, chunk_index={c: i for i, c in enumerate(chunk_ids)}, mentions=mentions,
                       entity_nodes=np.array([graph.index[n] for n in sorted(mentions)]))


def walked(harbour: float, params: PPRParams) -> dict[str, float]:
    """Entity (normalized walk mass) and chunk scores of the walk, the harbour seeded at ``harbour``."""
    graph = walk_graph()
    seeds = Seeds(scores={FIRM: 1.0, HARBOUR: harbour, CITY: 0.3}, docs={}, anchored={FIRM, HARBOUR})
    restart, confidence = ppr_seeds(seeds, graph, params)
    chunks, walk = chunk_scores(graph, restart, [], params, confidence)
    entities = top_entities(graph, walk, 10)
    top = max(entities.values())
    return {**{key: mass / top for (_, key), mass in entities.items()}, **chunks}


def largest_difference(a: dict[str, float], b: dict[str, float]) -> float:
    return max(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def test_a_seed_either_side_of_half_moves_the_walk_a_little() -> None:
    assert largest_difference(walked(BELOW, PPRParams()), walked(ABOVE, PPRParams())) < NEARLY
    assert largest_difference(walked(BELOW, CUT), walked(ABOVE, CUT)) > 0.1


def test_a_seed_at_the_ramps_low_end_leaves_the_walk_as_without_it() -> None:
    params = PPRParams()
    alone = walked(0.0, params)
    assert largest_difference(walked(params.seed_low, params), alone) == pytest.approx(0.0, abs=1e-6)
    assert largest_difference(walked(params.seed_low + 1e-4, params), alone) < 1e-3


def test_only_seed_at_the_ramps_low_end_hands_the_walk_to_the_naive_hits() -> None:
    graph = walk_graph()
    seeds = Seeds(scores={HARBOUR: 0.4001}, docs={}, anchored={HARBOUR})
    restart, confidence = ppr_seeds(seeds, graph, PPRParams())
    assert restart and confidence == pytest.approx(0.0005)  # seeds, but carries almost no restart mass


QUESTION = "What is the emblem of the guild founded by Mira Castell?"
# Mira Castell matches exactly (so the loose weight stays put); the name search of "Lumen heron"
# finds the silver heron at about 0.50 (hash embedder): a seed at the middle of the ramp
ANALYSIS = QueryAnalysis(QUESTION, ["Mira Castell", "Lumen heron"], ["emblem", "guild", "founded"], "nlp")


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    s = toy_kb(tmp_path)
    yield s
    s.close()


def answers(store, centre: float, kg_half: float, ppr_half: float) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Every score kg and ppr give with their ramps centred at ``centre``, ``kg_half`` and ``ppr_half``
    wide either side (a cut at 0)."""
    vector = EMBEDDER.embed([QUESTION])[0]
    kg = KGParams(anchor_low=centre - kg_half, anchor_high=centre + kg_half)
    found = retrieve_kg(store, TENANT, [KB], ANALYSIS, vector, kg, EMBEDDER)
    clear_cache()
    walk = retrieve_ppr(store, TENANT, [KB], ANALYSIS, vector, [],
                        PPRParams(seed_low=centre - ppr_half, seed_high=centre + ppr_half, kg=kg), EMBEDDER)
    return {**{f"kg entity {e.key}": e.score for e in found.entities},
            **{f"kg relation {r.id}": r.score for r in found.relations},
            **{f"kg chunk {c.chunk_id}": c.score for c in [*found.chunks, *found.bridges]},
            **{f"ppr entity {e.key}": e.score for e in walk.entities},
            **{f"ppr chunk {c.chunk_id}": c.score for c in walk.chunks}}


def test_kg_and_ppr_move_a_little_when_a_seed_crosses_the_ramps_middle(store) -> None:  # type: ignore[no-untyped-def]
    seeds = seed_entities(store, TENANT, [KB], ANALYSIS, EMBEDDER.embed([QUESTION])[0], KGParams(), EMBEDDER)
    heron = seeds.scores[(KB, "silver heron")]
    assert (KB, "silver heron") in seeds.anchored and 0.45 < heron < 0.55
    kg, ppr = KGParams(), PPRParams()
    halves = ((kg.anchor_high - kg.anchor_low) / 2, (ppr.seed_high - ppr.seed_low) / 2)
    # moving a ramp by d is moving the heron's score by -d against it: 0.001 above its middle, then under
    above, below = answers(store, heron - 0.001, *halves), answers(store, heron + 0.001, *halves)
    assert largest_difference(above, below) < NEARLY
    # the same with a cut: the jump the ramp is there to remove
    assert largest_difference(answers(store, heron - 0.001, 0.0, 0.0), answers(store, heron + 0.001, 0.0, 0.0)) > 0.1


def fact(rid: str, src: tuple[str, str], tgt: tuple[str, str]) -> dict:
    return {"id": rid, "kb_id": src[0], "src_key_kwd": src[1], "tgt_key_kwd": tgt[1]}


def test_a_best_fact_of_an_anchor_on_its_ramp_still_sets_the_filters_bar() -> None:
    about = {"founder": (0.9, fact("founder", HARBOUR, FOUNDER)), "product": (0.44, fact("product", FIRM, CITY))}

    def kept(harbour: float) -> set[str]:
        return {doc["id"] for _, doc in ranked_facts(about, {FIRM: 1.0, HARBOUR: harbour}, 3, 0.5, 0.25)}

    # the harbour at 0.8 or in full: the product fact (0.44) stays under half the founder fact (0.9)
    assert kept(1.0) == kept(0.8) == {"founder"}
    assert kept(0.0) == {"product"}  # no harbour: the product fact is the best there is
    # between, the bar falls with the harbour's weight under 0.25 (0.9 x 0.4 = 0.36 at 0.1)
    assert kept(0.3) == {"founder"} and kept(0.1) == {"founder", "product"}


def test_a_seed_too_weak_to_lead_the_first_hop_leads_the_next_as_a_non_seed_would(tmp_path: Path) -> None:
    """A loose match at the edge of one store's candidate window seeded 港口城市 at 0.009 on SQLite
    and not at all on Elasticsearch; reached at the first hop either way, it led the second only on
    Elasticsearch, and 西海 and 白茶 behind it scored 0.06 apart."""
    store = SQLiteStore(tmp_path / "hops.db")
    store.ensure_index(TENANT)
    pairs = [("firm", "harbour", 1.0), ("firm", "founder", 2.0), ("harbour", "city", 1.0), ("city", "tea", 1.0)]
    store.upsert(TENANT, KB, [Relation(kb_id=KB, src_key=a, tgt_key=b, src_name=a, tgt_name=b, description=f"{a} {b}",
                                       description_tokens=f"{a} {b}", weight=w, chunk_ids=[cid(a)]).to_doc()
                              for a, b, w in pairs])
    params = KGParams(hops=3)

    def scores(harbour: float) -> dict[str, float]:
        seeds = {(KB, "firm"): 1.0, **({(KB, "harbour"): harbour} if harbour else {})}
        return {key: score for (_, key), score in expand(store, TENANT, [KB], seeds, params)[0].items()}

    alone = scores(0.0)
    assert alone["city"] > 0.05 and alone["tea"] > 0.01  # the harbour leads on when it is no seed
    assert largest_difference(scores(0.009), alone) < NEARLY
    assert largest_difference(scores(params.min_score / 2), alone) < params.min_score
    store.close()
