"""Entity rows read with their graph scores.

An entity's PageRank and community ids live in its score row (``records.EntityScore``), which only
the graph refresh writes: a refresh moves PageRank for nearly every entity, and a score row is small,
where the entity's own row carries its vector (Elasticsearch rewrites a row whole, vector and all).
The readers here hand entity rows out with ``pagerank_flt`` and ``community_ids_kwd`` taken from the
score row, as if the row held them, each in one read of the store where the rows are read by id.

A row without a score row keeps what it holds itself: rows written by hand, or by a kbgraph from
before score rows (such a knowledge base reads as it was written until its next graph refresh, which
writes a score row for every entity; ``kbgraph graph refresh --force`` does it at once).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from kbgraph.store.base import Condition, Doc, DocStore, SearchRequest, eq
from kbgraph.store.records import Entity, EntityScore, entity_score_id, scored_entity_id

# the fields a score row lends its entity's row
JOINED_FIELDS = ("pagerank_flt", "community_ids_kwd")
# what is read of a score row
SCORE_FIELDS = ["id", *JOINED_FIELDS]
# ids per read
_BATCH = 1000


def join_scores(docs: Iterable[Doc], scores: Mapping[str, Doc | None]) -> None:
    """Give each entity row (with its ``id``) the PageRank and communities of its score row in
    ``scores`` (by entity row id); a row without one keeps its own."""
    for doc in docs:
        score = scores.get(doc.get("id", ""))
        if score is not None:
            doc["pagerank_flt"] = float(score.get("pagerank_flt", 0.0) or 0.0)
            doc["community_ids_kwd"] = list(score.get("community_ids_kwd") or [])


def score_rows(store: DocStore, tenant: str, kb_ids: Sequence[str], entity_ids: Sequence[str]) -> dict[str, Doc]:
    """The score rows of these entities, by entity row id (entities without one left out)."""
    wanted = list(dict.fromkeys(entity_ids))
    out: dict[str, Doc] = {}
    for start in range(0, len(wanted), _BATCH):
        ids = [entity_score_id(i) for i in wanted[start:start + _BATCH]]
        for doc in store.get(tenant, list(kb_ids), ids, fields=SCORE_FIELDS):
            out[scored_entity_id(doc["id"])] = doc
    return out


def get_entities(store: DocStore, tenant: str, kb_ids: Sequence[str], ids: Sequence[str],
                 fields: Sequence[str] | None = None) -> list[Doc]:
    """``store.get`` of entity rows, their scores joined: the rows and their score rows in one read."""
    wanted = list(dict.fromkeys(ids))
    asked = None if fields is None else list(dict.fromkeys(["id", *fields, *JOINED_FIELDS]))
    rows: list[Doc] = []
    for start in range(0, len(wanted), _BATCH):
        part = wanted[start:start + _BATCH]
        found = store.get(tenant, list(kb_ids), [*part, *(entity_score_id(i) for i in part)], fields=asked)
        own = set(part)
        entities = [d for d in found if d["id"] in own]
        join_scores(entities, {scored_entity_id(d["id"]): d for d in found if d["id"] not in own})
        rows += entities
    return rows


def all_scores(store: DocStore, tenant: str, kb_ids: Sequence[str]) -> dict[str, Doc]:
    """Every score row of these knowledge bases, by entity row id (small rows: no vector, no text)."""
    return {scored_entity_id(d["id"]): d for d in store.scan(tenant, list(kb_ids), [eq("knowledge_graph_kwd",
                                                                                     EntityScore.KIND)],
                                                              fields=SCORE_FIELDS)}


def scan_entities(store: DocStore, tenant: str, kb_ids: Sequence[str], where: Sequence[Condition] = (),
                  fields: Sequence[str] | None = None) -> Iterator[Doc]:
    """``store.scan`` of the entity rows matching ``where``, their scores joined (every score row of
    the knowledge bases read first)."""
    scores = all_scores(store, tenant, kb_ids)
    for doc in store.scan(tenant, list(kb_ids), [eq("knowledge_graph_kwd", Entity.KIND), *where], fields=fields):
        join_scores([doc], scores)
        yield doc


def ranked_entities(store: DocStore, tenant: str, kb_ids: Sequence[str], limit: int, *,
                    where: Sequence[Condition] = (), fields: Sequence[str] | None = None,
                    order_by: Sequence[tuple[str, str]] = (("pagerank_flt", "desc"),)) -> list[Doc]:
    """The first ``limit`` entity rows in ``order_by`` (highest PageRank first; ties in id order),
    their scores joined. ``where`` and ``order_by`` name fields a score row holds (entity_type_kwd,
    mention_count_int, pagerank_flt, community_ids_kwd): the listing walks the score rows, then the
    rows it found are read. Knowledge bases without score rows (not refreshed since an older kbgraph
    wrote them) are listed from their entity rows."""
    if limit <= 0:
        return []
    hits = store.search(tenant, SearchRequest(
        kb_ids=list(kb_ids), where=[*where, eq("knowledge_graph_kwd", EntityScore.KIND)], order_by=list(order_by),
        limit=limit, fields=["id"], count_total=False)).hits
    if not hits and not _has_scores(store, tenant, kb_ids):
        return _entity_listing(store, tenant, kb_ids, limit, where, order_by, fields)
    scored = [scored_entity_id(h.id) for h in hits]
    rows = get_entities(store, tenant, kb_ids, scored, fields)
    if len(hits) < limit:
        # entities merged since the last refresh have no score row yet: PageRank 0, after every
        # scored one (as their rows read until the refresh); among them, their own order then id
        seen = set(scored)
        newer = _entity_listing(store, tenant, kb_ids, limit + len(hits), where, order_by, fields)
        rows += [d for d in newer if d["id"] not in seen][:limit - len(hits)]
    return rows


def _entity_listing(store: DocStore, tenant: str, kb_ids: Sequence[str], limit: int, where: Sequence[Condition],
                    order_by: Sequence[tuple[str, str]], fields: Sequence[str] | None) -> list[Doc]:
    """Entity rows listed by their own fields (those without a score row keep what they hold)."""
    asked = None if fields is None else list(dict.fromkeys(["id", *fields]))
    return [h.doc for h in store.search(tenant, SearchRequest(
        kb_ids=list(kb_ids), where=[*where, eq("knowledge_graph_kwd", Entity.KIND)],
        order_by=[*order_by, ("id", "asc")], limit=limit, fields=asked, count_total=False)).hits]


def _has_scores(store: DocStore, tenant: str, kb_ids: Sequence[str]) -> bool:
    return bool(store.search(tenant, SearchRequest(kb_ids=list(kb_ids), where=[eq("knowledge_graph_kwd",
                                                                                   EntityScore.KIND)],
                                                   limit=1, fields=["id"], count_total=False)).hits)
