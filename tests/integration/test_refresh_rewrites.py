"""The graph refresh rewrites each entity row once (its vector, PageRank and communities in one
patch: on Elasticsearch every rewrite indexes the row's vector again), also when the rewrites go to
the store on a thread of their own, and a rewrite that fails is held for the next write
(kbgraph/index/refresh_state.py, ``RowChanges``)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.engine import Engine
from kbgraph.graph.invariants import stored_graph
from kbgraph.index.refresh import refresh_kb
from kbgraph.index.refresh_state import RowChanges
from kbgraph.meta import GraphConfig
from kbgraph.store.base import DocStore, StoreError, eq
from kbgraph.store.records import Entity

GRAPH = GraphConfig(enabled=True, method="nlp", community=True)


def patched_ids(store: DocStore) -> Counter[str]:
    """How often each row is patched from now on."""
    seen: Counter[str] = Counter()
    patch = store.patch

    def counting(tenant_id: str, kb_id: str, changes: Mapping[str, Any], *, refresh: bool = True) -> int:
        seen.update(list(changes))
        return patch(tenant_id, kb_id, changes, refresh=refresh)

    store.patch = counting  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("behind", [False, True], ids=["in line", "on a thread"])
def test_a_refresh_rewrites_each_entity_once(settings: Settings, behind: bool) -> None:
    with Engine.open(settings) as engine:
        engine.store.remote = behind or engine.store.remote  # type: ignore[misc]
        engine.create_kb("sample", graph=GRAPH)
        engine.index_paths("sample", [SAMPLE_CORPUS_DIR], refresh=False)
        ctx = engine.context(engine.kb("sample"))
        seen = patched_ids(engine.store)
        result = refresh_kb(ctx)
        entities = {d["id"] for d in engine.store.scan(engine.tenant, [ctx.kb_id],
                                                       [eq("knowledge_graph_kwd", Entity.KIND)], fields=["id"])}
        assert result.embedded and result.pagerank_updated and result.communities
        assert entities and entities <= set(seen)  # every entity got its vector, PageRank and communities ...
        assert max(seen[i] for i in entities) == 1  # ... in one rewrite
        stored = stored_graph(engine.store, engine.tenant, ctx.kb_id)
        assert all(e.pagerank > 0 for e in stored.entities.values())
        assert sum(1 for d in engine.store.scan(engine.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", Entity.KIND)],
                                                fields=["community_ids_kwd"]) if d.get("community_ids_kwd")) > 0


@pytest.mark.parametrize("behind", [False, True], ids=["in line", "on a thread"])
def test_a_failed_rewrite_is_held_for_the_next_write(settings: Settings, behind: bool) -> None:
    with Engine.open(settings) as engine:
        engine.store.remote = behind  # type: ignore[misc]
        kb = engine.create_kb("rows", graph=GRAPH)
        engine.store.upsert(engine.tenant, kb.id, [{"id": "a", "n_int": 1}, {"id": "b", "n_int": 1}])
        changes = RowChanges(SimpleNamespace(store=engine.store, tenant=engine.tenant, kb_id=kb.id), limit=1)  # type: ignore[arg-type]
        changes.add("a", {"x_flt": float("nan")})  # not a JSON number: the store refuses it
        changes.add("b", {"n_int": 2}, settled=True)
        with pytest.raises((StoreError, ValueError)):  # in line: at once; on a thread: when waited for
            changes.write_behind()
            changes.write()
        assert set(changes.rows) == {"a"} and math.isnan(changes.rows["a"]["x_flt"])
        changes.add("a", {"x_flt": 0.5})  # a later change of the same row wins over the held one
        changes.write()
        assert not changes.rows
        rows = {d["id"]: d for d in engine.store.get(engine.tenant, [kb.id], ["a", "b"])}
        assert rows["a"]["x_flt"] == 0.5 and rows["b"]["n_int"] == 2
