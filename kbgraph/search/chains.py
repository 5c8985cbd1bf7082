"""Passage chains: the later hops of a multi-hop question, reached through an entity two passages share.

A multi-hop question names the subject of its first passage only ("the first president of the
association which published *Journal X*"); the passage that answers it is about the first hop's
answer (the association), which the question never names, so it ranks low on its own. In the
graph the two passages share that entity. A chain ``a -> e -> b`` runs from one of the question's
best passages ``a`` through an entity ``e`` it cites to another passage ``b`` citing ``e``, and
scores, in the units of the question's similarity z-score (its cosine to a passage, measured
against a sample of the knowledge base's passages, plus the passage's full-text score):

    chain(a, e, b) = lead * z(a) - specificity * ln(chunks citing e) + fit * (z(b) - best z among e's chunks)

- ``lead``: the chain is as good as the passage it starts from, a little less (one more step);
- ``specificity``: an entity cited by few passages leads somewhere (HippoRAG's node specificity);
  one cited by hundreds (a country, the narrator of every chat log) leads nowhere in particular;
- ``fit``: among the passages of ``e``, the one that matches the rest of the question best (the
  association's page that talks about its *first president*) takes the chain;
- plus ``fact_bonus`` when ``e`` is the far end of one of the question's facts (a relation of an
  entity the question names that matches the rest of the question).

A passage's score is the better of its own z and its best chain, so the question's direct passages
keep their places and a second hop joins them right after the passage that leads to it. Tuned on
MuSiQue, HotpotQA, the chat logs and the Chinese news set together (bench/README.md); every
parameter was flat within a point or two around its value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kbgraph.search.chunks import ChunkHit
from kbgraph.store.base import DocStore, vector_field


@dataclass(frozen=True)
class ChainParams:
    first: int = 5  # the question's best passages chains start from
    lead: float = 0.8
    specificity: float = 0.5
    fit: float = 0.3
    # of the naive search's full-text score (0..1) beside the cosine z-score, at equal vector and text
    # weights; scaled by the knowledge base's own weights (text / vector), so 2.5 is 1.07 for the e5
    # embedder (vector weight 0.7) and 5.8 for the hash embedder (0.3), whose cosines say little
    term_weight: float = 3.0
    # an entity cited by more chunks than this starts no chain: at specificity 0.5 it would cost
    # 2.1 z, more than any chain of the evaluation sets overcame, and reading its chunks costs time
    max_mentions: int = 64
    # added to a chain through an entity at the far end of one of the question's facts (the anchors'
    # relations that match the rest of the question: "the guild *founded by* Mira Castell"), times
    # the fact's score relative to the best one (HippoRAG 2's filtering of the question's triples)
    fact_bonus: float = 1.0
    sample_size: int = 256  # passages whose cosines give the question's mean and spread


@dataclass(frozen=True)
class ChainGraph:
    """Which entities each chunk cites and which chunks cite each entity, as node numbers."""

    neighbours: "NeighbourFn"
    chunk_of_node: dict[int, str]
    node_of_chunk: dict[str, int]
    mentions: np.ndarray  # per node: chunks citing it (entities), 0 for chunk nodes


class NeighbourFn:
    """Neighbours of a node in a symmetric CSR adjacency (numbers in ``indices[indptr[i]:indptr[i+1]]``)."""

    def __init__(self, indices: np.ndarray, indptr: np.ndarray) -> None:
        self.indices, self.indptr = indices, indptr

    def __call__(self, node: int) -> np.ndarray:
        return self.indices[self.indptr[node]:self.indptr[node + 1]]


def z_scores(vectors: np.ndarray, question: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """Cosines of ``vectors`` to the question as z-scores against the cosines of ``sample``."""
    q = question / (np.linalg.norm(question) or 1.0)
    reference = _cosines(sample, q)
    mean = float(reference.mean()) if len(reference) else 0.0
    spread = float(reference.std()) if len(reference) > 1 else 0.0
    return (_cosines(vectors, q) - mean) / max(spread, 1e-6)


def _cosines(vectors: np.ndarray, unit_question: np.ndarray) -> np.ndarray:
    if not len(vectors):
        return np.zeros(0)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    return (vectors @ unit_question) / norms


def read_vectors(store: DocStore, tenant: str, kb_ids: Sequence[str], chunk_ids: Sequence[str],
                 dim: int) -> dict[str, np.ndarray]:
    """The stored vectors of these chunks (chunks gone or without a vector of this size are left out)."""
    if not chunk_ids:
        return {}
    field_name = vector_field(dim)
    out: dict[str, np.ndarray] = {}
    for doc in store.get(tenant, list(kb_ids), list(chunk_ids), fields=["id", field_name, "available_int"]):
        vector = doc.get(field_name)
        if vector is not None and len(vector) == dim and doc.get("available_int", 1) == 1:
            out[doc["id"]] = np.asarray(vector, dtype=np.float32)
    return out


def sample_ids(chunk_ids: Sequence[str], size: int) -> list[str]:
    """An even, repeatable spread of ``size`` of the chunk ids (in their given order)."""
    if len(chunk_ids) <= size:
        return list(chunk_ids)
    step = len(chunk_ids) / size
    return [chunk_ids[int(i * step)] for i in range(size)]


def chain_scores(graph: ChainGraph, base: dict[str, float], params: ChainParams,
                 facts: dict[int, float] | None = None) -> tuple[dict[str, float], set[str]]:
    """Scores of every chunk in ``base`` and of those the chains reach (needing a base score too,
    see ``chain_targets``): the better of a chunk's own base and its best chain. Also the ids whose
    score came from a chain. ``facts``: entity node -> relative score of the question's fact that
    ends in it (``fact_bonus``)."""
    facts = facts or {}
    final = dict(base)
    chained: set[str] = set()
    for start in _first_passages(base, params.first):
        node = graph.node_of_chunk.get(start)
        if node is None:
            continue
        for entity in graph.neighbours(node):
            cited_by = int(graph.mentions[entity])
            if cited_by < 2 or cited_by > params.max_mentions:
                continue
            targets = [graph.chunk_of_node[c] for c in graph.neighbours(entity)
                       if c in graph.chunk_of_node and graph.chunk_of_node[c] != start]
            targets = [t for t in targets if t in base]
            if not targets:
                continue
            best_fit = max(base[t] for t in targets)
            head = (params.lead * base[start] - params.specificity * math.log(cited_by)
                    + params.fact_bonus * facts.get(int(entity), 0.0))
            for target in targets:
                score = head + params.fit * (base[target] - best_fit)
                if score > final[target]:
                    final[target] = score
                    chained.add(target)
    return final, chained


def chain_targets(graph: ChainGraph, base: dict[str, float], params: ChainParams) -> set[str]:
    """The chunks the chains from the best passages of ``base`` can reach (their base scores are
    needed before ``chain_scores``)."""
    reached: set[str] = set()
    for start in _first_passages(base, params.first):
        node = graph.node_of_chunk.get(start)
        if node is None:
            continue
        for entity in graph.neighbours(node):
            if 2 <= graph.mentions[entity] <= params.max_mentions:
                reached.update(graph.chunk_of_node[c] for c in graph.neighbours(entity)
                               if c in graph.chunk_of_node and graph.chunk_of_node[c] != start)
    return reached


def _first_passages(base: dict[str, float], count: int) -> list[str]:
    return sorted(base, key=lambda cid: (-base[cid], cid))[:count]


def base_scores(vectors: dict[str, np.ndarray], question: np.ndarray, sample: np.ndarray,
                naive: Sequence[ChunkHit], params: ChainParams, vector_weight: float) -> dict[str, float]:
    """Chunk id -> the question's z-scored cosine plus naive's full-text score, weighed as the
    knowledge base weighs vector and text (``vector_weight``)."""
    ids = list(vectors)
    z = z_scores(np.stack([vectors[c] for c in ids]) if ids else np.zeros((0, len(question))), question, sample)
    out = dict(zip(ids, z.tolist()))
    vector_weight = min(max(vector_weight, 0.05), 1.0)
    term = params.term_weight * (1.0 - vector_weight) / vector_weight
    for hit in naive:
        if hit.chunk_id in out:
            out[hit.chunk_id] += term * hit.term_similarity
    return out
