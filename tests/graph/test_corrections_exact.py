"""Corrections are facts the derivation honours: after any sequence of corrections (renames, types and
descriptions set, merges, splits by names and by documents, deletions, entities and relations added
by hand, undos) interleaved with document adds, deletes and refreshes, the stored graph equals a
rebuild from the mentions under the live corrections, and equals the graph (and PageRank,
communities, reports) of a knowledge base where those corrections held before any document came.
Real parts: the SQLite store (Elasticsearch when KBGRAPH_ES_URL is set), the nlp extractor, the hash
embedder.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from kbgraph.config import load_settings
from kbgraph.graph.curated import CuratedEntity, CuratedGraph, CuratedRelation
from kbgraph.graph.derive.aliases import with_edits
from kbgraph.graph.derive.corrections import CORRECTION_KIND, Correction, fold
from kbgraph.graph.invariants import check_graph, stored_graph
from kbgraph.index.corrections import find_correction, list_corrections, record_curated_correction, \
    record_key_correction, undo_correction
from kbgraph.index.curated import MANUAL_SOURCE, remove_added, write_curated
from kbgraph.index.delete import delete_document, drop_graph
from kbgraph.index.refresh import refresh_kb
from kbgraph.store import DocStore, open_store
from kbgraph.store.base import eq
from conftest import store_overrides
from graph.test_graph_exact import DOCS, _add, _comparable, _context, assert_same_as_fresh

KEYS = ["mira castell", "tobias wren", "ada quill", "hector vane", "varrow", "glass tower", "lumen guild",
        "mira", "hector", "kestrel bay"]
NAMES = ["Mira C.", "The Glass Tower", "Ada", "Lumen Guild", "Old Varrow"]

key = st.sampled_from(KEYS)
key_ops = st.one_of(
    st.builds(lambda k, n: ("rename", {"key": k, "name": n}), key, st.sampled_from(NAMES)),
    st.builds(lambda k, t: ("set", {"key": k, "type": t}), key, st.sampled_from(["person", "place", "guild"])),
    st.builds(lambda k: ("set", {"key": k, "description": f"{k} as its users describe it"}), key),
    st.builds(lambda ks, i: ("merge", {"keys": sorted(set(ks)), "into": sorted(set(ks))[i % len(set(ks))]}),
              st.lists(key, min_size=2, max_size=3), st.integers(0, 2)),
    st.builds(lambda k, n: ("split", {"key": k, "names": [n]}), key, key),
    st.builds(lambda k, d, n: ("split", {"key": k, "docs": [d], "name": n}), key, st.sampled_from(sorted(DOCS)),
              st.sampled_from(NAMES)),
    st.builds(lambda k: ("delete_entity", {"key": k}), key),
    st.builds(lambda a, b: ("delete_relation", {"src": min(a, b), "tgt": max(a, b)}), key, key),
)
added = st.one_of(
    st.builds(lambda n: ("add_entity", CuratedGraph([CuratedEntity(n, "person", f"{n}, added by hand")], [])),
              st.sampled_from(NAMES + ["Mira Castell"])),
    st.builds(lambda a, b: ("add_relation", CuratedGraph([], [CuratedRelation(a, b, f"{a} knows {b}", ("knows",))])),
              key, key).filter(lambda op: op[1].relations[0].src != op[1].relations[0].tgt),
)
steps = st.lists(st.one_of(
    st.tuples(st.just("add"), st.sampled_from(sorted(DOCS))),
    st.tuples(st.just("delete"), st.sampled_from(sorted(DOCS))),
    st.tuples(st.just("correct"), key_ops),
    st.tuples(st.just("curate"), added),
    st.tuples(st.just("undo"), st.integers(0, 5)),
    st.tuples(st.just("refresh"), st.none()),
), min_size=2, max_size=12)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DocStore:
    return open_store(load_settings(data_dir=tmp_path_factory.mktemp("corrections"), **store_overrides()))


def _graph_of(params: dict) -> CuratedGraph:
    if "name" in params:
        return CuratedGraph([CuratedEntity(params["name"], params["type"], params["description"])], [])
    return CuratedGraph([], [CuratedRelation(params["src"], params["tgt"], params["description"],
                                             tuple(params["keywords"]))])


def _curate(ctx, op: str, graph: CuratedGraph) -> None:
    if op == "add_entity":
        e = graph.entities[0]
        params = {"name": e.name, "type": e.type, "description": e.description}
    else:
        r = graph.relations[0]
        params = {"src": r.src, "tgt": r.tgt, "description": r.description, "keywords": list(r.keywords)}
    record_curated_correction(ctx, op, params, "tester",
                              lambda seq: write_curated(ctx, MANUAL_SOURCE, graph, str(seq)))


def _undo(ctx, pick: int) -> None:
    live = [c for c in list_corrections(ctx) if not c.undone]
    if live:
        correction = find_correction(ctx, live[pick % len(live)].seq)
        undo_correction(ctx, correction, "tester",
                        lambda c: remove_added(ctx, _graph_of(dict(c.params)), str(c.seq)))


def _replay_first(fresh, ctx) -> None:
    """The live corrections of ``ctx``, made in ``fresh`` before any document."""
    for c in list_corrections(ctx):
        if c.undone:
            continue
        if c.op in ("add_entity", "add_relation"):
            graph = _graph_of(dict(c.params))
            record_curated_correction(fresh, c.op, c.params, c.who,
                                      lambda seq, g=graph, tag=str(c.seq): write_curated(fresh, MANUAL_SOURCE, g, tag))
        else:
            record_key_correction(fresh, c.op, c.params, c.who)


@hsettings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=steps)
def test_corrections_equal_a_graph_where_they_held_from_the_start(store: DocStore, tmp_path: Path, ops: list) -> None:
    tenant, kb_id = f"t{uuid.uuid4().hex[:8]}", "kb"
    store.ensure_index(tenant)
    ctx = _context(store, tenant, kb_id, tmp_path)
    present: set[str] = set()
    for op, arg in ops:
        if op == "add":
            _add(ctx, arg)
            present.add(arg)
        elif op == "delete" and arg in present:
            delete_document(ctx, arg)
            present.discard(arg)
        elif op == "correct":
            record_key_correction(ctx, arg[0], arg[1], "tester")
        elif op == "curate":
            _curate(ctx, *arg)
        elif op == "undo":
            _undo(ctx, arg)
        elif op == "refresh":
            refresh_kb(ctx)
        assert check_graph(store, tenant, kb_id, ctx.describer()) == [], (op, arg)
    refresh_kb(ctx)
    assert_same_as_fresh(ctx, present, tmp_path, prepare=lambda fresh: _replay_first(fresh, ctx))


def test_corrections_survive_a_dropped_graph_and_its_rebuild(store: DocStore, tmp_path: Path) -> None:
    """The rebuild of a web user's "rebuild graph" (drop, extract every document again) keeps the
    corrections and the rows added by hand."""
    from kbgraph.index.curated import live_sources, rederive_curated

    tenant = f"t{uuid.uuid4().hex[:8]}"
    store.ensure_index(tenant)
    ctx = _context(store, tenant, "kb", tmp_path)
    for name in ("doc0", "doc1", "doc2"):
        _add(ctx, name)
    record_key_correction(ctx, "merge", {"keys": ["ada quill", "mira castell"], "into": "mira castell"}, "tester")
    record_key_correction(ctx, "rename", {"key": "varrow", "name": "Varrow City"}, "tester")
    _curate(ctx, "add_entity", CuratedGraph([CuratedEntity("Pell Harbour", "place", "A harbour town")], []))
    refresh_kb(ctx)
    before = _comparable(ctx)

    drop_graph(ctx)
    assert store.count(tenant, ["kb"], [eq("knowledge_graph_kwd", CORRECTION_KIND)]) == 3
    rederive_curated(ctx, live_sources(ctx))
    for name in ("doc0", "doc1", "doc2"):
        _add(ctx, name)
    refresh_kb(ctx)
    assert _comparable(ctx) == before
    entities = stored_graph(store, tenant, "kb").entities
    assert "ada quill" not in entities and entities["varrow city"].name == "Varrow City"
    assert "pell harbour" in entities
    assert check_graph(store, tenant, "kb", ctx.describer()) == []
    store.drop_index(tenant)


def test_a_split_by_document_follows_that_document(store: DocStore, tmp_path: Path) -> None:
    """The mentions of a document split off an entity go to the new entity whether the document comes
    before or after the split, and leave with it."""
    tenant = f"t{uuid.uuid4().hex[:8]}"
    store.ensure_index(tenant)
    ctx = _context(store, tenant, "kb", tmp_path)
    _add(ctx, "doc1")
    record_key_correction(ctx, "split", {"key": "varrow", "docs": ["doc0"], "name": "Old Varrow"}, "tester")
    _add(ctx, "doc0")
    entities = stored_graph(store, tenant, "kb").entities
    assert entities["old varrow"].doc_ids == ["doc0"] and "doc0" not in entities["varrow"].doc_ids
    assert check_graph(store, tenant, "kb", ctx.describer()) == []
    delete_document(ctx, "doc0")
    assert "old varrow" not in stored_graph(store, tenant, "kb").entities
    assert check_graph(store, tenant, "kb", ctx.describer()) == []
    store.drop_index(tenant)


def test_splits_onto_their_own_key_or_back_and_forth_end() -> None:
    """A split by documents onto the entity's own name moves nothing (found by the property test
    above: the alias map's members ran in a circle), and splits back and forth between two keys
    give every key its members once."""
    def split(seq: int, key: str, name: str) -> Correction:
        return Correction("kb", seq, "split", {"key": key, "docs": ["d1"], "name": name}, "t", 0.0)

    assert fold([split(1, "lumen guild", "Lumen Guild")]).splits == []
    edits = fold([split(1, "lumen guild", "Kestrel Bay"), split(2, "kestrel bay", "Lumen Guild")])
    aliases = with_edits({"guild": "lumen guild"}, edits)
    assert aliases.members("lumen guild") == {"lumen guild", "kestrel bay", "guild"}
    assert aliases.members("kestrel bay") == {"lumen guild", "kestrel bay", "guild"}
