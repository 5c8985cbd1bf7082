"""What a knowledge base holds, in a form two knowledge bases built from the same files share.

Row ids and document ids differ between two knowledge bases (ids are made per knowledge base), and a
description's sentences follow document ids, so they are compared as sets; everything else is
compared as it is: every chunk's text, every mention, every entity and relation row (counts, weights,
how many documents and chunks they come from), PageRank to its stored precision, communities,
reports, and the status of each graph phase. A write lost shows as a missing row or a lower count; a
write applied twice, as an extra row or a higher count.
"""

from __future__ import annotations

from typing import Any

from kbgraph.graph.inspect import graph_stats
from kbgraph.graph.invariants import stored_graph
from kbgraph.store.base import DocStore, eq, missing
from kbgraph.store.records import Chunk, CommunityReport, EntityMention, RelationMention


def _sentences(text: str) -> tuple[str, ...]:
    return tuple(sorted(text.split("\n")))


def _rows(store: DocStore, tenant: str, kb_id: str, kind: str) -> list[dict[str, Any]]:
    return list(store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", kind)]))


def kb_fingerprint(store: DocStore, tenant: str, kb_id: str) -> dict[str, Any]:
    chunks = [Chunk.from_doc(d) for d in store.scan(tenant, [kb_id], [missing("knowledge_graph_kwd")])]
    snap = stored_graph(store, tenant, kb_id)
    reports = [CommunityReport.from_doc(d) for d in _rows(store, tenant, kb_id, CommunityReport.KIND)]
    stats = graph_stats(store, tenant, kb_id)
    return {
        "chunks": sorted((c.doc_name, c.position, c.content) for c in chunks),
        "entity_mentions": sorted((m.key, m.name, m.type, m.description, m.weight) for m in
                                  (EntityMention.from_doc(d) for d in _rows(store, tenant, kb_id, EntityMention.KIND))),
        "relation_mentions": sorted((m.src_key, m.tgt_key, m.description, tuple(m.keywords), m.weight) for m in
                                    (RelationMention.from_doc(d)
                                     for d in _rows(store, tenant, kb_id, RelationMention.KIND))),
        "entities": {k: (e.name, e.type, _sentences(e.description), tuple(sorted(e.aliases)), e.mention_count,
                         len(e.doc_ids), len(e.chunk_ids), round(e.pagerank, 9), tuple(sorted(e.community_ids)))
                     for k, e in snap.entities.items()},
        "relations": {k: (r.src_name, r.tgt_name, _sentences(r.description), tuple(sorted(r.keywords)), r.weight,
                          r.mention_count, len(r.doc_ids), len(r.chunk_ids)) for k, r in snap.relations.items()},
        "reports": sorted((r.level, r.community, r.parent, tuple(sorted(r.member_keys)), r.title, r.rating)
                          for r in reports),
        "phases": {phase: (state["status"], state["stale"]) for phase, state in stats.phases.items()},
    }


def differences(have: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """What differs, part by part (empty when the two are the same)."""
    problems = []
    for part in want:
        if have[part] == want[part]:
            continue
        if isinstance(want[part], dict):
            missing = sorted(set(want[part]) - set(have[part]))[:5]
            extra = sorted(set(have[part]) - set(want[part]))[:5]
            changed = [k for k in want[part] if k in have[part] and have[part][k] != want[part][k]][:5]
            problems.append(f"{part}: missing {missing}, extra {extra}, changed "
                            f"{[(k, have[part][k], want[part][k]) for k in changed]}")
        else:
            problems.append(f"{part}: {len(have[part])} rows, a clean build has {len(want[part])}; "
                            f"first difference {next((a, b) for a, b in zip(have[part] + [None], want[part] + [None]) if a != b)}")
    return problems
