"""The kg mode's entities, relations and community reports ranked: relevance with a small prior
(PageRank, relation weight, report rating), relation rows read for the walked relations shown."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from kbgraph.search.context import EntityHit, RelationHit, ReportHit, any_of_scores
from kbgraph.search.graph_cache import Edge
from kbgraph.search.kg.params import KGParams
from kbgraph.search.batch import SearchBatch, Ticket
from kbgraph.search.kg.rows import (
    RELATION_FIELDS, REPORT_FIELDS, Node, _entity_hit, _relation_hit, _report_hit, listed_rows, listing_request,
)
from kbgraph.store.base import DocStore, Hit, SearchRequest, any_of, eq
from kbgraph.store.records import CommunityReport


def rank_entities(scores: dict[Node, float], hops: dict[Node, int], docs: dict[Node, dict],
                  pagerank_weight: float, top_rank: float | None = None) -> list[EntityHit]:
    """The entities of ``docs`` ranked; the PageRank prior is relative to ``top_rank``, by default
    the highest PageRank among ``docs``."""
    ranks = {n: float(d.get("pagerank_flt", 0.0) or 0.0) for n, d in docs.items()}
    top_rank = max(ranks.values(), default=0.0) if top_rank is None else top_rank
    hits = []
    for node, doc in docs.items():
        prior = ranks[node] / top_rank if top_rank > 0 else 0.0
        final = (1.0 - pagerank_weight) * scores.get(node, 0.0) + pagerank_weight * prior
        hits.append(_entity_hit(doc, round(final, 6), hops.get(node, 0)))
    hits.sort(key=lambda e: (-e.score, e.name, e.id))
    return hits


def relation_rows(store: DocStore, tenant: str, kb_ids: Sequence[str], walked: dict[str, tuple[float, Edge]],
                  found: dict[str, tuple[float, dict]], read: Sequence[dict] | None = None
                  ) -> dict[str, tuple[float, dict]]:
    """The walked relations with their rows: taken from ``found`` (search hits) where there, else
    read (``read``: the rows of ``unread_relations``, read by the caller with other reads). A relation
    whose row has gone since it was walked is left out."""
    if read is None:
        unread = unread_relations(walked, found)
        read = store.get(tenant, list(kb_ids), unread, fields=RELATION_FIELDS) if unread else []
    rows = {doc["id"]: doc for doc in read}
    rows.update({rid: found[rid][1] for rid in walked if rid in found})
    return {rid: (score, rows[rid]) for rid, (score, _) in walked.items() if rid in rows}


def unread_relations(walked: dict[str, tuple[float, Edge]], found: dict[str, tuple[float, dict]]) -> list[str]:
    """The walked relations whose rows ``relation_rows`` must read."""
    return [rid for rid in walked if rid not in found]


def rank_relations(found: dict[str, tuple[float, dict]], walked: dict[str, tuple[float, dict]],
                   weight_prior: float) -> list[RelationHit]:
    rows = {rid: doc for rid, (_, doc) in found.items()}
    rows.update({rid: doc for rid, (_, doc) in walked.items() if rid not in rows})
    top_weight = max((float(d.get("weight_flt", 0.0) or 0.0) for d in rows.values()), default=0.0)
    hits = []
    for rid, doc in rows.items():
        relevance = any_of_scores(found.get(rid, (0.0, doc))[0], walked.get(rid, (0.0, doc))[0])
        prior = float(doc.get("weight_flt", 0.0) or 0.0) / top_weight if top_weight > 0 else 0.0
        hits.append(_relation_hit(doc, round((1.0 - weight_prior) * relevance + weight_prior * prior, 6)))
    hits.sort(key=lambda r: (-r.score, r.src_name, r.tgt_name, r.id))
    return hits


def ask_member_reports(batch: SearchBatch, kb_ids: Sequence[str], nodes: Sequence[Node]
                       ) -> list[tuple[SearchRequest, Ticket]]:
    """The listings of the reports of the communities of entities ``nodes`` (per knowledge base: keys
    are only unique within one), asked of ``batch`` for ``rank_reports``."""
    keys: dict[str, set[str]] = defaultdict(set)
    for kb, key in nodes:
        keys[kb].add(key)
    requests = [listing_request([kb], [eq("knowledge_graph_kwd", CommunityReport.KIND),
                                       any_of("entity_keys_kwd", sorted(keys[kb]))], REPORT_FIELDS)
                for kb in keys]
    return [(request, batch.ask(request)) for request in requests]


def rank_reports(store: DocStore, tenant: str, kb_ids: Sequence[str], entities: Sequence[EntityHit],
                 searched: Sequence[Hit], params: KGParams, batch: SearchBatch | None = None,
                 asked: list[tuple[SearchRequest, Ticket]] | None = None) -> list[ReportHit]:
    """The reports of the chosen entities' communities (``asked``: their listings, asked of ``batch``
    with other reads by ``ask_member_reports``, for these entities or a set holding them) and those the question's own search found
    (``searched``: reports by text and vector, REPORT_FIELDS), ranked."""
    batch = batch if batch is not None else SearchBatch(store, tenant)
    asked = asked if asked is not None else ask_member_reports(batch, kb_ids, [(e.kb_id, e.key) for e in entities])
    member: dict[str, float] = defaultdict(float)
    docs: dict[str, dict] = {}
    by_kb: dict[str, dict[str, float]] = defaultdict(dict)
    for e in entities:
        by_kb[e.kb_id][e.key] = e.score
    for request, ticket in asked:
        keyed = by_kb[request.kb_ids[0]]
        for doc in listed_rows(store, tenant, batch, ticket, request):
            if not any(k in keyed for k in doc.get("entity_keys_kwd") or []):
                continue  # listed for a wider set of entities than those chosen (retrieval._ranked_pool)
            docs[doc["id"]] = doc
            member[doc["id"]] = sum(keyed.get(k, 0.0) for k in doc.get("entity_keys_kwd") or [])
    top_member = max(member.values(), default=0.0)
    text: dict[str, float] = {}
    for hit in searched:
        docs.setdefault(hit.id, hit.doc)
        text[hit.id] = hit.score
    hits = []
    for rid, doc in docs.items():
        relevance = any_of_scores(member.get(rid, 0.0) / top_member if top_member > 0 else 0.0, text.get(rid, 0.0))
        rating = float(doc.get("rating_flt", 0.0) or 0.0)
        # a slight preference for reports their writer rated important, never enough to beat relevance
        final = relevance * (0.9 + 0.1 * min(1.0, max(0.0, rating / 10.0)))
        hits.append(_report_hit(doc, round(final, 6)))
    hits.sort(key=lambda r: (-r.score, r.level, r.id))
    return hits
