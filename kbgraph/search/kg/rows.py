"""The kg mode's reads of graph rows: the fields each kind returns, the hybrid search over one kind,
rows turned into entity/relation/report hits, and the entity, mention and chunk rows read by id.
The ppr mode and global search read rows the same way."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from kbgraph.search.batch import SearchBatch, Ticket
from kbgraph.search.context import EntityHit, RelationHit, ReportHit, RetrievedChunk
from kbgraph.store.base import (
    Condition,
    DocStore,
    Hit,
    SearchRequest,
    TextQuery,
    VectorQuery,
    any_of,
    eq,
    vector_field,
)
from kbgraph.store.records import EntityMention, entity_id

# BM25 and kNN candidates a graph-row search looks at per place of its page, and at least: 4 per place
# and 64, 3 and 48 gave the same rankings on every evaluation set (2 and 32 moved recall@2 on two);
# each candidate is a hit the store sends and fuses, 10% of a kg query on Elasticsearch (bench/README.md)
CANDIDATES_PER_PLACE, MIN_CANDIDATES = 3, 48

ENTITY_FIELDS = ["id", "kb_id", "entity_key_kwd", "name_kwd", "entity_type_kwd", "content_with_weight",
                 "chunk_ids_kwd", "pagerank_flt", "community_ids_kwd", "mention_count_int"]
RELATION_FIELDS = ["id", "kb_id", "src_key_kwd", "tgt_key_kwd", "src_name_kwd", "tgt_name_kwd",
                   "content_with_weight", "keywords_kwd", "weight_flt", "chunk_ids_kwd"]
# what a relation leads to, without what it says: its ends and the passages stating it (keys:
# SearchRequest.key_fields, chunk_ids_kwd a list of them)
RELATION_KEYS = ["id", "kb_id", "src_key_kwd", "tgt_key_kwd", "chunk_ids_kwd"]
RELATION_KEY_LISTS = ["chunk_ids_kwd"]
REPORT_FIELDS = ["id", "kb_id", "level_int", "community_kwd", "title_kwd", "content_with_weight",
                 "findings_with_weight", "rating_flt", "entity_keys_kwd"]
CHUNK_FIELDS = ["id", "kb_id", "doc_id", "docnm_kwd", "content_with_weight", "position_int", "available_int"]

Node = tuple[str, str]  # (kb_id, key): keys are only unique within a knowledge base


def _entity_hit(doc: dict, score: float, hops: int = 0) -> EntityHit:
    return EntityHit(id=doc["id"], kb_id=doc.get("kb_id", ""), key=doc.get("entity_key_kwd", ""),
                     name=doc.get("name_kwd", "") or doc.get("entity_key_kwd", ""),
                     type=doc.get("entity_type_kwd", ""), description=doc.get("content_with_weight", ""),
                     score=score, pagerank=float(doc.get("pagerank_flt", 0.0) or 0.0), hops=hops,
                     chunk_ids=list(doc.get("chunk_ids_kwd") or []),
                     community_ids=list(doc.get("community_ids_kwd") or []))


def _relation_hit(doc: dict, score: float) -> RelationHit:
    return RelationHit(id=doc["id"], kb_id=doc.get("kb_id", ""), src_key=doc.get("src_key_kwd", ""),
                       tgt_key=doc.get("tgt_key_kwd", ""), src_name=doc.get("src_name_kwd", "") or doc.get("src_key_kwd", ""),
                       tgt_name=doc.get("tgt_name_kwd", "") or doc.get("tgt_key_kwd", ""),
                       description=doc.get("content_with_weight", ""), score=score,
                       weight=float(doc.get("weight_flt", 0.0) or 0.0), keywords=list(doc.get("keywords_kwd") or []),
                       chunk_ids=list(doc.get("chunk_ids_kwd") or []))


def report_content(doc: dict) -> str:
    parts = [doc.get("content_with_weight", "")]
    for finding in doc.get("findings_with_weight") or []:
        if isinstance(finding, dict):
            parts.append(f"- {finding.get('summary', '')}: {finding.get('explanation', '')}".rstrip(": "))
    return "\n".join(p for p in parts if p.strip())


def _report_hit(doc: dict, score: float) -> ReportHit:
    return ReportHit(id=doc["id"], kb_id=doc.get("kb_id", ""), level=int(doc.get("level_int", 0) or 0),
                     community=doc.get("community_kwd", ""), title=doc.get("title_kwd", ""),
                     content=report_content(doc), score=score, rating=float(doc.get("rating_flt", 0.0) or 0.0))


def kind_request(kb_ids: Sequence[str], kind: str, tokens: Sequence[str], fields: dict[str, float],
                 vector: np.ndarray | None, limit: int, vector_weight: float, where: Sequence[Condition] = (),
                 returned: Sequence[str] | None = None, floor: float = 0.0,
                 key_fields: bool = False, list_fields: Sequence[str] = ()) -> SearchRequest | None:
    """The hybrid (or text-only / vector-only) search over one kind of graph row, None when there is
    nothing to search with; ``floor`` is the embedding model's similarity floor (VectorQuery);
    ``key_fields``: ``returned`` are keys, ``list_fields`` those of them holding lists
    (SearchRequest.key_fields)."""
    if not tokens and vector is None:
        return None
    return SearchRequest(
        kb_ids=list(kb_ids), where=[eq("knowledge_graph_kwd", kind), *where],
        text=TextQuery(tokens=list(tokens), fields=fields) if tokens else None,
        vector=VectorQuery(field=vector_field(len(vector)), vector=np.asarray(vector).tolist(), floor=floor)
        if vector is not None else None,
        vector_weight=vector_weight, candidates=max(limit * CANDIDATES_PER_PLACE, MIN_CANDIDATES), limit=limit,
        fields=returned, key_fields=key_fields, list_fields=tuple(list_fields))


def kind_search(store: DocStore, tenant: str, kb_ids: Sequence[str], kind: str, tokens: Sequence[str],
                fields: dict[str, float], vector: np.ndarray | None, limit: int, vector_weight: float,
                where: Sequence[Condition] = (), returned: Sequence[str] | None = None,
                floor: float = 0.0) -> list[Hit]:
    """The hits of ``kind_request``."""
    request = kind_request(kb_ids, kind, tokens, fields, vector, limit, vector_weight, where, returned, floor)
    return store.search(tenant, request).hits if request is not None else []


def relation_ends(doc: dict) -> tuple[Node, Node]:
    kb = doc.get("kb_id", "")
    return (kb, doc.get("src_key_kwd", "")), (kb, doc.get("tgt_key_kwd", ""))


def _fetch_entities(store: DocStore, tenant: str, kb_ids: Sequence[str], nodes: Iterable[Node]) -> dict[Node, dict]:
    ids = [entity_id(kb, key) for kb, key in nodes]
    out: dict[Node, dict] = {}
    for start in range(0, len(ids), 500):
        for doc in store.get(tenant, list(kb_ids), ids[start:start + 500], fields=ENTITY_FIELDS):
            out[(doc.get("kb_id", ""), doc.get("entity_key_kwd", ""))] = doc
    return out


# rows a listing asks for at once (a scan's page); a listing that fills it is scanned instead
LISTING_ROWS = 1000


def listing_request(kb_ids: Sequence[str], where: Sequence[Condition], fields: Sequence[str],
                    key_fields: bool = False) -> SearchRequest:
    """Every row matching ``where``, as a listing (in id order, as a scan reads them) that can go to
    the store with a query's other searches (``SearchBatch``); ``listed_rows`` reads it.
    ``key_fields``: ``fields`` are keys (SearchRequest.key_fields)."""
    return SearchRequest(kb_ids=list(kb_ids), where=list(where), limit=LISTING_ROWS, fields=list(fields),
                         count_total=False, key_fields=key_fields)


def listed_rows(store: DocStore, tenant: str, batch: SearchBatch, ticket: Ticket, request: SearchRequest) -> list[dict]:
    """The rows of a ``listing_request`` asked of ``batch``: its page, or a scan when the page was full."""
    hits = batch.hits(ticket)
    if len(hits) < request.limit:
        return [hit.doc for hit in hits]
    return list(store.scan(tenant, list(request.kb_ids), list(request.where), fields=request.fields))


# keys all (single-valued keywords and numbers): listed from doc values on Elasticsearch
MENTION_FIELDS = ["kb_id", "entity_key_kwd", "chunk_id_kwd", "weight_flt"]


def ask_mentions(batch: SearchBatch, kb_ids: Sequence[str], nodes: Iterable[Node]
                 ) -> list[tuple[SearchRequest, Ticket]]:
    """The listings of the mention rows of ``nodes`` (``mention_weights``), asked of ``batch``."""
    keys = sorted({key for _, key in nodes})
    requests = [listing_request(kb_ids, [eq("knowledge_graph_kwd", EntityMention.KIND),
                                         any_of("entity_key_kwd", keys[start:start + 200])], MENTION_FIELDS,
                                key_fields=True)
                for start in range(0, len(keys), 200)]
    return [(request, batch.ask(request)) for request in requests]


def mention_weights(store: DocStore, tenant: str, kb_ids: Sequence[str], nodes: Iterable[Node],
                    batch: SearchBatch | None = None, asked: list[tuple[SearchRequest, Ticket]] | None = None
                    ) -> dict[Node, dict[str, float]]:
    """Entity -> chunk id -> weight of its mention there (the nlp extractor's weight is the number
    of the chunk's sentences naming it; an LLM's is its own strength), read from the mention rows
    (``asked``: their listings, asked of ``batch`` with other searches by ``ask_mentions``)."""
    wanted = set(nodes)
    batch = batch if batch is not None else SearchBatch(store, tenant)
    asked = asked if asked is not None else ask_mentions(batch, kb_ids, wanted)
    out: dict[Node, dict[str, float]] = defaultdict(dict)
    for request, ticket in asked:
        for doc in listed_rows(store, tenant, batch, ticket, request):
            node = (doc.get("kb_id", ""), doc.get("entity_key_kwd", ""))
            if node in wanted:
                cid = doc.get("chunk_id_kwd", "")
                out[node][cid] = max(out[node].get(cid, 0.0), float(doc.get("weight_flt", 1.0) or 1.0))
    return dict(out)


# rows read past a chunk list's last place for the chunks tied with it
TIE_READS = 32


def ranked_chunk_ids(scores: Mapping[str, float]) -> list[str]:
    """Chunk ids best score first (rounded as compared), ties in id order until their rows are read."""
    return sorted(scores, key=lambda cid: (-round(scores[cid], 6), cid))


def reading_window(ranked: Sequence[str], scores: Mapping[str, float], start: int, wanted: int,
                   tie_reads: int) -> tuple[int, int]:
    """Where a read of ``wanted`` chunks from ``start`` of ``ranked`` ends, the chunks tied with its
    last one taken along (``tie_reads`` at most), and the tie reads left."""
    end = start + wanted
    while tie_reads and end < len(ranked) and round(scores[ranked[end]], 6) == round(scores[ranked[end - 1]], 6):
        end, tie_reads = end + 1, tie_reads - 1
    return end, tie_reads


def first_reads(scores: Mapping[str, float], limit: int) -> list[str]:
    """The chunks ``fetch_chunks`` reads first for this ranking (the first ``limit`` and their ties):
    a caller reading them ahead, with other rankings' in one read, leaves it nothing to read while
    no chunk has gone."""
    ranked = ranked_chunk_ids(scores)
    return ranked[:reading_window(ranked, scores, 0, limit, TIE_READS)[0]]


def fetch_chunks(store: DocStore, tenant: str, kb_ids: Sequence[str], scores: dict[str, float],
                 limit: int, source: str, known: Mapping[str, dict] | None = None) -> list[RetrievedChunk]:
    """The ``limit`` best-scored chunks that still exist and are visible, best first; chunks of equal
    score in their documents' order (name, then place), not their ids' (random per build: two builds
    of one corpus would cut a tie differently).

    ``known`` holds rows (CHUNK_FIELDS) the caller has already read, e.g. from a chunk search of the
    same question (``first_reads``); the others are read from the store."""
    if limit <= 0:
        return []
    known = known or {}
    ranked = ranked_chunk_ids(scores)
    out: list[RetrievedChunk] = []
    start, tie_reads = 0, TIE_READS
    # a chunk may have gone (document deleted since the graph was derived): read on until full; each
    # read takes the chunks tied with its last one along (a hub's many chunks of one share: TIE_READS
    # at most), so the ties are cut by document, not by id, in the same round trip
    while len(out) < limit and start < len(ranked):
        end, tie_reads = reading_window(ranked, scores, start, limit - len(out), tie_reads)
        batch, start = ranked[start:end], end
        out += _chunk_rows(store, tenant, kb_ids, batch, scores, source, known)
    out.sort(key=lambda c: (-c.score, c.doc_name, c.position, c.chunk_id))
    return out[:limit]


def _chunk_rows(store: DocStore, tenant: str, kb_ids: Sequence[str], ids: Sequence[str], scores: Mapping[str, float],
                source: str, known: Mapping[str, dict]) -> list[RetrievedChunk]:
    """The chunks of ``ids`` that exist and are visible, in that order, their rows read where
    ``known`` does not hold them."""
    unread = [cid for cid in ids if cid not in known]
    read = {doc["id"]: doc for doc in store.get(tenant, list(kb_ids), unread, fields=CHUNK_FIELDS)} if unread else {}
    out = []
    for cid in ids:
        doc = known.get(cid) or read.get(cid)
        if doc is None or doc.get("available_int", 1) != 1:
            continue
        score = round(scores[cid], 6)
        out.append(RetrievedChunk(chunk_id=doc["id"], kb_id=doc.get("kb_id", ""), doc_id=doc.get("doc_id", ""),
                                  doc_name=doc.get("docnm_kwd", ""), content=doc.get("content_with_weight", ""),
                                  position=int(doc.get("position_int", 0) or 0), score=score,
                                  graph_score=score, sources=[source]))
    return out

