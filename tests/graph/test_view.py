"""The graph view's reads on a real embedded store: the PageRank sample and the relations among it
(both ways of fetching them), filters, neighbours, suggestions, details and community reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbgraph.graph import view
from kbgraph.parse.tokenize import token_string
from kbgraph.store.records import CommunityReport, Entity, GraphMeta, Relation
from kbgraph.store.sqlite import SQLiteStore

T, KB = "t", "kb"


def entity(i: int, rank: float, type_: str, community: str) -> dict:
    name = f"Person {i}" if type_ == "person" else f"Place {i}"
    return Entity(kb_id=KB, key=name.lower(), name=name, type=type_, description=f"about {name}",
                  name_tokens=token_string(name), description_tokens="", aliases=[f"P{i}"], doc_ids=["d1"],
                  chunk_ids=[f"chunk{i}"], mention_count=1, pagerank=rank, community_ids=[community]).to_doc()


def relation(a: str, b: str, weight: float) -> dict:
    low, high = sorted((a, b))
    return Relation(kb_id=KB, src_key=low, tgt_key=high, src_name=low, tgt_name=high, description="knows",
                    description_tokens="", weight=weight).to_doc()


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "store.db")
    s.ensure_index(T)
    rows = [entity(i, 1.0 / (i + 1), "person" if i % 2 == 0 else "geo", "c-even" if i % 2 == 0 else "c-odd")
            for i in range(20)]
    keys = [r["entity_key_kwd"] for r in rows]
    rows += [relation(keys[0], keys[i], float(i)) for i in range(1, 20)]  # a hub
    rows += [relation(keys[1], keys[2], 0.5), relation(keys[18], keys[19], 7.0)]
    rows.append(CommunityReport(kb_id=KB, level=0, community="c-even", member_keys=keys[0::2], title="Evens",
                                summary="the even ones", findings=[], rating=6.0, rating_explanation="",
                                graph_version=1).to_doc())
    rows.append({"id": "chunk0", "kb_id": KB, "doc_id": "d1", "docnm_kwd": "people.md",
                 "content_with_weight": "Person 0 lives here."})
    rows.append(GraphMeta(kb_id=KB, version=3, entity_count=20, relation_count=21, report_count=1).to_doc())
    s.upsert(T, KB, rows)
    return s


@pytest.mark.parametrize("by_id", [True, False])
def test_sample_is_the_top_by_pagerank_with_the_relations_among_them(store: SQLiteStore, by_id: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(view, "_PAIRS_BY_ID", 400 if by_id else 0)  # both ways of fetching relations
    sample = view.sample_graph(store, T, KB, limit=5)
    assert [n.name for n in sample.nodes] == ["Person 0", "Place 1", "Person 2", "Place 3", "Person 4"]
    pairs = {(e.source, e.target) for e in sample.edges}
    # the hub's relations to the other four, and 1-2; not 18-19 (outside the sample)
    assert pairs == {tuple(sorted(("person 0", k))) for k in ("place 1", "person 2", "place 3", "person 4")} \
        | {("person 2", "place 1")}
    assert [e.weight for e in sample.edges] == sorted((e.weight for e in sample.edges), reverse=True)
    assert (sample.total_entities, sample.total_relations, sample.version) == (20, 21, 3)
    assert dict(sample.types) == {"person": 10, "geo": 10}
    assert [(c.label, c.title) for c in sample.communities] == [("c-even", "Evens")]
    heavy = view.sample_graph(store, T, KB, limit=5, min_weight=3.0, facets=False)
    assert {e.weight for e in heavy.edges} == {3.0, 4.0} and heavy.types == []


def test_filters_and_expanded_entities(store: SQLiteStore) -> None:
    geo = view.sample_graph(store, T, KB, limit=3, types=["geo"])
    assert [n.name for n in geo.nodes] == ["Place 1", "Place 3", "Place 5"]
    evens = view.sample_graph(store, T, KB, limit=100, community="c-even")
    assert len(evens.nodes) == 10 and all(n.type == "person" for n in evens.nodes)
    grown = view.sample_graph(store, T, KB, limit=2, include=["place 19"])
    assert [n.key for n in grown.nodes] == ["person 0", "place 1", "place 19"]
    assert ("person 0", "place 19") in {(e.source, e.target) for e in grown.edges}


def test_neighbours_suggestions_details(store: SQLiteStore) -> None:
    nodes, edges = view.neighbourhood(store, T, KB, "place 19", limit=5)
    assert {n.key for n in nodes} == {"place 19", "person 0", "person 18"}
    assert [e.weight for e in edges] == [19.0, 7.0]
    hub_nodes, hub_edges = view.neighbourhood(store, T, KB, "person 0", limit=3)
    assert [e.weight for e in hub_edges] == [19.0, 18.0, 17.0] and len(hub_nodes) == 4
    assert [n.name for n in view.suggest(store, T, KB, "place 7")] == ["Place 7"]
    assert view.suggest(store, T, KB, "") == []
    detail = view.entity_detail(store, T, KB, "person 0", {"d1": "people.md"})
    assert detail is not None and detail.aliases == ["P0"] and detail.documents == [{"id": "d1", "name": "people.md"}]
    assert [c.content for c in detail.chunks] == ["Person 0 lives here."]
    assert [r.title for r in detail.reports] == ["Evens"] and detail.reports[0].size == 10
    assert view.entity_detail(store, T, KB, "nobody", {}) is None
