"""The PageRank phase of the refresh: every entity's PageRank over the relation graph (to nine
digits), kept on the entities; the refresh's writes store those that moved in their score rows
(RowChanges.track).
"""

from __future__ import annotations

from kbgraph.index.context import KBContext
from kbgraph.store.records import Entity, Relation


def refresh_pagerank(ctx: KBContext, entities: list[Entity], relations: list[Relation]) -> int:
    from kbgraph.graph.pagerank import weighted_pagerank

    ranks = weighted_pagerank([(r.src_key, r.tgt_key, r.weight) for r in relations], [e.key for e in entities])
    updated = 0
    for entity in entities:
        rank = round(float(ranks.get(entity.key, 0.0)), 9)
        if rank != round(entity.pagerank, 9):
            entity.pagerank = rank
            updated += 1
    return updated

