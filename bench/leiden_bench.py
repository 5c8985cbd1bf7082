"""Timings of the knowledge-base graph phases on synthetic graphs.

    python bench/leiden_bench.py [--nodes 100000 --edges 300000 --community-nodes 10000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import networkx as nx

from kbgraph.graph.communities import detect_communities, leaf_communities
from kbgraph.graph.pagerank import weighted_pagerank
from kbgraph.graph.ppr import SparseGraph, personalized_pagerank


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=300_000)
    parser.add_argument("--community-nodes", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()

    rng = random.Random(0)
    nodes = [f"e{i}" for i in range(args.nodes)]
    edges = [(nodes[rng.randrange(args.nodes)], nodes[rng.randrange(args.nodes)], rng.random() * 5)
             for _ in range(args.edges)]

    start = time.perf_counter()
    weighted_pagerank(edges, nodes)
    print(f"pagerank {args.nodes} nodes / {args.edges} edges: {time.perf_counter() - start:.3f} s (incl. build)")

    start = time.perf_counter()
    graph = SparseGraph.from_edges(nodes, edges)
    print(f"SparseGraph.from_edges: {time.perf_counter() - start:.3f} s")
    times = []
    for _ in range(args.queries):
        seeds = {nodes[rng.randrange(args.nodes)]: 1.0 for _ in range(5)}
        start = time.perf_counter()
        personalized_pagerank(graph, seeds, top_k=1000)
        times.append(time.perf_counter() - start)
    times.sort()
    print(f"ppr (5 seeds, damping 0.5, top 1000): p50 {statistics.median(times) * 1000:.1f} ms, "
          f"p90 {times[int(len(times) * 0.9)] * 1000:.1f} ms")

    n = args.community_nodes
    g = nx.powerlaw_cluster_graph(int(n * 0.9), 3, 0.3, seed=1)
    c_edges = [(f"n{u}", f"n{v}", 1.0 + rng.random()) for u, v in g.edges()]
    c_edges += [(f"s{i}", f"s{i + 1}", 1.0) for i in range(0, n // 10, 2)]
    c_nodes = [f"n{i}" for i in range(int(n * 0.9))] + [f"s{i}" for i in range(n - int(n * 0.9))]
    start = time.perf_counter()
    communities = detect_communities(c_nodes, c_edges)
    elapsed = time.perf_counter() - start
    leaves = {c.label for c in communities} - {c.parent for c in communities}
    sizes = [len(c.member_keys) for c in communities if c.label in leaves]
    print(f"communities {len(c_nodes)} nodes / {len(c_edges)} edges: {elapsed:.3f} s, {len(communities)} communities, "
          f"{max(c.level for c in communities) + 1} levels, {len(leaves)} leaves (max size {max(sizes)}, "
          f"{sum(s > 10 for s in sizes)} over 10), {len(leaf_communities(communities))} nodes covered")


if __name__ == "__main__":
    main()
