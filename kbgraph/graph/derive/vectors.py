"""What an entity or relation row embeds, and the vectors made from its chunks' stored vectors
instead of a model call (an nlp relation, an entity found in a single chunk)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from kbgraph.graph.derive.mentions import _batches
from kbgraph.store.base import DocStore
from kbgraph.store.records import Entity, Relation

# Embedding models read a few hundred word pieces at most; a longer text costs more and says little more.
EMBED_CHARS = 1000


def entity_text(entity: Entity) -> str:
    """What an entity's vector embeds."""
    return f"{entity.name} ({entity.type}): {entity.description}"[:EMBED_CHARS]


def relation_text(relation: Relation) -> str:
    keywords = f" [{', '.join(relation.keywords)}]" if relation.keywords else ""
    return f"{relation.src_name} -- {relation.tgt_name}{keywords}: {relation.description}"[:EMBED_CHARS]


# chunks whose vectors are read at once for relation vectors
_CHUNK_VECTOR_READ = 2000


def relation_vectors_from_chunks(store: DocStore, tenant: str, kb_id: str, relations: Sequence[Relation],
                                 vector_name: str) -> Iterator[tuple[Relation, np.ndarray | None]]:
    """Each relation with the mean of its chunks' stored vectors (``vector_name``), normalized;
    None where none of its chunks has one.

    A relation of the nlp extractor is two names in one sentence, its description that sentence:
    the chunk's vector says nearly as well what it is about (bench/README.md, retrieval with the
    local embedder), and costs no model call. The sum runs over the chunks in their (sorted) id
    order, so the vector is a function of the relation's chunks and their vectors alone. Relations
    are taken in order of their chunks, a few thousand chunks' vectors in memory at a time."""
    ordered = sorted(relations, key=lambda r: r.chunk_ids)
    start = 0
    while start < len(ordered):
        wanted: set[str] = set()
        end = start
        while end < len(ordered) and (end == start or len(wanted) + len(ordered[end].chunk_ids) <= _CHUNK_VECTOR_READ):
            wanted.update(ordered[end].chunk_ids)
            end += 1
        vectors = chunk_vectors(store, tenant, kb_id, sorted(wanted), vector_name)
        for relation in ordered[start:end]:
            found = [vectors[c] for c in sorted(relation.chunk_ids) if c in vectors]
            if not found:
                yield relation, None
                continue
            total = np.sum(np.asarray(found, dtype=np.float64), axis=0)
            norm = float(np.linalg.norm(total))
            yield relation, (total / norm if norm > 0 else total).astype(np.float32)
        start = end


def chunk_vectors(store: DocStore, tenant: str, kb_id: str, chunk_ids: Sequence[str],
                  vector_name: str) -> dict[str, np.ndarray]:
    """The stored vectors (``vector_name``) of those of these chunks that have one, by chunk id."""
    out: dict[str, np.ndarray] = {}
    for batch in _batches(list(chunk_ids)):
        for doc in store.get(tenant, [kb_id], batch, fields=["id", vector_name]):
            vector = doc.get(vector_name)
            if vector is not None and doc.get("id") is not None:
                out[doc["id"]] = np.asarray(vector, dtype=np.float32)
    return out


# How much of its name's vector an entity found in a single chunk adds to that chunk's (both unit
# length). With the bundled e5, 0.25-0.35 kept every retrieval figure within 0.01 of the entities'
# text vectors; the chunk's alone, 0.2 or 0.5 lost 0.02 of a MuSiQue all-recall@5 (bench/README.md)
ENTITY_NAME_WEIGHT = 0.3


def entity_name_text(entity: Entity) -> str:
    """What an entity found in a single chunk embeds when its vector is made from that chunk's
    (``entity_vectors``): its name, a few word pieces instead of its description's hundreds."""
    return entity.name


def entity_vector_from_chunk(chunk_vector: Sequence[float], name_vector: Sequence[float]) -> np.ndarray:
    """An entity's vector from its one chunk's vector and its name's: the unit chunk vector plus
    ENTITY_NAME_WEIGHT of the unit name vector, normalized.

    With the nlp extractor such an entity's description is the sentences of that chunk naming it,
    which the chunk's vector already covers; the name's share sets apart the several entities of
    one chunk, which would otherwise tie on every query."""
    chunk = _unit(np.asarray(chunk_vector, dtype=np.float64))
    name = _unit(np.asarray(name_vector, dtype=np.float64))
    return _unit(chunk + ENTITY_NAME_WEIGHT * name).astype(np.float32)


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector
