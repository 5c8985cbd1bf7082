"""Global weighted PageRank."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest

from kbgraph.graph.pagerank import weighted_pagerank


def test_sums_to_one_and_ranks_hub_first() -> None:
    edges = [("hub", f"leaf{i}", 1.0) for i in range(8)] + [("leaf0", "leaf1", 1.0)]
    scores = weighted_pagerank(edges, ["hub", "alone"])
    assert sum(scores.values()) == pytest.approx(1.0, abs=1e-12)
    assert max(scores, key=scores.__getitem__) == "hub"
    assert "alone" in scores and scores["alone"] > 0  # isolated nodes are ranked too
    assert set(scores) == {"hub", "alone", *(f"leaf{i}" for i in range(8))}


def exact_pagerank(graph: nx.Graph, damping: float = 0.85) -> dict[str, float]:
    """PageRank solved as a linear system, p = damping * P^T p + (1 - damping) / n (every node has an
    edge): networkx's own nx.pagerank needs scipy, which kbgraph does not install."""
    nodes = list(graph.nodes)
    weights = nx.to_numpy_array(graph, nodelist=nodes, weight="weight")
    transition = weights / weights.sum(axis=1, keepdims=True)
    n = len(nodes)
    scores = np.linalg.solve(np.eye(n) - damping * transition.T, np.full(n, (1 - damping) / n))
    return dict(zip(nodes, scores.tolist()))


def test_matches_the_exact_solution_on_weighted_undirected_graph() -> None:
    rng = random.Random(3)
    edges = [(f"n{rng.randrange(60)}", f"n{rng.randrange(60)}", rng.uniform(0.1, 5)) for _ in range(200)]
    graph = nx.Graph()
    for a, b, w in edges:
        if a != b:
            graph.add_edge(a, b, weight=graph[a][b]["weight"] + w if graph.has_edge(a, b) else w)
    expected = exact_pagerank(graph)
    ours = weighted_pagerank(edges, list(graph.nodes))
    assert max(abs(expected[k] - ours[k]) for k in expected) < 1e-8


def test_weights_matter_and_bad_weights_count_as_one() -> None:
    heavy = weighted_pagerank([("a", "b", 10.0), ("a", "c", 1.0), ("c", "d", 1.0)], [])
    assert heavy["b"] > heavy["d"]
    zero = weighted_pagerank([("a", "b", 0.0), ("b", "c", float("nan"))], [])
    one = weighted_pagerank([("a", "b", 1.0), ("b", "c", 1.0)], [])
    assert zero == pytest.approx(one)


def test_deterministic_and_order_independent() -> None:
    rng = random.Random(5)
    edges = [(f"n{rng.randrange(500)}", f"n{rng.randrange(500)}", rng.random() + 0.1) for _ in range(2000)]
    first = weighted_pagerank(edges, [])
    assert weighted_pagerank(edges, []) == first
    assert weighted_pagerank(list(reversed(edges)), []) == pytest.approx(first, abs=1e-12)


def test_empty_graph() -> None:
    assert weighted_pagerank([], []) == {}
    assert weighted_pagerank([], ["x"]) == {"x": pytest.approx(1.0)}


def test_large_graph_sums_to_one() -> None:
    rng = random.Random(0)
    n = 100_000
    nodes = [f"e{i}" for i in range(n)]
    edges = [(nodes[rng.randrange(n)], nodes[rng.randrange(n)], rng.random() * 5) for _ in range(300_000)]
    scores = weighted_pagerank(edges, nodes)
    assert len(scores) == n and sum(scores.values()) == pytest.approx(1.0)
