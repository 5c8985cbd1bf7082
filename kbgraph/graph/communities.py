"""Hierarchical communities of the entity graph (hierarchical Leiden from graspologic_native).

``graspologic_native`` is called directly: ``graspologic.partition`` pulls in scikit-learn, umap and
numba (3-4 s of imports) for the same Rust routine.

Every connected component is clustered on its own, not only the largest one as Microsoft GraphRAG
does, so no entity is left without a community (which component a community lies in is kept: the
refresh decides by it which communities get a report written by the LLM). Clustering per component also makes the result of
an unchanged component independent of the rest of the graph, and a community's label is a hash of
its level and sorted members, so a community whose membership did not change keeps its label (and
its report can be reused).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import graspologic_native as gn
import numpy as np

from kbgraph.graph.edges import edge_weight
from kbgraph.store.records import stable_id

DEFAULT_SEED = 0xDEECE66D


@dataclass
class Community:
    level: int
    label: str
    parent: str  # the label of the enclosing community one level up; "" at level 0
    member_keys: list[str] = field(default_factory=list)  # sorted
    # the connected component the community lies in, named by its smallest key, and its entity count
    component: str = field(default="", compare=False)
    component_size: int = field(default=0, compare=False)


def community_label(level: int, member_keys: Sequence[str]) -> str:
    return f"L{level}-{stable_id('community', str(level), *sorted(member_keys))[:16]}"


def _make(level: int, parent: str, members: Sequence[str]) -> Community:
    ordered = sorted(members)
    return Community(level, community_label(level, ordered), parent, ordered)


def detect_communities(nodes: Sequence[str], edges: Sequence[tuple[str, str, float]], max_cluster_size: int = 10,
                       seed: int = DEFAULT_SEED) -> list[Community]:
    """All communities at all levels, sorted by (level, label).

    A component no larger than ``max_cluster_size`` (an isolated node included) is one level-0
    community as it is: Leiden would only cut an already small, connected piece. Larger components
    go through hierarchical Leiden, which splits any cluster of ``max_cluster_size`` or more members
    one level further down while it can.
    """
    weights: dict[tuple[str, str], float] = defaultdict(float)
    for a, b, w in edges:
        if a != b:
            weights[(a, b) if a < b else (b, a)] += edge_weight(float(w))
    names = set(nodes)
    for a, b in weights:
        names.add(a)
        names.add(b)
    ordered = sorted(names)
    if not ordered:
        return []
    index = {name: i for i, name in enumerate(ordered)}
    pairs = sorted(weights)
    rows = np.fromiter((index[a] for a, _ in pairs), dtype=np.int64, count=len(pairs))
    cols = np.fromiter((index[b] for _, b in pairs), dtype=np.int64, count=len(pairs))
    component_of = _component_labels(len(ordered), rows, cols)

    members: dict[int, list[str]] = defaultdict(list)
    for name, comp in zip(ordered, component_of.tolist()):
        members[comp].append(name)
    component_edges: dict[int, list[tuple[str, str, float]]] = defaultdict(list)
    for (a, b), comp in zip(pairs, component_of[rows].tolist()):  # pairs are sorted, so each list is too
        component_edges[comp].append((a, b, weights[(a, b)]))

    communities: list[Community] = []
    for comp, keys in members.items():
        found = [_make(0, "", keys)] if len(keys) <= max_cluster_size else _leiden(component_edges[comp],
                                                                                 max_cluster_size, seed)
        for community in found:
            community.component, community.component_size = keys[0], len(keys)  # keys are sorted
        communities.extend(found)
    communities.sort(key=lambda c: (c.level, c.label))
    return communities


def _component_labels(count: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """One label per node, the same for the nodes of one connected component: roots hook onto the
    smaller root across each edge, then every node jumps to its root, until nothing changes
    (numpy only: scipy, which has this as csgraph.connected_components, is not a dependency)."""
    labels = np.arange(count)
    while True:
        before = labels
        low = np.minimum(labels[rows], labels[cols])
        hooked = labels.copy()
        np.minimum.at(hooked, labels[rows], low)
        np.minimum.at(hooked, labels[cols], low)
        labels = hooked
        while True:
            jumped = labels[labels]
            if np.array_equal(jumped, labels):
                break
            labels = jumped
        if np.array_equal(labels, before):
            return labels


def _leiden(edges: list[tuple[str, str, float]], max_cluster_size: int, seed: int) -> list[Community]:
    clusters = gn.hierarchical_leiden(edges, max_cluster_size=max_cluster_size, seed=seed)
    grouped: dict[tuple[int, int], list[str]] = defaultdict(list)
    parent_of: dict[tuple[int, int], int | None] = {}
    for item in clusters:
        grouped[(item.level, item.cluster)].append(item.node)
        parent_of[(item.level, item.cluster)] = item.parent_cluster
    labels: dict[tuple[int, int], str] = {}
    out: list[Community] = []
    for level, cluster in sorted(grouped):  # parents (lower level) are labelled before children
        parent = parent_of[(level, cluster)]
        parent_label = labels.get((level - 1, parent), "") if parent is not None else ""
        community = _make(level, parent_label, grouped[(level, cluster)])
        labels[(level, cluster)] = community.label
        out.append(community)
    return out


def largest_component(communities: Sequence[Community]) -> str:
    """The component holding the most entities (on a tie, the one named by the smaller key)."""
    best = min(((-c.component_size, c.component) for c in communities), default=(0, ""))
    return best[1]


def leaf_communities(communities: Sequence[Community]) -> dict[str, str]:
    """Member key -> label of the deepest community holding it."""
    out: dict[str, tuple[int, str]] = {}
    for c in communities:
        for key in c.member_keys:
            if key not in out or out[key][0] < c.level:
                out[key] = (c.level, c.label)
    return {key: label for key, (_, label) in out.items()}
