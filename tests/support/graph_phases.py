"""What a knowledge base's refresh phases made, in a form a clean rebuild from the same documents
must match: every entity's PageRank and communities, and every community report (all of it but the
graph version it was written at, which counts the changes that led to it, not what it says).

kbgraph/graph/invariants.py compares the entity and relation rows with a rebuild from the mentions;
this compares what the refresh derives from those rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kbgraph.graph.scores import scan_entities
from kbgraph.store.base import DocStore, eq
from kbgraph.store.records import CommunityReport, Entity


@dataclass
class PhaseProducts:
    pagerank: dict[str, float]  # entity key -> PageRank
    communities: dict[str, list[str]]  # entity key -> its communities' labels, sorted
    reports: dict[str, tuple[Any, ...]]  # report id -> every field but the graph version


def phase_products(store: DocStore, tenant: str, kb_id: str) -> PhaseProducts:
    products = PhaseProducts({}, {}, {})
    for doc in scan_entities(store, tenant, [kb_id]):  # PageRank and communities from the score rows
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


def phases_by_content(store: DocStore, tenant: str, kb_id: str) -> PhaseProducts:
    """The phase products in the form another knowledge base built from the same files must match:
    PageRank and communities as they are, and each report under its community's label (which names its
    level and members) instead of its id (which names the knowledge base too), with what it says but
    its text: level, parent, members, title, the relations its findings are about, rating and why.
    The text of a report put together from its rows (no model) quotes their descriptions cut to a
    length, and a description's fragments follow chunk-id order, which follows document ids, which
    differ between the two knowledge bases (tests/support/graphs.py sorts the rows' own fragments for
    the same reason); the input hash, search tokens and vector follow the text."""
    products = phase_products(store, tenant, kb_id)
    products.reports = {
        community: (level, parent, members, title, [name for name, _ in findings], rating, why)
        for (level, community, parent, members, title, _summary, findings, rating, why, *_text)
        in products.reports.values()}
    return products


def assert_same_phases(changed: PhaseProducts, rebuilt: PhaseProducts) -> None:
    """The refresh after adds and deletes made what it makes for a clean rebuild. PageRank to its
    stored precision (nine digits: the walk may add the same weights in another order)."""
    assert changed.pagerank.keys() == rebuilt.pagerank.keys()
    assert changed.pagerank == pytest.approx(rebuilt.pagerank, abs=2e-9)
    assert changed.communities == rebuilt.communities
    assert changed.reports == rebuilt.reports
