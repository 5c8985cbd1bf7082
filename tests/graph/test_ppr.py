"""Personalized PageRank for the ppr retrieval mode."""

from __future__ import annotations

import random

import pytest

from kbgraph.graph.ppr import SparseGraph, personalized_pagerank, ppr_vector


def chain_graph() -> SparseGraph:
    # seed - a - b - c - d - e, plus a distractor cluster joined to e only
    edges = [("seed", "a", 1.0), ("a", "b", 1.0), ("b", "c", 1.0), ("c", "d", 1.0), ("d", "e", 1.0),
             ("e", "x1", 1.0), ("x1", "x2", 1.0), ("x2", "x3", 1.0), ("x3", "x1", 1.0)]
    return SparseGraph.from_edges(["lonely"], edges)


def test_sparse_graph_is_row_normalized() -> None:
    graph = chain_graph()
    sums = graph.matrix.row_sums()
    for name, total in zip(graph.nodes, sums):
        assert total == pytest.approx(0.0 if name == "lonely" else 1.0)
    assert graph.nodes == sorted(graph.nodes)
    assert graph.index["seed"] == graph.nodes.index("seed")


def test_mass_concentrates_near_seeds_and_reaches_two_hops() -> None:
    scores = personalized_pagerank(chain_graph(), {"seed": 1.0}, top_k=None)
    order = list(scores)
    assert order[:3] == ["seed", "a", "b"]
    assert scores["b"] > 0  # two hops away
    assert scores["a"] > scores["b"] > scores["c"] > scores["d"]
    assert "lonely" not in scores
    assert sum(scores.values()) == pytest.approx(1.0)


def test_two_seeds_favour_the_node_between_them() -> None:
    edges = [("s1", "mid", 1.0), ("s2", "mid", 1.0), ("s1", "side1", 1.0), ("s2", "side2", 1.0),
             ("side1", "far1", 1.0), ("side2", "far2", 1.0)]
    scores = personalized_pagerank(SparseGraph.from_edges([], edges), {"s1": 1.0, "s2": 1.0}, top_k=None)
    others = {k: v for k, v in scores.items() if k not in {"s1", "s2"}}
    assert max(others, key=others.__getitem__) == "mid"


def test_unknown_seeds_and_dangling_seed() -> None:
    graph = chain_graph()
    assert personalized_pagerank(graph, {"nope": 1.0}) == {}
    assert personalized_pagerank(graph, {}) == {}
    # an isolated seed keeps all its mass instead of leaking it
    assert personalized_pagerank(graph, {"lonely": 1.0}) == {"lonely": pytest.approx(1.0)}


def test_top_k_and_damping() -> None:
    graph = chain_graph()
    top = personalized_pagerank(graph, {"seed": 1.0}, top_k=2)
    assert list(top) == ["seed", "a"]
    tight = ppr_vector(graph, {"seed": 1.0}, damping=0.5)
    loose = ppr_vector(graph, {"seed": 1.0}, damping=0.85)
    far = graph.index["e"]
    assert loose[far] > tight[far]


def test_large_graph_ppr_returns_top_k() -> None:
    rng = random.Random(0)
    n = 100_000
    nodes = [f"e{i}" for i in range(n)]
    edges = [(nodes[rng.randrange(n)], nodes[rng.randrange(n)], rng.random() * 5) for _ in range(300_000)]
    graph = SparseGraph.from_edges(nodes, edges)
    for _ in range(15):
        seeds = {nodes[rng.randrange(n)]: 1.0 for _ in range(5)}
        result = personalized_pagerank(graph, seeds, top_k=100)
        assert len(result) == 100
