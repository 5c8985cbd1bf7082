"""Neighbour expansion: seed relevance spread along relations for a few hops, on arrays (hubs bring
hundreds of relations each), relations read from the cached adjacency or the store."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from kbgraph.search.batch import SearchBatch
from kbgraph.search.graph_cache import Edge, RelationAdjacency, edges_in_order, read_relations_touching
from kbgraph.search.kg.params import KGParams
from kbgraph.search.kg.rows import Node
from kbgraph.search.kg.scoring import Citations, _clipped, hop_factors
from kbgraph.store.base import DocStore


def _relations_touching(store: DocStore, tenant: str, kb_ids: Sequence[str], nodes: Sequence[Node]) -> list[Edge]:
    return edges_in_order(read_relations_touching(store, tenant, kb_ids, nodes).values())


@dataclass
class HopSpread:
    """What one hop passes along: per reached entity (in order of first reach) the probabilistic-OR
    miss of everything it gained, and per walked relation (edge position) its best path score."""

    reached: list[Node]
    misses: np.ndarray
    best: np.ndarray


def spread_hop(edges: Sequence[Edge], frontier: dict[Node, float], relevance: Mapping[str, float],
               params: KGParams) -> HopSpread:
    """One hop of ``expand`` over the relations touching ``frontier`` (entity -> score).

    Hubs bring hundreds of relations each, so this runs on arrays: each relation is walked from
    whichever of its ends is in the frontier, passing ``score * any_of(hop_factor, gain * relevance)``.
    """
    n = len(edges)
    at = {node: i for i, node in enumerate(frontier)}
    scores = np.fromiter(frontier.values(), dtype=np.float64, count=len(frontier))
    weights = np.fromiter((e.weight for e in edges), dtype=np.float64, count=n)
    sources, targets = [e.src for e in edges], [e.tgt for e in edges]
    # walks in relation order, each relation's walk from its source first: walk 2i goes from
    # sources[i] to targets[i], walk 2i + 1 back; a walk exists where it starts in the frontier
    starts_at = np.fromiter(map(at.get, [x for pair in zip(sources, targets) for x in pair], repeat(-1)),
                            dtype=np.int64, count=2 * n)
    walks = np.flatnonzero(starts_at >= 0)
    from_at = starts_at[walks]
    relation = walks // 2
    heaviest = np.zeros(len(frontier))  # each frontier entity's heaviest relation
    np.fmax.at(heaviest, from_at, weights[relation])
    miss = 1.0 - _clipped(hop_factors(weights[relation], heaviest[from_at], params.hop_decay))
    if relevance:
        gains = np.fromiter((relevance.get(e.id, 0.0) for e in edges), dtype=np.float64, count=n)
        miss = miss * (1.0 - _clipped(params.relation_gain * gains[relation]))
    passed = np.zeros(2 * n)
    passed[walks] = scores[from_at] * (1.0 - miss)
    # the far end of each walk, numbered in order of first reach
    ends = [x for pair in zip(targets, sources) for x in pair]
    reached_nodes = [ends[i] for i in walks.tolist()]
    numbers = {node: i for i, node in enumerate(dict.fromkeys(reached_nodes))}
    far = np.fromiter(map(numbers.__getitem__, reached_nodes), dtype=np.int64, count=len(reached_nodes))
    # every walk into an entity multiplies its miss, in walk order (stable sort keeps it)
    grouped = np.argsort(far, kind="stable")
    firsts = np.flatnonzero(np.r_[True, np.diff(far[grouped]) != 0]) if len(grouped) else np.zeros(0, dtype=np.int64)
    misses = np.multiply.reduceat(1.0 - _clipped(passed[walks][grouped]), firsts) if len(grouped) else np.zeros(0)
    passed = passed.reshape(n, 2)
    return HopSpread(list(numbers), misses, passed.max(axis=1))


def first_frontier(seeds: Mapping[Node, float], params: KGParams) -> list[Node]:
    """The entities ``expand``'s first hop starts from: the best ``params.frontier`` seeds scoring at
    least ``params.min_score``."""
    ranked = sorted((n for n, s in seeds.items() if s >= params.min_score), key=lambda n: (-seeds[n], n))
    return ranked[:params.frontier]


def expand(store: DocStore, tenant: str, kb_ids: Sequence[str], seeds: dict[Node, float], params: KGParams,
           relevance: dict[str, float] | None = None, adjacency: RelationAdjacency | None = None,
           citations: Citations | None = None, batch: SearchBatch | None = None
           ) -> tuple[dict[Node, float], dict[Node, int], dict[str, tuple[float, Edge]]]:
    """Spread seed relevance along relations for ``params.hops`` hops: the first hop from the best
    ``params.frontier`` seeds scoring at least ``params.min_score``, each next one from the best of
    the entities the hop before reached that no hop has expanded yet (a weak seed included).

    ``relevance`` (relation id -> [0, 1], see ``anchor_relations``) widens a hop along a relation
    the question asks about: it passes ``any_of(hop_factor, relation_gain * relevance)`` of the
    entity's score instead of ``hop_factor`` alone.

    Returns entity scores (seeds included), the hop at which each entity was first reached, and
    for every relation walked its best path score and the relation (``relation_rows`` reads the rows
    of those that are shown). Relations come from ``adjacency`` when given (cached per graph state:
    hubs are met by question after question and have hundreds of relations; what the first hop
    lacks is read through ``batch`` when given, where ``RelationAdjacency.ask`` may have asked it),
    else from the store. With ``citations``, what a reached entity gains is scaled by its
    specificity to ``params.hub_damping``, so a hub neither ranks high nor leads the next hop.
    """
    relevance = relevance or {}
    scores = dict(seeds)
    hops = {node: 0 for node in seeds}
    walked: dict[str, tuple[float, Edge]] = {}
    frontier = first_frontier(seeds, params)
    expanded: set[Node] = set()
    for hop in range(1, params.hops + 1):
        if not frontier:
            break
        expanded.update(frontier)
        # only the first hop's reads through the batch: a later one would wait for whatever else
        # the batch holds unsent then (the ppr part's scored searches, two round trips)
        edges = adjacency.touching(frontier, batch if hop == 1 else None) if adjacency is not None else \
            _relations_touching(store, tenant, kb_ids, frontier)
        spread = spread_hop(edges, {node: scores[node] for node in frontier}, relevance, params)
        for edge, best in zip(edges, spread.best.tolist()):
            if best > 0:
                held = walked.get(edge.id)
                if held is None or best > held[0]:
                    walked[edge.id] = (best, edge)
        before = np.fromiter((scores.get(node, 0.0) for node in spread.reached), dtype=np.float64,
                             count=len(spread.reached))
        gained = 1.0 - spread.misses
        if citations is not None and params.hub_damping > 0:
            gained = gained * np.fromiter((citations.specificity(node) ** params.hub_damping
                                           for node in spread.reached), dtype=np.float64, count=len(spread.reached))
        scores.update(zip(spread.reached, (1.0 - (1.0 - _clipped(before)) * (1.0 - gained)).tolist()))
        hops.update(dict.fromkeys((node for node in spread.reached if node not in hops), hop))
        # the best few of often hundreds of reached entities not expanded yet (nsmallest: sorted()[:k],
        # without the sort). Not "first reached now": a seed too weak to be expanded (a loose match
        # scoring 0.009, in one engine's candidate window and not the other's) would then never lead
        # on however much this hop lifts it, and a near-zero score would change the whole ranking
        leads = (n for n in spread.reached if n not in expanded and scores[n] >= params.min_score)
        frontier = heapq.nsmallest(params.frontier, leads, key=lambda n: (-scores[n], n))
    return scores, hops, walked
