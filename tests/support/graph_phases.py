"""What a knowledge base's refresh phases made, in a form a clean rebuild from the same documents
must match: every entity's PageRank and communities, and every community report (all of it but the
graph version it was written at, which counts the changes that led to it, not what it says).

kbgraph/graph/invariants.py compares the entity and relation rows with a rebuild from the mentions;
this compares what the refresh derives from those rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kbgraph.store.base import DocStore, eq
from kbgraph.store.records import CommunityReport, Entity


@dataclass
class PhaseProducts:
    pagerank: dict[str, float]  # entity key -> PageRank
    communities: dict[str, list[str]]  # entity key -> its communities' labels, sorted
    reports: dict[str, tuple[Any, ...]]  # report id -> every field but the graph version


def phase_products(store: DocStore, tenant: str, kb_id: str) -> PhaseProducts:
    products = PhaseProducts({}, {}, {})
    for doc in store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", Entity.KIND)]):
        entity = Entity.from_doc(doc)
        products.pagerank[entity.key] = entity.pagerank
        products.communities[entity.key] = sorted(entity.community_ids)
    for doc in store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", CommunityReport.KIND)]):
        r = CommunityReport.from_doc(doc)
        vector = None if r.vector is None else [round(float(x), 6) for x in r.vector]
        products.reports[r.id] = (r.level, r.community, r.parent, r.member_keys, r.title, r.summary,
                                  [(f.summary, f.explanation) for f in r.findings], r.rating, r.rating_explanation,
                                  r.content_tokens, r.input_hash, vector)
    return products


def assert_same_phases(changed: PhaseProducts, rebuilt: PhaseProducts) -> None:
    """The refresh after adds and deletes made what it makes for a clean rebuild. PageRank to its
    stored precision (nine digits: the walk may add the same weights in another order)."""
    assert changed.pagerank.keys() == rebuilt.pagerank.keys()
    assert changed.pagerank == pytest.approx(rebuilt.pagerank, abs=2e-9)
    assert changed.communities == rebuilt.communities
    assert changed.reports == rebuilt.reports
