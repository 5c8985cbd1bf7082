"""Re-embedding a knowledge base with another embedding model.

Every row that carries a vector (chunks, entities, relations, community reports) gets the new
model's vector of the very text indexing embedded for it, so the result equals indexing the same
documents with the new model, without re-parsing or re-extracting anything. Rows are read and
written in batches with progress; a vector of another size goes to its own field
(``q_<dim>_vec``), which the searches pick by the query vector's size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kbgraph.graph.derive.vectors import (
    chunk_vectors, entity_name_text, entity_text, entity_vector_from_chunk, relation_text, relation_vectors_from_chunks,
)
from kbgraph.llm.base import Embedder
from kbgraph.store.base import Condition, Doc, DocStore, eq, missing, vector_field
from kbgraph.store.records import Chunk, CommunityReport, Entity, Relation

# rows embedded and written together
BATCH = 256


@dataclass(frozen=True)
class RowKind:
    name: str
    where: list[Condition]
    text: Callable[[Doc], str]


def report_text(doc: Doc) -> str:
    report = CommunityReport.from_doc(doc)
    return f"{report.title}\n{report.summary}"


ROW_KINDS = (
    RowKind("chunks", [missing("knowledge_graph_kwd")], lambda doc: Chunk.from_doc(doc).content),
    RowKind("entities", [eq("knowledge_graph_kwd", Entity.KIND)], lambda doc: entity_text(Entity.from_doc(doc))),
    RowKind("relations", [eq("knowledge_graph_kwd", Relation.KIND)],
            lambda doc: relation_text(Relation.from_doc(doc))),
    RowKind("reports", [eq("knowledge_graph_kwd", CommunityReport.KIND)], report_text),
)


def reembed_rows(store: DocStore, tenant: str, kb_id: str, embedder: Embedder,
                 progress: Callable[[str, int, int], None] = lambda phase, done, total: None, *,
                 relations_from_chunks: bool = False, entities_from_chunk: bool = False) -> int:
    """Give every vector-bearing row of the KB ``embedder``'s vector of its text; returns the rows.
    With ``relations_from_chunks`` (settings.relation_vectors) a relation gets the mean of its
    chunks' new vectors instead, as indexing gives it (chunks come first); with
    ``entities_from_chunk`` (settings.entity_vectors) an entity found in a single chunk gets that
    chunk's new vector combined with its name's."""
    field = vector_field(embedder.dim)
    changed = 0
    for kind in ROW_KINDS:
        total = store.count(tenant, [kb_id], kind.where)
        done = 0
        progress(kind.name, done, total)
        batch: list[Doc] = []
        for doc in store.scan(tenant, [kb_id], kind.where):
            batch.append(doc)
            if len(batch) == BATCH:
                changed += _write(store, tenant, kb_id, embedder, field, kind, batch,
                                  relations_from_chunks, entities_from_chunk)
                done += len(batch)
                progress(kind.name, done, total)
                batch = []
        if batch:
            changed += _write(store, tenant, kb_id, embedder, field, kind, batch,
                              relations_from_chunks, entities_from_chunk)
            done += len(batch)
            progress(kind.name, done, total)
    store.refresh(tenant)
    return changed


def _write(store: DocStore, tenant: str, kb_id: str, embedder: Embedder, field: str, kind: RowKind,
           batch: list[Doc], relations_from_chunks: bool, entities_from_chunk: bool) -> int:
    changes: dict[str, dict] = {}
    if kind.name == "entities" and entities_from_chunk:
        changes = _entities_from_chunk(store, tenant, kb_id, embedder, field, batch)
        batch = [doc for doc in batch if doc["id"] not in changes]
    if kind.name == "relations" and relations_from_chunks:
        rows = [Relation.from_doc(doc) for doc in batch]
        for relation, vector in relation_vectors_from_chunks(store, tenant, kb_id, rows, field):
            if vector is not None:
                changes[relation.id] = {field: vector, "embedded_int": 2}
        batch = [doc for doc in batch if doc["id"] not in changes]
    if batch:
        vectors = np.asarray(embedder.embed([kind.text(doc) for doc in batch]), dtype=np.float32)
        changes.update({doc["id"]: {field: vector} for doc, vector in zip(batch, vectors)})
        if kind.name in ("entities", "relations"):
            changes.update({doc["id"]: {**changes[doc["id"]], "embedded_int": 1} for doc in batch})
    store.patch(tenant, kb_id, changes, refresh=False)
    return len(changes)


def _entities_from_chunk(store: DocStore, tenant: str, kb_id: str, embedder: Embedder, field: str,
                        batch: list[Doc]) -> dict[str, dict]:
    """The new vectors of the single-chunk entities of ``batch`` whose chunk has one in ``field``."""
    single = [entity for entity in map(Entity.from_doc, batch) if len(entity.chunk_ids) == 1]
    chunks = chunk_vectors(store, tenant, kb_id, sorted({e.chunk_ids[0] for e in single}), field)
    single = [entity for entity in single if entity.chunk_ids[0] in chunks]
    if not single:
        return {}
    names = embedder.embed([entity_name_text(entity) for entity in single])
    return {entity.id: {field: entity_vector_from_chunk(chunks[entity.chunk_ids[0]], name), "embedded_int": 2}
            for entity, name in zip(single, names)}


__all__ = ["ROW_KINDS", "reembed_rows"]
