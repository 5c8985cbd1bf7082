"""What the refresh phases share: every graph row read once (``GraphRows``), the field changes they
gather for those rows (``RowChanges``, one patch per row), and the result they fill (``RefreshResult``).

Kept apart from the phases so that each phase's module depends on this one, not on the others.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from kbgraph.graph.scores import JOINED_FIELDS, join_scores
from kbgraph.index.context import KBContext
from kbgraph.store.base import Condition, eq
from kbgraph.store.records import Entity, EntityScore, Relation, entity_id, scored_entity_id


@dataclass
class RefreshResult:
    version: int
    pagerank_updated: int = 0
    communities: int = 0
    reports_generated: int = 0
    reports_reused: int = 0
    reports_removed: int = 0
    report_fallbacks: int = 0
    embedded: int = 0
    summarized: int = 0
    # document id -> why a description it contributes to could not be summarized (left pending)
    summary_failures: dict[str, str] = field(default_factory=dict)
    resolution_asked: int = 0
    resolution_merged: int = 0
    skipped: list[str] = field(default_factory=list)


@dataclass
class GraphRows:
    """Every entity and relation row of a KB, read once per refresh phase that needs them all."""

    entities: list[Entity]
    relations: list[Relation]
    # rows whose text changed since their last vector (``embedded_int`` 0)
    unembedded: set[str] = field(default_factory=set)
    # rows whose description waits for the summary pass (``summary_pending_int`` 1)
    pending: set[str] = field(default_factory=set)
    # entity row id -> its stored score row (EntityScore), for those that have one
    scores: dict[str, EntityScore] = field(default_factory=dict)
    # score rows whose entity is gone
    orphan_scores: list[str] = field(default_factory=list)


# what the refresh's phases read of every row: all but the tokens and the derivation, which only the
# rows it writes again need (those to be summarized or embedded: read whole). On Elasticsearch
# they are half the bytes of a scan (a MuSiQue refresh scanned 38 MB of rows in 5.9 s).
_LEAN = {
    Entity: ["id", "kb_id", "knowledge_graph_kwd", "entity_key_kwd", "name_kwd", "entity_type_kwd",
             "content_with_weight", "aliases_kwd", "doc_ids_kwd", "chunk_ids_kwd", "mention_count_int",
             "available_int", "embedded_int", "summary_pending_int", *JOINED_FIELDS],
    Relation: ["id", "kb_id", "knowledge_graph_kwd", "src_key_kwd", "tgt_key_kwd", "src_name_kwd", "tgt_name_kwd",
               "content_with_weight", "keywords_kwd", "weight_flt", "doc_ids_kwd", "chunk_ids_kwd",
               "mention_count_int", "available_int", "embedded_int", "summary_pending_int"],
}


def _graph_rows(ctx: KBContext) -> GraphRows:
    rows = GraphRows([], [])
    # score rows are small (no vector, no text): read whole, the entities' scores joined from them
    stored = {scored_entity_id(doc["id"]): doc for doc in ctx.store.scan(
        ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", EntityScore.KIND)])}
    for kind, into in ((Entity, rows.entities), (Relation, rows.relations)):
        docs = list(ctx.store.scan(ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", kind.KIND)], fields=_LEAN[kind]))
        rewritten = [d["id"] for d in docs if not d.get("embedded_int") or d.get("summary_pending_int")]
        whole = {d["id"]: d for start in range(0, len(rewritten), 1000)
                 for d in ctx.store.get(ctx.tenant, [ctx.kb_id], rewritten[start:start + 1000])}
        for doc in docs:
            doc = whole.get(doc["id"], doc)
            if kind is Entity:
                join_scores([doc], stored)
            into.append(kind.from_doc(doc))
            if not doc.get("embedded_int"):
                rows.unembedded.add(doc["id"])
            if doc.get("summary_pending_int"):
                rows.pending.add(doc["id"])
    entity_ids = {e.id for e in rows.entities}
    rows.scores = {i: EntityScore.from_doc(doc) for i, doc in stored.items() if i in entity_ids}
    rows.orphan_scores = sorted(doc["id"] for i, doc in stored.items() if i not in entity_ids)
    return rows


def stored_doc(row: Entity | Relation) -> dict:
    """The row as it is stored: an entity's PageRank and communities stay in its score row (EntityScore)."""
    doc = row.to_doc()
    if isinstance(row, Entity):
        for name in JOINED_FIELDS:
            doc.pop(name, None)
    return doc


# marks a change that is a whole row (RowChanges)
WHOLE = "\x00whole"
# rows whose changes wait for the refresh's last phase: an entity's patch holds its vector (384
# float32: ~1.6 KB) and a few numbers, ~2 KB in all, so ~100 MB at most
HELD_ROWS = 50_000
# rows written per patch
WRITE_ROWS = 4096


class RowChanges:
    """Field changes to existing rows, gathered across refresh phases and written as one patch per
    row, and the entities' score rows (``track``). On Elasticsearch a rewrite is the row indexed
    again, vector and all (~0.5 ms of the node's CPU a row, 20x a row without a vector), so on the
    MuSiQue corpus (11k entities) each rewrite spared is ~6 s of the node's CPU: PageRank and
    communities, which move for most entities, go to score rows, and a row's vector is its one patch.

    A row no later phase changes (``settled``: a relation's vector) is written with the next
    ``limit`` such rows; the others wait for ``write``, up to ``held`` rows (then they are written
    as they are, bounding memory on a very large graph). On a store that works in another process
    (``DocStore.remote``) the writes go on a thread of their own, so the store indexes while the
    refresh computes; ``write_behind`` starts writing every row held (the caller is done changing
    them) and ``write`` waits for every write and raises the first failure, its rows held again."""

    def __init__(self, ctx: KBContext, limit: int = WRITE_ROWS, held: int = HELD_ROWS) -> None:
        self.ctx = ctx
        self.limit = limit
        self.held = held
        self.rows: dict[str, dict] = {}
        # row id -> the whole row the changes complete (``add``'s ``whole``): written as a new row
        self.whole: dict[str, dict] = {}
        self.settled: set[str] = set()
        self._lock = threading.RLock()  # the embedding pass may add from its own thread
        self._writer: ThreadPoolExecutor | None = None
        self._writing: list[tuple[Future[None], dict[str, dict]]] = []
        self._scored: GraphRows | None = None

    def track(self, rows: GraphRows) -> None:
        """The rows whose entities' score rows (EntityScore: PageRank, communities) each ``write``
        and ``write_behind`` bring up to date: those that differ from the stored ones are written
        whole, and those whose entity is gone removed."""
        with self._lock:
            self._scored = rows

    def add(self, row_id: str, fields: dict, *, settled: bool = False, whole: Entity | Relation | None = None) -> None:
        """Set ``fields`` on the row ``row_id``. ``whole``: the row as it is stored, but for these
        fields (the refresh read it, and holds the knowledge base): on a store in another process
        the row is then written whole, not patched. On Elasticsearch a patch is a search for the
        ids, then for each row a read of its stored fields and the row indexed again; written whole
        it is only indexed (the refresh's vectors of 11.8k rows on 600 MuSiQue passages: 16 s as
        patches, 10 s whole, 4 s less of the node's CPU). The embedded store patches in place (a row
        written whole has its text indexed again)."""
        with self._lock:
            self.rows.setdefault(row_id, {}).update(fields)
            if whole is not None and self.ctx.store.remote:
                self.whole[row_id] = stored_doc(whole)
            if settled:
                self.settled.add(row_id)
            if len(self.settled) >= self.limit:
                self._write(sorted(self.settled))
            elif len(self.rows) >= self.held:
                self._write(list(self.rows))

    def _write(self, ids: list[str]) -> None:
        for start in range(0, len(ids), self.limit):
            part = {row_id: self._pop(row_id) for row_id in ids[start:start + self.limit]}
            self.settled.difference_update(part)
            if self.ctx.store.remote:
                if self._writer is None:
                    self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbgraph-row-writes")
                self._writing.append((self._writer.submit(self._patch, part), part))
            else:
                try:
                    self._patch(part)
                except BaseException:
                    self._hold_again(part)
                    raise

    def _pop(self, row_id: str) -> dict:
        """The changes of a row, taken out: the whole row with them where it is known, marked WHOLE."""
        fields = self.rows.pop(row_id)
        whole = self.whole.pop(row_id, None)
        return {**whole, **fields, WHOLE: True} if whole is not None else fields

    def _patch(self, part: dict[str, dict]) -> None:
        whole = [{k: v for k, v in doc.items() if k != WHOLE} for doc in part.values() if doc.get(WHOLE)]
        patches = {row_id: fields for row_id, fields in part.items() if not fields.get(WHOLE)}
        if whole:
            self.ctx.store.upsert(self.ctx.tenant, self.ctx.kb_id, whole, refresh=False)
        if patches:
            self.ctx.store.patch(self.ctx.tenant, self.ctx.kb_id, patches, refresh=False)

    def _write_scores(self) -> None:
        """Queue the score rows that changed since they were stored (see ``track``)."""
        rows = self._scored
        if rows is None:
            return
        due: list[EntityScore] = []
        for entity in rows.entities:
            score = EntityScore.of(entity)
            if rows.scores.get(entity.id) != score:
                due.append(score)
                rows.scores[entity.id] = score
        gone, rows.orphan_scores = rows.orphan_scores, []
        for start in range(0, max(len(due), 1 if gone else 0), self.limit):
            part, drop = due[start:start + self.limit], gone if start == 0 else []
            if self.ctx.store.remote:
                if self._writer is None:
                    self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbgraph-row-writes")
                self._writing.append((self._writer.submit(self._store_scores, rows, part, drop), {}))
            else:
                self._store_scores(rows, part, drop)

    def _store_scores(self, rows: GraphRows, part: list[EntityScore], gone: list[str]) -> None:
        try:
            if part:
                # score rows in segments of their own (a refresh before and after them): the next
                # refresh rewrites most of them, and Elasticsearch merges a segment away once enough
                # of its rows are rewritten; among vectors, that merge would index every vector of
                # the segment again (measured on MuSiQue: a docs rm's merges went from 15 s to 1 s of
                # the node's threads)
                self.ctx.store.refresh(self.ctx.tenant)
                self.ctx.store.upsert(self.ctx.tenant, self.ctx.kb_id, [s.to_doc() for s in part], refresh=True)
            if gone:
                self.ctx.store.delete(self.ctx.tenant, [self.ctx.kb_id], [Condition("id", "in", gone)], refresh=False)
        except BaseException:
            with self._lock:  # written again by the next write
                for score in part:
                    rows.scores.pop(entity_id(score.kb_id, score.key), None)
                rows.orphan_scores += gone
            raise

    def _hold_again(self, part: dict[str, dict]) -> None:
        """A part that failed to be written is held again (a failed refresh writes what it computed),
        under any change made to its rows since."""
        for row_id, fields in part.items():
            if fields.pop(WHOLE, False):
                self.whole.setdefault(row_id, fields)
            self.rows[row_id] = {**fields, **self.rows.get(row_id, {})}

    def write_behind(self) -> None:
        """Start writing every row held: the caller changes none of them any more."""
        with self._lock:
            self._write(list(self.rows))
            self._write_scores()

    def write(self) -> None:
        """Write every row held and wait for every write under way; raises the first failure."""
        with self._lock:
            self._write(list(self.rows))
            self._write_scores()
            writing, self._writing = self._writing, []
            writer, self._writer = self._writer, None
        # waited for outside the lock: a score write that fails takes it to hold its rows again
        errors = [(future.exception(), part) for future, part in writing]
        if writer is not None:
            writer.shutdown()
        failure: BaseException | None = None
        with self._lock:
            for error, part in errors:
                if error is not None:
                    self._hold_again(part)
                    failure = failure or error
        if failure is not None:
            raise failure
