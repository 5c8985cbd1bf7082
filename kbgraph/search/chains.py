"""Passage chains: the later hops of a multi-hop question, reached through an entity two passages share.

A multi-hop question names the subject of its first passage only ("the first president of the
association which published *Journal X*"); the passage that answers it is about the first hop's
answer (the association), which the question never names, so it ranks low on its own. In the
graph the two passages share that entity. A chain ``a -> e -> b`` runs from one of the question's
best passages ``a`` through an entity ``e`` it cites to another passage ``b`` citing ``e``, and
scores, in the units of the question's similarity z-score (its cosine to a passage, measured
against a sample of the knowledge base's passages, plus the passage's full-text score):

    chain(a, e, b) = lead * z(a) - step - specificity * ln(chunks citing e) + fit * (z(b) - best z among e's chunks)

- ``lead``, ``step``: the chain is as good as the passage it starts from, less one step;
- ``specificity``: an entity cited by few passages leads somewhere (HippoRAG's node specificity);
  one cited by hundreds (a country, the narrator of every chat log) leads nowhere in particular;
- ``fit``: among the passages of ``e``, the one that matches the rest of the question best (the
  association's page that talks about its *first president*) takes the chain;
- no chain runs through an entity the question names (a passage citing it is the question's own);
- plus ``fact_bonus`` when ``a`` states one of the question's facts (a relation of an entity the
  question names that matches the rest of the question) and ``e`` is its far end.

A passage's score is the better of its own z and its best chain, so the question's direct passages
keep their places and a second hop joins them right after the passage that leads to it. Tuned on
MuSiQue, HotpotQA, the chat logs and the Chinese news set together (bench/README.md); every
parameter was flat within a point or two around its value.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kbgraph.search.chunks import ChunkHit
from kbgraph.store.base import DocStore, vector_field


@dataclass(frozen=True)
class ChainParams:
    first: int = 5  # the question's best passages chains start from
    lead: float = 1.0
    step: float = 1.0  # taken off every chain: one more step away from the question
    specificity: float = 0.5
    fit: float = 0.3
    # naive search ranks by vector_weight x rescaled cosine + (1 - vector_weight) x full-text score;
    # the chains' base is that score in z units, its full-text part times this share: 1 ranks the
    # naive hits exactly as naive does, less lets the cosine lead; None: the embedder's own
    # (kbgraph.config.EMBEDDER_CHAIN_TEXT_SHARE)
    text_share: float | None = None
    # an entity cited by more chunks than this starts no chain: at specificity 0.5 it would cost
    # 2.1 z, more than any chain of the evaluation sets overcame, and reading its chunks costs time
    max_mentions: int = 64
    # chunks read to score the chains' far ends: on a large graph five passages' entities can reach
    # thousands, and the far ends of the most promising links come first
    max_reads: int = 512
    # added to a chain through an entity at the far end of one of the question's facts (the anchors'
    # relations that match the rest of the question: "the guild *founded by* Mira Castell") when the
    # chain starts from a passage stating that fact, times the fact's score relative to the best one
    # (HippoRAG 2's filtering of the question's triples)
    fact_bonus: float = 1.0
    # a chain through an entity the question names in part (an anchor on its ramp, kg.scoring.ramp, weight w
    # in (0, 1)) costs named_cost x w / (1 - w) z: nothing for one barely named, no chain at all for
    # one fully named, and continuous between
    named_cost: float = 1.0
    sample_size: int = 256  # passages whose cosines give the question's mean and spread
    # z units one unit of full-text score may be worth. The full-text part is scaled per question
    # (its best hit scores 1) and weighed against the cosine by naive's own weights; where the
    # cosines spread little next to it (the hash embedder, or any embedder naive weighs at 0.3)
    # it comes to 20-50 z, and a chain's costs (step, specificity), counted in z, no longer count:
    # every passage sharing an entity with the first hit, a hub city's (cited by a sixth of a
    # Chinese news set) included, outranked naive's second hit (zh-news-large, hash: ppr recall@5
    # 0.49 against naive's 0.84, mix hits@1 0.64 against 0.83). Past this, all base scores are
    # scaled down together, so naive's order stays. The e5 embedder's sets measure 1.7-4.8: not
    # touched. With the hash embedder 15 kept MuSiQue's and HotpotQA's mix as they were (6 lost
    # 4 points of MuSiQue recall@5 to lost hops; bench/README.md).
    max_text_z: float = 15.0


class NeighbourFn:
    """Neighbours of a node in a symmetric CSR adjacency (numbers in ``indices[indptr[i]:indptr[i+1]]``)."""

    def __init__(self, indices: np.ndarray, indptr: np.ndarray) -> None:
        self.indices, self.indptr = indices, indptr

    def __call__(self, node: int) -> np.ndarray:
        return self.indices[self.indptr[node]:self.indptr[node + 1]]


@dataclass(frozen=True)
class ChainGraph:
    """Which entities each chunk cites and which chunks cite each entity, as node numbers."""

    neighbours: NeighbourFn
    chunk_of_node: dict[int, str]
    node_of_chunk: dict[str, int]
    mentions: np.ndarray  # per node: chunks citing it (entities), 0 for chunk nodes


def z_scores(vectors: np.ndarray, question: np.ndarray, sample: np.ndarray) -> tuple[np.ndarray, float]:
    """Cosines of ``vectors`` to the question as z-scores against the cosines of ``sample``, and
    the spread (standard deviation) of the sample's cosines."""
    q = _unit(question)
    mean, spread = _reference(sample, q)
    return (_cosines(vectors, q) - mean) / spread, spread


def _unit(question: np.ndarray) -> np.ndarray:
    return question / (np.linalg.norm(question) or 1.0)


def _reference(sample: np.ndarray, unit_question: np.ndarray) -> tuple[float, float]:
    """The mean and spread (standard deviation, at least 1e-6) of the sample's cosines."""
    reference = _cosines(sample, unit_question)
    mean = float(reference.mean()) if len(reference) else 0.0
    return mean, max(float(reference.std()) if len(reference) > 1 else 0.0, 1e-6)


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
                 facts: dict[int, dict[str, float]] | None = None, named: Mapping[int, float] | None = None
                 ) -> tuple[dict[str, float], set[str]]:
    """Scores of every chunk in ``base`` and of those the chains reach (needing a base score too,
    see ``chain_targets``): the better of a chunk's own base and its best chain. Also the ids whose
    score came from a chain. ``facts``: entity node -> {chunk stating it: relative score} of the
    question's facts that end in the entity (``fact_bonus`` when the chain starts from that chunk).
    ``named``: the entities the question names (node -> anchor weight), which start no chain (a
    passage citing them is the question's own and ranks by its own score), one named in part at a
    cost (``named_cost``)."""
    facts = facts or {}
    final = dict(base)
    chained: set[str] = set()
    for start, entity, cited_by, cost, targets in _links(graph, base, params, named or {}):
        targets = [t for t in targets if t in base]
        if not targets:
            continue
        best_fit = max(base[t] for t in targets)
        head = (params.lead * base[start] - params.step - params.specificity * math.log(cited_by) - cost
                + params.fact_bonus * facts.get(entity, {}).get(start, 0.0))
        for target in targets:
            score = head + params.fit * (base[target] - best_fit)
            if score > final[target]:
                final[target] = score
                chained.add(target)
    return final, chained


def chain_targets(graph: ChainGraph, base: dict[str, float], params: ChainParams,
                  named: Mapping[int, float] | None = None) -> set[str]:
    """The chunks the chains from the best passages of ``base`` can reach (their base scores are
    needed before ``chain_scores``): at most ``max_reads``, those of the most promising links first
    (the best start through the most specific entity)."""
    links = sorted(_links(graph, base, params, named or {}),
                   key=lambda link: (-(params.lead * base[link[0]] - params.specificity * math.log(link[2]) - link[3]),
                                     link[0], link[1]))
    reached: set[str] = set()
    for *_, targets in links:
        if len(reached) >= params.max_reads:
            break
        reached.update(targets[:params.max_reads - len(reached)])
    return reached


def _links(graph: ChainGraph, base: dict[str, float], params: ChainParams, named: Mapping[int, float]
           ) -> Iterator[tuple[str, int, int, float, list[str]]]:
    """(start chunk, entity node, chunks citing it, the cost of its being named, the other chunks
    citing it) for every entity a chain may run through from the best passages of ``base``."""
    for start in _first_passages(base, params.first):
        node = graph.node_of_chunk.get(start)
        if node is None:
            continue
        for entity in graph.neighbours(node):
            entity, cited_by = int(entity), int(graph.mentions[entity])
            named_as = named.get(entity, 0.0)
            if cited_by < 2 or cited_by > params.max_mentions or named_as >= 1.0:
                continue
            cost = params.named_cost * named_as / (1.0 - named_as)
            yield start, entity, cited_by, cost, [graph.chunk_of_node[c] for c in graph.neighbours(entity)
                                            if c in graph.chunk_of_node and graph.chunk_of_node[c] != start]


def _first_passages(base: dict[str, float], count: int) -> list[str]:
    return sorted(base, key=lambda cid: (-base[cid], cid))[:count]


def naive_cosines(naive: Sequence[ChunkHit], floor: float) -> dict[str, float]:
    """The cosines naive search already measured (its vector score is the cosine rescaled from the
    embedder's ``floor``); a hit scored 0 lay at or below the floor and is left out (read its vector)."""
    return {h.chunk_id: floor + h.vector_similarity * (1.0 - floor) for h in naive if h.vector_similarity > 0}


def base_scores(vectors: dict[str, np.ndarray], question: np.ndarray, sample: np.ndarray,
                naive: Sequence[ChunkHit], params: ChainParams, vector_weight: float,
                floor: float = 0.0, cosines: dict[str, float] | None = None,
                measured: dict[str, float] | None = None) -> dict[str, float]:
    """Chunk id -> naive search's score of the chunk in z units: the question's z-scored cosine
    plus its full-text score (naive's hits only; 0 for the others, as for any chunk naive search
    found no word of the question in), weighed as naive weighs them (``vector_weight``; ``floor``:
    the embedder's cosine of unrelated texts, which naive rescales from) times ``text_share``.
    The cosines come from ``vectors``, or ``measured`` (float32 cosines to the unit question, as
    ``DocStore.vector_cosines`` gives them); ``cosines``: chunks whose cosine is known already
    (``naive_cosines``), scored after those."""
    q = _unit(question)
    mean, spread = _reference(sample, q)
    if measured is None:
        ids = list(vectors)
        values = _cosines(np.stack([vectors[c] for c in ids]), q) if ids else np.zeros(0)
    else:
        ids, values = list(measured), np.fromiter(measured.values(), dtype=np.float32, count=len(measured))
    out = dict(zip(ids, ((values - mean) / spread).tolist()))
    out.update({cid: (cos - mean) / spread for cid, cos in (cosines or {}).items() if cid not in out})
    vector_weight = min(max(vector_weight, 0.05), 1.0)
    # one unit of full-text score is worth (1 - w) / w units of rescaled cosine, i.e. that times
    # (1 - floor) / spread z units
    share = 1.0 if params.text_share is None else params.text_share
    term = share * (1.0 - vector_weight) / vector_weight * (1.0 - floor) / spread
    scale = min(1.0, params.max_text_z / term) if term > 0 and params.max_text_z > 0 else 1.0
    for hit in naive:
        if hit.chunk_id in out:
            out[hit.chunk_id] += term * hit.term_similarity
    return {cid: scale * z for cid, z in out.items()} if scale < 1.0 else out
