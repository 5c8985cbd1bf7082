"""Rewrite the vectors of the single-chunk entities of a COPY of a cached evaluation index, to
measure what another entity vector would do to retrieval without rebuilding (issue 24).

    python bench/entity_vector_variants.py SRC DST VARIANT
    python bench/eval_retrieval.py --embedding local --data-dir DST_ROOT --modes naive,kg,ppr,mix DATASET

SRC is one dataset's folder of an ``eval_retrieval.py --embedding local`` data dir (store.db,
cache.db, ...), left untouched; DST is made as a copy of it (replaced if present), then every
entity found in exactly one chunk gets:

    keep               its vector unchanged (the control)
    chunk              its chunk's stored vector
    chunk+name:W       unit(unit(chunk vector) + W * unit(vector of its name))
    chunk+nametype:W   the same with "name (type)" embedded

Entities of several chunks keep their vectors. It prints how many rows changed and the CPU the
extra embedding took. ``entity_vectors = "chunk"`` (kbgraph/config.py) is ``chunk+name:0.3``.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import numpy as np

from kbgraph.engine import Engine
from kbgraph.config import load_settings
from kbgraph.store.base import eq, vector_field

KB_NAME = "eval"  # bench/eval_retrieval.py's


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst, variant = Path(argv[0]), Path(argv[1]), argv[2]
    if dst.resolve() == src.resolve():
        raise SystemExit("DST must not be SRC: the variant is written into a copy")
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True)
    if variant == "keep":
        return 0
    kind, _, weight = variant.partition(":")
    if kind not in ("chunk", "chunk+name", "chunk+nametype"):
        raise SystemExit(f"unknown variant {variant!r}")
    settings = load_settings(data_dir=dst, embedding_provider="local", similarity_threshold=0.0)
    with Engine.open(settings) as engine:
        kb = engine.kb(KB_NAME)
        field = vector_field(engine.embedder.dim)
        total = 0
        single: list[tuple[str, str, str]] = []  # (entity id, chunk id, text of the name)
        for doc in engine.store.scan(engine.tenant, [kb.id], [eq("knowledge_graph_kwd", "entity")],
                                     fields=["id", "chunk_ids_kwd", "name_kwd", "entity_type_kwd"]):
            total += 1
            chunks = doc.get("chunk_ids_kwd") or []
            if len(chunks) == 1:
                name = doc.get("name_kwd") or ""
                single.append((doc["id"], chunks[0],
                               f"{name} ({doc.get('entity_type_kwd') or ''})" if kind == "chunk+nametype" else name))
        ids = sorted({chunk for _, chunk, _ in single})
        chunk_vectors: dict[str, np.ndarray] = {}
        for start in range(0, len(ids), 500):
            for doc in engine.store.get(engine.tenant, [kb.id], ids[start:start + 500], fields=["id", field]):
                if doc.get(field) is not None:
                    chunk_vectors[doc["id"]] = np.asarray(doc[field], dtype=np.float64)
        started = time.process_time()
        names = (np.asarray(engine.embedder.embed([name for _, _, name in single]), dtype=np.float64)
                 if kind != "chunk" else None)
        cpu = time.process_time() - started
        changes: dict[str, dict] = {}
        for i, (entity, chunk, _) in enumerate(single):
            if chunk not in chunk_vectors:
                continue
            vector = _unit(chunk_vectors[chunk])
            if names is not None:
                vector = vector + float(weight) * _unit(names[i])
            changes[entity] = {field: _unit(vector).astype(np.float32)}
        for start in range(0, len(changes), 2000):
            part = list(changes)[start:start + 2000]
            engine.store.patch(engine.tenant, kb.id, {i: changes[i] for i in part}, refresh=False)
        engine.store.refresh(engine.tenant)
    print(f"{dst.name}: {variant}: {len(changes)} of {total} entities rewritten (single-chunk {len(single)}), "
          f"names embedded in {cpu:.1f} s CPU", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
