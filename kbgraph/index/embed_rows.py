"""The vectors of the graph's rows: every entity and relation whose text changed since its last
vector gets a new one, once per refresh (a row touched by many documents of a run is embedded once,
in large batches). With ``relation_vectors`` ``chunks`` a relation's vector is its chunks' mean;
with ``entity_vectors`` ``chunk`` an entity of a single chunk gets that chunk's vector with its name's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kbgraph.index.chunks import embed_ahead
from kbgraph.index.context import KBContext, report_progress
from kbgraph.index.refresh_state import GraphRows, RowChanges
from kbgraph.llm.base import CancelCheck
from kbgraph.store.records import Entity, Relation
from kbgraph.utils.progress import ProgressFn, never, no_progress


def embed_pending(ctx: KBContext, rows: GraphRows, *, progress: ProgressFn = no_progress,
                  cancel: CancelCheck = never, batch_size: int = 0, into: RowChanges | None = None) -> int:
    """Give every entity and relation row of ``rows`` whose text changed since its last vector a
    new one.

    Merges leave this to one pass per refresh, so a row touched by many documents of one indexing
    run is embedded once, in large batches, instead of once per document. With ``into`` the new
    vectors join those changes instead of being written at once.
    """
    from kbgraph.graph.derive.vectors import entity_name_text, entity_text, entity_vector_from_chunk, relation_text

    # a batch fills every request the embedder may have in flight (a remote one waits on the
    # network per request: 2,212 rows took nine serial 0.8 s round trips at 256 a batch)
    batch_size = batch_size or max(256, ctx.settings.embedding_batch_size * ctx.settings.embedding_concurrency)
    relations = [r for r in rows.relations if r.id in rows.unembedded]
    from_chunks = 0
    if relations and ctx.settings.relation_vectors_from_chunks:
        relations, from_chunks = _relation_vectors_from_chunks(ctx, relations, into)
    entities = [e for e in rows.entities if e.id in rows.unembedded]
    # an entity of one chunk embeds its name only, its vector made with the chunk's (entity_vectors)
    single = ({e.id for e in entities if len(e.chunk_ids) == 1}
              if ctx.settings.entity_vectors_from_chunk else set())
    # entities and relations in the same batches: one round trip less when both are few
    pending: list[tuple[Entity | Relation, Callable[..., str]]] = (
        [(e, entity_name_text if e.id in single else entity_text) for e in entities]
        + [(r, relation_text) for r in relations])
    if ctx.settings.embedding_provider == "local":
        # no round trips to save: a batch per request, so progress moves every second or two; the
        # rows sorted by length first, so a small batch pads as little as the embedder's own sort
        batch_size = min(batch_size, ctx.settings.embedding_batch_size)
        pending.sort(key=lambda item: len(item[1](item[0])))
    total = from_chunks + len(pending)
    done = from_chunks
    report_progress(ctx, progress, "embed", done, total)
    batches = [pending[start:start + batch_size] for start in range(0, len(pending), batch_size)]
    texts = [[text_of(row) for row, text_of in batch] for batch in batches]
    chunkless: list[Entity] = []
    for vectors, batch in zip(embed_ahead(ctx, texts, cancel), batches):
        changes = into or RowChanges(ctx)
        chunks = _single_chunk_vectors(ctx, [row for row, _ in batch if row.id in single])
        for (row, _), vector in zip(batch, vectors):
            if row.id not in single:
                # a row's vector is its last change of the refresh (an entity's PageRank and
                # communities go to its score row): written with the next rows that are ready
                changes.add(row.id, {ctx.vector_name: vector, "embedded_int": 1}, settled=True, whole=row)
            elif row.chunk_ids[0] in chunks:
                row.vector = entity_vector_from_chunk(chunks[row.chunk_ids[0]], vector)
                row.vector_from_chunks = True
                changes.add(row.id, {ctx.vector_name: row.vector, "embedded_int": 2}, settled=True, whole=row)
            else:  # its chunk has no vector of this size: the text's, as without the setting
                chunkless.append(row)
        if into is None:
            changes.write()
        done += len(batch)
        report_progress(ctx, progress, "embed", done, total)
    if chunkless:
        _embed_texts(ctx, chunkless, cancel, into)
    rows.unembedded.clear()
    ctx.store.refresh(ctx.tenant)
    return done


def _embed_texts(ctx: KBContext, entities: list[Entity], cancel: CancelCheck, into: RowChanges | None) -> None:
    """The vectors of these entities' texts (single-chunk entities whose chunk has no vector of this size)."""
    from kbgraph.graph.derive.vectors import entity_text

    changes = into or RowChanges(ctx)
    for vectors in embed_ahead(ctx, [[entity_text(e) for e in entities]], cancel):
        for entity, vector in zip(entities, vectors):
            changes.add(entity.id, {ctx.vector_name: vector, "embedded_int": 1}, settled=True, whole=entity)
    if into is None:
        changes.write()


def _single_chunk_vectors(ctx: KBContext, entities: list[Entity]) -> dict[str, np.ndarray]:
    """The stored vectors of these single-chunk entities' chunks, by chunk id."""
    from kbgraph.graph.derive.vectors import chunk_vectors

    if not entities:
        return {}
    return chunk_vectors(ctx.store, ctx.tenant, ctx.kb_id, sorted({e.chunk_ids[0] for e in entities}),
                         ctx.vector_name)


def _relation_vectors_from_chunks(ctx: KBContext, relations: list[Relation], into: RowChanges | None
                                  ) -> tuple[list[Relation], int]:
    """Give these relations their chunks' mean vector (``relation_vectors``); returns those left
    to embed by their text (none of their chunks has a vector of this size) and how many got one."""
    from kbgraph.graph.derive.vectors import relation_vectors_from_chunks

    changes = into or RowChanges(ctx)
    left: list[Relation] = []
    done = 0
    for relation, vector in relation_vectors_from_chunks(ctx.store, ctx.tenant, ctx.kb_id, relations,
                                                         ctx.vector_name):
        if vector is None:
            left.append(relation)
            continue
        relation.vector, relation.vector_from_chunks = vector, True
        changes.add(relation.id, {ctx.vector_name: vector, "embedded_int": 2}, settled=True, whole=relation)
        done += 1
    if into is None:
        changes.write()
    return left, done

