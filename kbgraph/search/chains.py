"""Passage chains: the later hops of a multi-hop question, reached through an entity two passages share.

A multi-hop question names the subject of its first passage only ("which window manager does *the
person running Red Hat 7.3 on a Compaq server* use?"); the passage that answers it is about the
first hop's answer (that person), which the question never names, so naive search ranks it low. In
the graph the two passages share that entity. A chain ``a -> e -> b`` runs from a passage ``a``
that matches the question through an entity ``e`` it cites to another passage ``b`` citing ``e``.

A chain follows evidence only:

- it **starts** from one of naive search's first ``first`` passages scoring at least
  ``start_share`` of naive's best and whose own cosine z (against a sample of the knowledge base's
  passages) reaches ``min_start_z``: a passage that matches the question (never one a graph walk
  reached, nor a weak naive hit), unless the step follows one of the question's facts (below);
- it **steps** through an entity cited by 2 to ``max_mentions`` passages that the question does not
  name (a passage citing a named entity is the question's own); each step costs ``specificity`` x
  ln(passages citing the entity) in z units, so a busy sender or a header word needs far stronger
  evidence at the far end than a name two passages alone share (HippoRAG's node specificity);
- it **lands** only on a passage that matches the question on its own (cosine z at least
  ``min_z``), or by way of one of the question's facts: ``a`` states a relation of an entity the
  question names that matches the rest of the question ("the guild *founded by* Mira Castell",
  kg's ``fact_min_score`` at least), ``e`` is that relation's far end, and the fact scores at least
  ``fact_gate`` of the best one; and the chain's evidence ``fit x max(z(b), 0) + lead x ln(share
  of a) - step cost + fact_bonus x fact`` is at least ``min_evidence``.

Among the chains that land, the best ``context_top`` are weighed by what their two passages say
about the entity they share (``with_context``): a chain whose target's lines about that entity hold
words of the question that its start's lines about it do not answers a part of the question the
start left open ("what sound hardware did *the person whose tracks would not play* find in their
laptop": the start has that person's complaint, the target what they said of their laptop).

Where the chained passages go (``place_chains``): right after the passages that match the question
(the starts' share: a prefix of naive's order), ahead of naive's weaker hits, at most
``max_chained`` of them; a chain along one of the question's facts right after its start, since it
answers the part of the question the passages matching the question's words do not ("the guild
*founded by* Mira Castell", where a registry of other guilds repeats "guild", "emblem" and
"founded"). A passage that matches the question never leaves the page for a chain's passage, and
naive's order is otherwise left as it is. Parameters were chosen on the dev
half of every evaluation set (bench/eval_retrieval.py ``--split dev``) and checked on the held-out
half (bench/README.md, "Chains that follow evidence").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from kbgraph.parse.tokenize import tokenize
from kbgraph.search.chunks import ChunkHit
from kbgraph.store.base import DocStore, vector_field


@dataclass(frozen=True)
class ChainParams:
    """One line each; the dev-half measurements behind the values are in bench/README.md."""

    first: int = 5  # naive's first passages chains may start from
    # ... those scoring at least this share of naive's best: they match the question (dev half: at
    # 0.5 chains also started from passages sharing a word or two with it, MuSiQue recall@5 -13 points)
    start_share: float = 0.9
    # ... and whose own cosine z reaches this, unless it states one of the question's facts the chain
    # follows: with an embedder that cannot tell the question's passages from the rest (the hash
    # embedder on a small knowledge base: the best passage 1 z above a random one) no z is evidence
    min_start_z: float = 1.5
    lead: float = 2.0  # z a chain loses per unit of ln(its start's share of naive's best score)
    specificity: float = 0.5  # z a step costs per unit of ln(passages citing its entity)
    # an entity cited by more passages than this takes no step at all (a header word, a list's name)
    max_mentions: int = 64
    fit: float = 1.0  # weight of the chained passage's own cosine z to the question
    # that z must reach this: the passage matches the question on its own (dev half: 1.0 and 1.5 within
    # a point everywhere but the larger chat logs, +2.3 points recall@5 at 1.0; 2.0 lost hops)
    min_z: float = 1.0
    # and the chain's evidence this: a step through an entity of ~55 passages (cost 2 z) needs a
    # passage matching the question 1 z above min_z
    min_evidence: float = -1.0
    max_chained: int = 2  # chained passages placed ahead of naive's weaker hits (dev: 1 and 3 lost)
    # passages read to score the chains' far ends: on a large graph five passages' entities can reach
    # thousands, and those of the most specific entities of the best starts come first
    max_reads: int = 128
    # added toward a chain through an entity at the far end of one of the question's facts (the
    # anchors' relations that match the rest of the question: "the guild *founded by* Mira Castell")
    # when the chain starts from a passage stating that fact, times the fact's score relative to the
    # best one (HippoRAG 2's filtering of the question's triples)
    fact_bonus: float = 1.0
    # a step along such a fact scoring at least this (relative to the best fact; kg's fact_filter)
    # is evidence enough to land on a passage that shares no words with the question
    fact_gate: float = 0.5
    # a step through an entity the question names in part (an anchor on its ramp, kg.scoring.ramp, weight w
    # in (0, 1)) costs named_cost x w / (1 - w) z: nothing for one barely named, no step at all for
    # one fully named, and continuous between
    named_cost: float = 1.0
    # added toward a chain through an entity the question describes without naming it: a word of its
    # name (two characters or more) is one of the question's own words, not a word of the entities
    # it names ("造鑫诺二号的*那家研究院*归谁领导", "the *university* the author of X attended"). At 1.0
    # (and 1.5, 2.0) MuSiQue +0.5 and zh-wiki-cmrc +0.8 points recall@5 in every graph mode, every
    # other set and every hits@1 unchanged; 1.5 also lost HotpotQA kg and ppr 0.5 points of recall@2
    described_bonus: float = 1.0
    sample_size: int = 256  # passages whose cosines give the question's mean and spread
    # added toward a chain per unit of the share of the question's own words (weighted by rarity) that
    # the target's lines about the step's entity hold and the start's lines about it do not
    # (``with_context``): it answers a part of the question the start left open, in what it says of the
    # entity the two share, where a chat log's passage holds a dozen conversations and its cosine
    # speaks for all of them. At 2.0 (and 3.0, 4.0) MuSiQue mix +1.8 points recall@5, chat-ubuntu
    # +0.6, every other set's mix and every hits@1 unchanged (kg: HotpotQA -0.5); the words of both sides (no "left open"),
    # or the start's words as well, lost email-ilug 0.7 points and moved chat-ubuntu nothing; dropping
    # chains whose target's lines add no such word lost 3.7 to 4.7 points on MuSiQue
    context_weight: float = 2.0
    context_top: int = 16  # the best chains whose passages are read for it (32: the same rankings)
    page: int = 8  # the page asked for (retrieve sets it): no passage matching the question leaves it


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


@dataclass(frozen=True)
class Step:
    """One entity a chain may step through from ``start``: its cost in z and the other passages citing it."""

    start: str
    entity: int
    cost: float
    targets: list[str]


@dataclass(frozen=True)
class Chain:
    start: str
    entity: int
    target: str
    evidence: float  # see the module docstring
    along_fact: bool = False  # the step follows one of the question's facts from the passage stating it


def z_scores(vectors: np.ndarray, question: np.ndarray, sample: np.ndarray) -> tuple[np.ndarray, float]:
    """Cosines of ``vectors`` to the question as z-scores against the cosines of ``sample``, and
    the spread (standard deviation) of the sample's cosines."""
    q = unit(question)
    mean, spread = reference(sample, q)
    return (_cosines(vectors, q) - mean) / spread, spread


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / (np.linalg.norm(vector) or 1.0)


def reference(sample: np.ndarray, unit_vector: np.ndarray) -> tuple[float, float]:
    """The mean and spread (standard deviation, at least 1e-6) of the sample's cosines to a direction."""
    cosines = _cosines(sample, unit_vector)
    mean = float(cosines.mean()) if len(cosines) else 0.0
    return mean, max(float(cosines.std()) if len(cosines) > 1 else 0.0, 1e-6)


def _cosines(vectors: np.ndarray, unit_vector: np.ndarray) -> np.ndarray:
    if not len(vectors):
        return np.zeros(0)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    return (vectors @ unit_vector) / norms


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


def chain_starts(naive: Sequence[ChunkHit], params: ChainParams) -> list[str]:
    """The passages chains may start from: naive's first ``first`` scoring at least ``start_share``
    of its best (a passage that matches the question)."""
    best = max((h.similarity for h in naive), default=0.0)
    if best <= 0:
        return []
    return [h.chunk_id for h in naive[:params.first] if h.similarity >= params.start_share * best]


def chain_steps(graph: ChainGraph, starts: Sequence[str], params: ChainParams,
                named: Mapping[int, float] | None = None) -> list[Step]:
    """The steps chains may take from ``starts`` (best first), the most promising first (the best
    start, then the cheapest step), cut so that at most ``max_reads`` target passages are named."""
    steps = sorted(_steps(graph, starts, params, named or {}),
                   key=lambda s: (starts.index(s.start), s.cost, s.entity))
    out: list[Step] = []
    reached: set[str] = set()
    for step in steps:
        if len(reached) >= params.max_reads:
            break
        targets = []
        for target in step.targets:
            if target in reached or len(reached) < params.max_reads:
                reached.add(target)
                targets.append(target)
        if targets:
            out.append(Step(step.start, step.entity, step.cost, targets))
    return out


def _steps(graph: ChainGraph, starts: Sequence[str], params: ChainParams, named: Mapping[int, float]
           ) -> Iterator[Step]:
    for start in starts:
        node = graph.node_of_chunk.get(start)
        if node is None:
            continue
        for entity in graph.neighbours(node):
            entity, cited_by = int(entity), int(graph.mentions[entity])
            named_as = named.get(entity, 0.0)
            if cited_by < 2 or cited_by > params.max_mentions or named_as >= 1.0:
                continue
            cost = params.specificity * math.log(cited_by) + params.named_cost * named_as / (1.0 - named_as)
            targets = [graph.chunk_of_node[c] for c in graph.neighbours(entity).tolist()
                       if c in graph.chunk_of_node and graph.chunk_of_node[c] != start]
            if targets:
                yield Step(start, entity, cost, targets)


def described_entities(steps: Sequence[Step], names: Mapping[int, str], words: set[str]) -> set[int]:
    """The entities of ``steps`` that the question describes without naming them: a word of two
    characters or more of the entity's name (``names``: node -> name) is among ``words``, the
    question's words outside the names it gives."""
    words = {w for w in words if len(w) >= 2}
    if not words:
        return set()
    found: set[int] = set()
    for entity in {s.entity for s in steps}:
        name = names.get(entity, "")
        tokens = set(tokenize(name))
        # a Chinese name is often one token to the segmenter (中国空间技术研究院): its words are read in it
        if any(w in tokens or (not w.isascii() and w in name) for w in words):
            found.add(entity)
    return found


def best_chains(steps: Sequence[Step], target_z: Mapping[str, float], shares: Mapping[str, float],
                params: ChainParams, facts: Mapping[int, Mapping[str, float]] | None = None,
                described: set[int] | None = None) -> list[Chain]:
    """The best chain to each passage the steps reach that the evidence rules of the module
    docstring let through, best first. ``target_z``: the passages' cosine z to the question (a
    passage without one is not reached); ``shares``: start -> its share of naive's best score;
    ``facts``: entity node -> {passage stating the fact: its score relative to the best fact};
    ``described``: the entities the question describes (``described_entities``)."""
    facts = facts or {}
    described = described or set()
    best: dict[str, Chain] = {}
    for step in steps:
        fact = params.fact_bonus * facts.get(step.entity, {}).get(step.start, 0.0)
        if target_z.get(step.start, -math.inf) < params.min_start_z and fact < params.fact_gate:
            continue
        head = params.lead * math.log(max(shares.get(step.start, 0.0), 1e-6)) - step.cost + fact
        if step.entity in described:
            head += params.described_bonus
        for target in step.targets:
            z = target_z.get(target)
            if z is None or (z + fact < params.min_z and fact < params.fact_gate):
                continue
            # along a fact, a passage sharing no words with the question (z under 0) is what the fact leads to
            evidence = head + params.fit * max(z, 0.0)
            held = best.get(target)
            if evidence >= params.min_evidence and (held is None or evidence > held.evidence):
                best[target] = Chain(step.start, step.entity, target, evidence, fact >= params.fact_gate)
    return sorted(best.values(), key=lambda c: (-c.evidence, c.target))


# a line, or a sentence: Chinese writes no space after its full stop
_LINE_BREAK = re.compile(r"\n+|(?<=[.!?])\s+|(?<=[。！？；])")


def entity_lines(text: str, key: str) -> str:
    """The lines (or sentences) of ``text`` that mention the entity keyed ``key`` (its normalized
    name, as casefolded text writes it): what the passage says about it, or, in a chat log, what
    that person said and was told."""
    if not key:
        return ""
    # a Latin name is a whole word ("rww" is not in "drwxr"); a Chinese one has no word boundaries
    pattern = re.compile(r"(?<!\w)" + re.escape(key) + r"(?!\w)") if key.isascii() else None
    return " ".join(line for line in _LINE_BREAK.split(text)
                    if (pattern.search(line.casefold()) if pattern is not None else key in line.casefold()))


def with_context(chains: Sequence[Chain], texts: Mapping[str, str], names: Mapping[int, str],
                 words: set[str], params: ChainParams) -> list[Chain]:
    """``chains`` with ``context_weight`` x the share of the question's own ``words`` (each weighted
    by its rarity among ``texts``) that the target's lines about the step's entity hold and the
    start's lines about it do not, added to their evidence; best first. ``texts``: chunk -> text of
    the chains' passages; ``names``: entity node -> key."""
    if not words or not chains or params.context_weight <= 0:
        return list(chains)
    folded = [t.casefold() for t in texts.values()]
    # a word every passage read holds tells none of them apart (words are stems: "load" in "loaded")
    rarity = {w: math.log(1.0 + len(folded) / (1 + sum(w in t for t in folded))) for w in words}
    total = sum(rarity.values()) or 1.0
    said_of: dict[tuple[str, str], set[str]] = {}  # chains share starts and entities: each passage read once per entity

    def tokens(chunk: str, key: str) -> set[str]:
        if (chunk, key) not in said_of:
            said_of[(chunk, key)] = set(tokenize(entity_lines(texts.get(chunk, ""), key)))
        return said_of[(chunk, key)]

    out = []
    for chain in chains:
        key = names.get(chain.entity, "")
        said, answered = tokens(chain.start, key), tokens(chain.target, key)
        share = sum(rarity[w] for w in words if w in answered and w not in said) / total
        out.append(replace(chain, evidence=chain.evidence + params.context_weight * share))
    return sorted(out, key=lambda c: (-c.evidence, c.target))


def place_chains(order: Sequence[str], starts: Sequence[str], chains: Sequence[Chain], params: ChainParams,
                 leading: list[str] | None = None) -> list[str]:
    """Naive's order with the chained passages (best first, at most ``max_chained``) placed right
    after the passages that match the question (``starts``, a prefix of naive's order) and ahead of
    naive's weaker hits; the best chain along one of the question's facts right after its start (it
    answers the part of the question the passages matching its words do not), as long as no
    passage that matches the question leaves the first ``page``. Only the best: on the six English
    evaluation sets a second chain placed so reached a gold passage 11 times in 97, the first 55
    times in 153 (bench/README.md, the session of 2026-12-01 (4)). A chained passage naive ranks
    among the matching ones already stays where it is. ``leading`` receives the head of the ranking
    that graph evidence of other kinds may not reorder (``retrieve.leading``): the passages that
    match the question and the first chain along one of its facts placed among or after them. One
    chain, not every one: the kg part's support still competes for the places after it (all of them
    locked, the sample's Salt War treaty record left a page of 3 for a second chained page)."""
    protected = [c for c in order if c in set(starts)]
    chosen = [c for c in chains if c.target not in set(protected)][:params.max_chained]
    early = [c for c in chosen if c.along_fact and c.start in protected][:1]
    if len(protected) + len(early) > params.page:
        early = []
    placed: list[str] = []
    for cid in protected:
        placed.append(cid)
        placed.extend(c.target for c in early if c.start == cid)
    if leading is not None:
        leading.extend(placed[:len(protected) + 1])
    placed.extend(c.target for c in chosen if c not in early)
    taken = set(placed)
    return placed + [c for c in order if c not in taken]


def naive_cosines(naive: Sequence[ChunkHit], floor: float) -> dict[str, float]:
    """The cosines naive search already measured (its vector score is the cosine rescaled from the
    embedder's ``floor``); a hit scored 0 lay at or below the floor and is left out (read its vector)."""
    return {h.chunk_id: floor + h.vector_similarity * (1.0 - floor) for h in naive if h.vector_similarity > 0}
