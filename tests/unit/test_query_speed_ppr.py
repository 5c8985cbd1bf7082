"""The PPR walk of the `ppr` mode: hub-first numbering and steps from the touched rows change its cost,
not its scores. Checked against a dense power iteration written out here, on random graphs with hubs."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kbgraph.graph.ppr import SparseGraph, personalized_pagerank, ppr_vector
from kbgraph.search.ppr_graph import EntityGraph
from kbgraph.search.ppr_search import top_entities
from kbgraph.utils.top_k import largest

# agreement with the reference: the walks stop at the same step, so only summation order differs
TOLERANCE = 1e-12


def hub_graph(nodes: int, edges: int, seed: int) -> tuple[list[str], list[tuple[str, str, float]]]:
    """A preferential-attachment-like graph with a few isolated nodes and parallel edges."""
    rng = random.Random(seed)
    names = [f"n{i:04d}" for i in range(nodes)]
    ends = [0, 1]
    out = []
    for _ in range(edges):
        a = rng.choice(ends) if rng.random() < 0.7 else rng.randrange(nodes - 3)
        b = rng.randrange(nodes - 3)
        out.append((names[a], names[b], rng.choice([0.0, 1.0, 2.5, 5.0])))
        ends += [a, b]
    return names, out


def dense_ppr(graph: SparseGraph, seeds: dict[str, float], damping: float, tol: float) -> np.ndarray:
    """``ppr_vector`` written out with a dense matrix and whole-graph steps only."""
    n = graph.size
    restart = np.zeros(n)
    for key, weight in seeds.items():
        restart[graph.index[key]] += weight
    restart /= restart.sum()
    matrix = graph.matrix.toarray()
    dangling = matrix.sum(axis=1) == 0
    scores = restart.copy()
    for _ in range(30):
        new = damping * (matrix.T @ scores) + (1.0 - damping + damping * scores[dangling].sum()) * restart
        delta = np.abs(new - scores).sum()
        scores = new
        if delta < tol:
            break
    return scores


@pytest.mark.parametrize("seed", range(6))
def test_walk_matches_a_dense_power_iteration(seed: int) -> None:
    names, edges = hub_graph(400, 900, seed)
    rng = random.Random(seed)
    for hubs_first in (False, True):
        graph = SparseGraph.from_edges(names, edges, hubs_first=hubs_first)
        for seeds in ({names[0]: 1.0}, {names[rng.randrange(400)]: 1.0, names[rng.randrange(400)]: 0.3},
                      {names[-1]: 1.0, names[5]: 1.0}):  # names[-1] has no edges
            got = ppr_vector(graph, seeds, damping=0.5, tol=1e-6)
            want = dense_ppr(graph, seeds, 0.5, 1e-6)
            assert np.abs(got - want).max() < TOLERANCE
            assert got.sum() == pytest.approx(1.0)


def test_walk_in_a_small_component_of_a_large_graph() -> None:
    names, edges = hub_graph(3000, 9000, 11)
    chain = [f"z{i}" for i in range(6)]
    edges += [(a, b, 1.0) for a, b in zip(chain, chain[1:])]
    graph = SparseGraph.from_edges(names + chain, edges, hubs_first=True)
    got = ppr_vector(graph, {"z0": 1.0, "z3": 0.5}, damping=0.5, tol=1e-8)
    want = dense_ppr(graph, {"z0": 1.0, "z3": 0.5}, 0.5, 1e-8)
    assert np.abs(got - want).max() < TOLERANCE
    assert set(np.flatnonzero(got)) == {graph.index[z] for z in chain}  # no mass leaves the chain



@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_step_from_the_nodes_holding_mass_equals_a_whole_step(dtype: type) -> None:
    names, edges = hub_graph(2000, 5000, 3)
    graph = SparseGraph.from_edges(names, edges, hubs_first=True, dtype=dtype)
    rng = np.random.default_rng(3)
    support = np.sort(rng.choice(graph.size, size=40, replace=False))
    scores = np.zeros(graph.size, dtype=dtype)
    scores[support] = rng.random(len(support))
    received, reached = graph.step_from(support, scores)
    whole = graph.transposed @ scores
    assert received.dtype == whole.dtype
    assert np.allclose(received, whole, rtol=1e-6 if dtype == np.float32 else 1e-12, atol=0)
    neighbours = {int(j) for i in support for j in graph.matrix.indices[graph.matrix.indptr[i]:graph.matrix.indptr[i + 1]]}
    assert set(np.flatnonzero(reached).tolist()) == neighbours


@pytest.mark.parametrize("hubs_first", [False, True])
@pytest.mark.parametrize("piece", [7, 32, 1 << 15])
def test_whole_graph_step_equals_the_dense_product(hubs_first: bool, piece: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The numpy product (long rows by reduceat, short rows in blocks of equal length, in pieces)
    against a dense matrix: rows of every length from none to dozens, in name or hub order, with
    pieces smaller than a row."""
    import kbgraph.graph.ppr as ppr

    monkeypatch.setattr(ppr, "_PIECE", piece)
    names, edges = hub_graph(1500, 4000, 11)
    for dtype in (np.float64, np.float32):
        graph = SparseGraph.from_edges(names, edges, hubs_first=hubs_first, dtype=dtype)
        lengths = np.diff(graph.transposed.indptr)
        assert lengths.max() > 32 > ppr._SHORT_ROW  # rows longer than a piece, and than a short row
        assert (lengths == 0).any() and set(range(1, ppr._SHORT_ROW + 1)) <= set(lengths.tolist())
        scores = np.random.default_rng(2).random(graph.size).astype(dtype)
        expected = graph.transposed.toarray().astype(np.float64) @ scores
        got = graph.step(scores)
        assert got.dtype == dtype
        assert np.allclose(got, expected, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=0)
        assert np.allclose(graph.transposed @ scores, expected, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=0)


@pytest.mark.parametrize("seed", range(4))
def test_hub_first_numbering_keeps_scores_and_ranking(seed: int) -> None:
    names, edges = hub_graph(300, 700, seed)
    by_name = SparseGraph.from_edges(names, edges)
    by_hub = SparseGraph.from_edges(names, edges, hubs_first=True)
    assert sorted(by_hub.nodes) == by_name.nodes and by_hub.index[by_hub.nodes[7]] == 7
    degrees = np.diff(by_hub.matrix.indptr)
    assert all(degrees[:-1] >= degrees[1:])
    assert np.allclose(by_hub.matrix.row_sums()[degrees > 0], 1.0)
    seeds = {names[3]: 1.0, names[17]: 0.5}
    name_scores = personalized_pagerank(by_name, seeds, top_k=50)
    hub_scores = personalized_pagerank(by_hub, seeds, top_k=50)
    assert list(name_scores) == list(hub_scores)
    for key, score in name_scores.items():
        assert hub_scores[key] == pytest.approx(score, rel=0, abs=TOLERANCE)


@pytest.mark.parametrize("seed", range(4))
def test_float32_walk_agrees_with_float64(seed: int) -> None:
    names, edges = hub_graph(500, 1500, seed)
    wide = SparseGraph.from_edges(names, edges, hubs_first=True)
    narrow = SparseGraph.from_edges(names, edges, hubs_first=True, dtype=np.float32)
    seeds = {names[seed]: 1.0, names[100 + seed]: 0.4}
    # tol 0: both take all 20 steps, so only rounding separates them
    a = ppr_vector(wide, seeds, damping=0.5, max_iter=20, tol=0.0)
    b = ppr_vector(narrow, seeds, damping=0.5, max_iter=20, tol=0.0)
    assert b.dtype == np.float32 and np.abs(a - b).max() < 1e-6 and b.sum() == pytest.approx(1.0, abs=1e-5)
    order_a, order_b = np.argsort(-a, kind="stable"), np.argsort(-b.astype(np.float64), kind="stable")
    gaps = [k for k in range(1, 40) if a[order_a[k - 1]] - a[order_a[k]] > 1e-5]
    assert gaps  # the top-k sets agree wherever the scores leave a clear gap after rank k
    for k in gaps:
        assert set(order_a[:k]) == set(order_b[:k])


def test_top_entities_ranks_by_mass_then_name() -> None:
    nodes = [f"e\x1fkb\x1f{k}" for k in ("a", "b", "c", "d", "e")] + ["c\x1fchunk"]
    graph = SparseGraph.from_edges(nodes, [(nodes[0], nodes[5], 1.0), (nodes[1], nodes[5], 1.0),
                                           (nodes[2], nodes[3], 1.0)], hubs_first=True)
    entity_nodes = np.array([graph.index[n] for n in sorted(nodes) if n.startswith("e\x1f")])
    entities = EntityGraph(versions=(), graph=graph, chunk_nodes=np.array([graph.index["c\x1fchunk"]]),
                           chunk_ids=["chunk"], chunk_index={"chunk": 0}, mentions={}, entity_nodes=entity_nodes)
    walk = np.zeros(graph.size)
    for key, mass in (("a", 0.2), ("b", 0.3), ("c", 0.2), ("d", 0.0), ("e", 0.2)):
        walk[graph.index[f"e\x1fkb\x1f{key}"]] = mass
    assert list(top_entities(entities, walk, 3)) == [("kb", "b"), ("kb", "a"), ("kb", "c")]
    assert list(top_entities(entities, walk, 10)) == [("kb", "b"), ("kb", "a"), ("kb", "c"), ("kb", "e")]
    assert top_entities(entities, np.zeros(graph.size), 3) == {}


def test_largest_equals_a_full_partition() -> None:
    rng = np.random.default_rng(5)
    for trial in range(600):
        n, limit = int(rng.integers(0, 40_000)), int(rng.integers(1, 400))
        if trial % 3 == 0:  # many ties and zeros
            values = rng.choice([0.0, 0.25, 0.5, 1.0], n)
        elif trial % 3 == 1:  # skewed, like walk masses
            values = rng.random(n) ** 6 * (rng.random(n) > 0.3)
        else:  # cosines, negative ones included
            values = rng.normal(0.0, 0.1, n)
        values = values.astype(np.float32 if trial % 2 else np.float64)
        held = np.ones(n, dtype=bool)
        if len(values) > limit:
            held = values >= np.partition(values, len(values) - limit)[len(values) - limit]
        assert np.array_equal(np.sort(largest(values, limit)), np.flatnonzero(held))
    assert len(largest(np.ones(10), 0)) == 0
    assert len(largest(np.zeros(0), 5)) == 0


def test_chunk_candidates_tied_at_the_cut_are_all_kept() -> None:
    """A hub cited by 100 chunks gives them equal walk mass: every one stays a candidate, so the page
    goes by chunk id (fetch_chunks) rather than by which ones a partition happened to keep."""
    from kbgraph.search.ppr_search import PPRParams, chunk_scores

    hub = "e\x1fkb\x1fhub"
    chunk_ids = [f"c{i:03d}" for i in range(100)]
    graph = SparseGraph.from_edges([hub], [(hub, f"c\x1f{c}", 1.0) for c in chunk_ids], hubs_first=True,
                                   dtype=np.float32)
    entities = EntityGraph(versions=(), graph=graph, chunk_nodes=np.array([graph.index[f"c\x1f{c}"] for c in chunk_ids]),
                           chunk_ids=chunk_ids, chunk_index={c: i for i, c in enumerate(chunk_ids)},
                           mentions={hub: 100}, entity_nodes=np.array([graph.index[hub]]))
    params = PPRParams(chunk_top_n=1)  # keeps 64 candidates, fewer than the tie
    scores, walk = chunk_scores(entities, {hub: 1.0}, [], params)
    assert sorted(scores) == chunk_ids and len(set(scores.values())) == 1
    assert walk.sum() == pytest.approx(1.0, abs=1e-5)
