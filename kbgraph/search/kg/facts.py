"""The question's facts: the relations of its anchored entities scored against the rest of the
question, filtered as HippoRAG 2 filters retrieved facts, the leads they give from an anchor to the
entity at their far end, and the bridge chunks (the passages about those entities)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from kbgraph.parse.tokenize import tokenize, tokenize_query
from kbgraph.search.batch import SearchBatch, Ticket
from kbgraph.search.kg.params import KGParams
from kbgraph.search.kg.rows import (
    RELATION_FIELDS, RELATION_KEY_LISTS, RELATION_KEYS, Node, kind_request, mention_weights, relation_ends,
)
from kbgraph.search.kg.scoring import Citations, present
from kbgraph.search.query_analysis import QueryAnalysis
from kbgraph.store.base import DocStore, any_of
from kbgraph.store.records import Relation, graph_text_fields


def anchor_relations(store: DocStore, tenant: str, kb_ids: Sequence[str], anchors: Mapping[Node, float],
                     analysis: QueryAnalysis, vector: np.ndarray | None, params: KGParams,
                     batch: SearchBatch | None = None, keys_only: bool = False) -> dict[str, tuple[float, dict]]:
    """The relations of the question's anchored entities (entity -> anchor weight, ``anchor_weights``),
    scored by how well they match the rest of the question: relation id -> (hybrid score in [0, 1], row).
    The score is the relation's own; ``anchored_facts`` weighs it by its anchor.

    The text query leaves out the anchors' own names (every one of their relations says them), so
    "the guild *founded* by Mira Castell" ranks Mira Castell's founding relation above her others.
    This is what lets a retriever follow the relation the question asks about rather than whatever
    the anchor is most often mentioned with. The full anchors are searched together, an anchor on its
    ramp on its own: one that barely counts neither takes their places in the search nor its words.
    Every search (per group and side) goes to the store together, through ``batch`` when given.
    ``keys_only``: each relation's row holds only its ends and the passages stating it
    (``RELATION_KEYS``), which an index gives with its hit (no row read: a round trip less on
    Elasticsearch), for a caller that shows no relation.
    """
    if not anchors or params.anchor_relation_top_n <= 0:
        return {}
    batch = batch if batch is not None else SearchBatch(store, tenant)
    full = {n for n, w in anchors.items() if w >= 1.0}
    groups = ([full] if full else []) + [{n} for n in sorted(set(anchors) - full)]
    asked = [(group, _relation_searches(batch, kb_ids, group, full, analysis, vector, params, keys_only))
             for group in groups]
    out: dict[str, tuple[float, dict]] = {}
    for group, searches in asked:
        for rid, (score, doc) in _relations_of(batch, group, searches).items():
            if score > out.get(rid, (0.0, doc))[0]:
                out[rid] = (score, doc)
    return out


SIDES = ("src_key_kwd", "tgt_key_kwd")


def _relation_searches(batch: SearchBatch, kb_ids: Sequence[str], group: set[Node], full: set[Node],
                       analysis: QueryAnalysis, vector: np.ndarray | None, params: KGParams,
                       keys_only: bool = False) -> list[tuple[str, Ticket]]:
    """(side, search) of the group's relations on each side, asked of the batch."""
    keys = sorted({key for _, key in group})
    named = {t for _, key in group | full for t in tokenize(key)}
    named.update(t for name in analysis.entities for t in tokenize(name))
    tokens = [t for t in tokenize_query(" ".join([analysis.question, *analysis.keywords])) if t not in named]
    out = []
    for side in SIDES:
        request = kind_request(kb_ids, Relation.KIND, tokens, graph_text_fields(), vector,
                               params.anchor_relation_top_n, params.vector_weight, where=[any_of(side, keys)],
                               returned=RELATION_KEYS if keys_only else RELATION_FIELDS, key_fields=keys_only,
                               list_fields=RELATION_KEY_LISTS if keys_only else ())
        if request is not None:
            out.append((side, batch.ask(request)))
    return out


def _relations_of(batch: SearchBatch, group: set[Node], searches: list[tuple[str, Ticket]]
                  ) -> dict[str, tuple[float, dict]]:
    out: dict[str, tuple[float, dict]] = {}
    for side, ticket in searches:
        for hit in batch.hits(ticket):
            if (hit.doc.get("kb_id", ""), hit.doc.get(side, "")) not in group:
                continue
            if hit.score > out.get(hit.id, (0.0, hit.doc))[0]:
                out[hit.id] = (hit.score, hit.doc)
    return out


def anchored_facts(about: Mapping[str, tuple[float, dict]], weights: Mapping[Node, float]
                   ) -> dict[str, tuple[float, dict]]:
    """The anchors' relations scored against the question (``anchor_relations``) times the anchor
    weight of their better end: a relation of an entity that is only half an anchor half counts."""
    out: dict[str, tuple[float, dict]] = {}
    for rid, (score, doc) in about.items():
        src, tgt = relation_ends(doc)
        out[rid] = (score * max(weights.get(src, 0.0), weights.get(tgt, 0.0)), doc)
    return out


def ranked_facts(about: Mapping[str, tuple[float, dict]], weights: Mapping[Node, float], top_n: int,
                 fact_filter: float, presence: float, min_score: float = 0.0) -> list[tuple[float, dict]]:
    """The question's facts (the anchors' relations scored against it, ``anchor_relations``) as
    HippoRAG 2 filters the retrieved facts: the best ``top_n`` by ``anchored_facts``, each kept
    (score, row) when its own score is at least ``fact_filter`` x the best and ``min_score``. The
    filter compares a fact's own score, so an anchor moving along its ramp scales its facts' part
    (``fact_leads``) without dropping one across the filter; the best is a fact's own score too,
    counted in full once its anchor's weight reaches ``presence`` (``present``): weighed by the
    anchor's weight, a best fact of an anchor at 0.8 let facts under the filter through."""
    weighted = anchored_facts(about, weights)
    ranked = sorted((rid for rid, (value, _) in weighted.items() if value > 0),
                    key=lambda rid: (-weighted[rid][0], weighted[rid][1].get("id", "")))[:top_n]
    best = max((about[rid][0] * present(weighted[rid][0] / about[rid][0], presence)
                for rid in ranked if about[rid][0] > 0), default=0.0)
    if best <= 0:
        return []
    return [about[rid] for rid in ranked if about[rid][0] >= max(fact_filter * best, min_score)]


def fact_leads(doc: dict, weights: Mapping[Node, float]) -> list[tuple[Node, Node, float]]:
    """(near, far, weight) of a fact read from one of the question's anchors to its other end: near's
    anchor weight times how much far is *not* an anchor (a fact between two of the question's own
    entities leads nowhere)."""
    src, tgt = relation_ends(doc)
    leads = [(near, far, weights.get(near, 0.0) * (1.0 - weights.get(far, 0.0)))
             for near, far in ((src, tgt), (tgt, src))]
    return [lead for lead in leads if lead[2] > 0]


def bridge_scores(store: DocStore, tenant: str, kb_ids: Sequence[str], anchors: Mapping[Node, float],
                  about: dict[str, tuple[float, dict]], params: KGParams, citations: Citations | None = None,
                  seed_scores: Mapping[Node, float] | None = None) -> dict[str, float]:
    """Chunk id -> score of the bridge passages of a question; ``anchors``: the question's anchors
    and their weights (``Seeds.anchor_weights``), ``seed_scores`` their relevance (1 when not given).

    The question's facts are its anchors' relations scored against the rest of the question
    (``anchor_relations``); like HippoRAG 2's filtering of the retrieved facts, only the best
    ``fact_top_n`` scoring at least ``fact_filter`` x the best (and ``fact_min_score``) are kept, and
    a far end counts by its specificity (``citations``: a hub at the end of a fact is no bridge to any
    one passage). Each kept fact leads from its
    anchor to the entity at its far end, and the passages *about* that entity (where its mentions
    weigh most) are the bridge: "the guild *founded by* Mira Castell" leads to the guild's own page,
    not to every page that names the guild.
    """
    far = bridge_ends(anchors, about, params, citations, seed_scores)
    return bridge_chunks(far, mention_weights(store, tenant, kb_ids, far))


def bridge_ends(anchors: Mapping[Node, float], about: dict[str, tuple[float, dict]], params: KGParams,
                citations: Citations | None = None, seed_scores: Mapping[Node, float] | None = None
                ) -> dict[Node, float]:
    """The entities at the far ends of the question's best facts and their scores (``bridge_scores``)."""
    far: dict[Node, float] = {}
    for score, doc in ranked_facts(about, anchors, params.fact_top_n, params.fact_filter, params.fact_presence,
                                   params.fact_min_score):
        for a, b, weight in fact_leads(doc, anchors):
            damping = citations.specificity(b) ** params.hub_damping if citations is not None else 1.0
            relevance = seed_scores.get(a, 0.0) if seed_scores is not None else 1.0
            far[b] = max(far.get(b, 0.0), score * weight * relevance * damping)
    return far


def bridge_chunks(far: Mapping[Node, float], mentions: Mapping[Node, Mapping[str, float]]) -> dict[str, float]:
    """Chunk id -> score of the passages about the facts' far ends (``bridge_ends``), from their
    mention weights (``mention_weights``)."""
    out: dict[str, float] = {}
    for node, weights in mentions.items():
        top = max(weights.values(), default=0.0)
        for cid, weight in weights.items():
            if top > 0:
                out[cid] = max(out.get(cid, 0.0), far[node] * weight / top)
    return out
