"""The kg mode's parameters (``KGParams``): one line per parameter says what it is for; what the
defaults were measured against and which other values were tried is in bench/README.md,
"Retrieval parameters: what the kg and ppr defaults rest on"."""

from __future__ import annotations

from dataclasses import dataclass, field

from kbgraph.search.context import Budget


@dataclass(frozen=True)
class KGParams:
    """Scoring and sizes of the kg mode (the package docstring gives the formulas; tuning history:
    bench/README.md, "Retrieval parameters")."""

    entity_top_n: int = 12  # entities in the result, best first (then cut to the token budget)
    relation_top_n: int = 12  # relations in the result
    report_top_n: int = 3  # community reports in the result
    chunk_top_n: int = 8  # chunks in the result (and bridge chunks)
    search_top_n: int = 24  # hits taken from each entity/relation/report search
    name_boost: float = 3.0  # BM25 weight of entity names against descriptions: a name match says more
    vector_weight: float = 0.5  # kNN's share against BM25 in the hybrid searches of graph rows
    exact_score: float = 1.0  # an analysed entity whose key is an entity's: as sure a seed as there is
    type_score: float = 0.5  # an answer-type match is weaker evidence than a name match
    question_weight: float = 0.5  # whole-question entity search, next to the per-entity lookups
    entity_matches: int = 3  # hits kept per analysed entity
    hops: int = 2  # relations away from the seeds that expansion reaches (two-hop questions)
    hop_decay: float = 0.5  # share of a score that crosses an entity's heaviest relation: reach fades
    frontier: int = 4  # best entities expanded per hop (more mostly adds hub noise)
    pagerank_weight: float = 0.1  # a small PageRank prior in an entity's final score
    weight_prior: float = 0.1  # the same small prior for relations, from their weight
    min_score: float = 0.05  # entities, relations and reports scoring less are noise and dropped
    # an anchored entity counts as one of the question's anchors by a weight rising from 0 at
    # anchor_low to 1 at anchor_high (``ramp``): never a cut the two stores' BM25 may fall either side of
    anchor_low: float = 0.45
    anchor_high: float = 0.55
    loose_weight: float = 0.5  # once anchors are found, what matches only the question's words elsewhere counts
    fact_presence: float = 0.25  # a fact of an anchor this heavy sets the fact filter's bar in full (``present``)
    relation_gain: float = 1.0  # how much an anchor relation's relevance to the question adds to a hop
    anchor_relation_top_n: int = 24  # relations of the anchors scored against the question, per side
    support_power: float = 2.0  # chunk support sums score**power: confident evidence dominates
    prominence: bool = True  # spread an entity's support over its chunks by its mention weight in each
    relation_support: float = 1.0  # weight of a chunk's best relation next to its entities' sum
    hub_damping: float = 1.0  # a reached entity keeps score * specificity**this: a hub says nothing of the chunk
    seed_damping: float = 0.5  # the question's own entities are damped the same way, softer: they were asked for
    fact_top_n: int = 3  # bridge chunks: the passages about the far ends of the question's best facts
    fact_filter: float = 0.5  # facts kept for bridges score at least this share of the best fact
    fact_min_score: float = 0.5  # a fact matching the question less is a co-occurrence, not what it asks
    budget: Budget = field(default_factory=Budget)  # token budgets of the rendered context
