"""The graph refresh rewrites each entity row once, for its vector only: its PageRank and communities,
which move for most entities at every refresh, go to a score row of its own (records.EntityScore:
on Elasticsearch every rewrite of a row indexes its vector again), also when the rewrites go to the
store on a thread of their own; a rewrite that fails is held for the next write
(kbgraph/index/refresh_state.py, ``RowChanges``). A document removed rewrites the score rows whose
PageRank moved, not the entity rows."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
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
from kbgraph.store.records import Entity, EntityScore

GRAPH = GraphConfig(enabled=True, method="nlp", community=True)


def written_ids(store: DocStore) -> Counter[str]:
    """How often each row is written (patched or written whole) from now on."""
    seen: Counter[str] = Counter()
    patch, upsert = store.patch, store.upsert

    def patching(tenant_id: str, kb_id: str, changes: Mapping[str, Any], *, refresh: bool = True) -> int:
        seen.update(list(changes))
        return patch(tenant_id, kb_id, changes, refresh=refresh)

    def upserting(tenant_id: str, kb_id: str, docs: Sequence[dict], *, refresh: bool = True) -> int:
        seen.update(d["id"] for d in docs)
        return upsert(tenant_id, kb_id, docs, refresh=refresh)

    store.patch = patching  # type: ignore[method-assign]
    store.upsert = upserting  # type: ignore[method-assign]
    return seen


def kind_ids(store: DocStore, tenant: str, kb_id: str, kind: str) -> set[str]:
    return {d["id"] for d in store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", kind)], fields=["id"])}


@pytest.mark.parametrize("behind", [False, True], ids=["in line", "on a thread"])
def test_a_refresh_rewrites_each_entity_once(settings: Settings, behind: bool) -> None:
    with Engine.open(settings) as engine:
        engine.store.remote = behind or engine.store.remote  # type: ignore[misc]
        engine.create_kb("sample", graph=GRAPH)
        engine.index_paths("sample", [SAMPLE_CORPUS_DIR], refresh=False)
        ctx = engine.context(engine.kb("sample"))
        seen = written_ids(engine.store)
        result = refresh_kb(ctx)
        entities = kind_ids(engine.store, engine.tenant, ctx.kb_id, Entity.KIND)
        scores = kind_ids(engine.store, engine.tenant, ctx.kb_id, EntityScore.KIND)
        assert result.embedded and result.pagerank_updated and result.communities
        assert entities and entities <= set(seen)  # every entity got its vector ...
        assert max(seen[i] for i in entities) == 1  # ... in one rewrite
        assert {i + "_s" for i in entities} == scores  # and a score row each, written once
        assert max(seen[i] for i in scores) == 1
        rows = engine.store.scan(engine.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", Entity.KIND)])
        assert not any("pagerank_flt" in d or "community_ids_kwd" in d for d in rows)  # not in the entity rows
        stored = stored_graph(engine.store, engine.tenant, ctx.kb_id)  # read with their score rows
        assert all(e.pagerank > 0 for e in stored.entities.values())
        assert sum(1 for e in stored.entities.values() if e.community_ids) > 0


def test_a_document_removed_rewrites_score_rows_not_entity_rows(settings: Settings) -> None:
    with Engine.open(settings) as engine:
        engine.create_kb("sample", graph=GRAPH)
        engine.index_paths("sample", [SAMPLE_CORPUS_DIR])
        ctx = engine.context(engine.kb("sample"))
        before = stored_graph(engine.store, engine.tenant, ctx.kb_id)
        seen = written_ids(engine.store)
        change = engine.delete_document("sample", "mira_castell.md")
        after = stored_graph(engine.store, engine.tenant, ctx.kb_id)
        moved = [k for k, e in after.entities.items() if k in before.entities and e.pagerank != before.entities[k].pagerank]
        assert len(moved) > len(after.entities) / 2  # PageRank moved for most entities ...
        written = {i for i in seen if i in {e.id for e in after.entities.values()}}
        # ... and only the rows the document touched were written again (derived, then their vector)
        assert 0 < len(written) <= change.entities_written
        assert {after.entities[k].id + "_s" for k in moved} <= set(seen)  # the moves went to score rows


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
