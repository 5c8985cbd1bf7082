"""The DocStore contract's batches of searches (``search_many``), the cosines of named rows
(``vector_cosines``) and the visibility of writes (kbgraph/store/base.py, "Visibility of writes"),
run against every engine."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator

import pytest

from kbgraph.store.base import DocStore, SearchRequest, SearchResult, StoreError, TextQuery, VectorQuery, eq

V = "q_4_vec"


def unit(angle: float) -> list[float]:
    return [math.cos(math.radians(angle)), math.sin(math.radians(angle)), 0.0, 0.0]


def plain(result: SearchResult) -> list[tuple[str, dict, float, float, float]]:
    return [(h.id, h.doc, round(h.score, 9), round(h.term_score, 9), round(h.vector_score, 9)) for h in result.hits]


def test_search_many_answers_each_request_as_search_does(store: DocStore, tenant: str, kb: str) -> None:
    store.upsert(tenant, kb, [
        {"id": f"d{i}", "title_tks": " ".join(["alpha"] * (i % 3 + 1) + ["beta"] * (i % 2)), "n_int": i,
         "tag_kwd": "even" if i % 2 == 0 else "odd", V: unit(i * 10)} for i in range(9)])
    requests = [
        SearchRequest(kb_ids=[kb], text=TextQuery(["alpha", "beta"], {"title_tks": 1.0}),
                      vector=VectorQuery(V, unit(25)), vector_weight=0.4, candidates=3, limit=4),
        SearchRequest(kb_ids=[kb], text=TextQuery(["beta"], {"title_tks": 1.0}), fields=["n_int"]),
        SearchRequest(kb_ids=[kb], vector=VectorQuery(V, unit(80)), where=[eq("tag_kwd", "even")], offset=1,
                      limit=2, threshold=0.1),
        SearchRequest(kb_ids=[kb], where=[eq("tag_kwd", "odd")], order_by=[("n_int", "desc")], limit=3),
        SearchRequest(kb_ids=[kb], text=TextQuery(["nothing"], {"title_tks": 1.0})),
    ]
    batch = requests + [requests[0]]  # the same request twice: answered twice
    together = store.search_many(tenant, batch)
    assert len(together) == len(batch)
    for request, found in zip(batch, together):
        alone = store.search(tenant, request)
        assert plain(found) == plain(alone) and found.total == alone.total
    assert [h.id for h in together[3].hits] == ["d7", "d5", "d3"]
    assert store.search_many(tenant, []) == []


def test_search_many_answers_several_listings_as_search_does(store: DocStore, tenant: str, kb: str) -> None:
    """Listings (neither text nor vector) of one batch go together on Elasticsearch (one _msearch):
    each answers as alone, a deep one and a bad one included."""
    store.upsert(tenant, kb, [{"id": f"r{i:02d}", "n_int": i, "tag_kwd": "even" if i % 2 == 0 else "odd"}
                              for i in range(12)])
    listings = [
        SearchRequest(kb_ids=[kb], where=[eq("tag_kwd", "even")], limit=4, fields=["n_int"], count_total=False),
        SearchRequest(kb_ids=[kb], where=[eq("tag_kwd", "odd")], order_by=[("n_int", "desc")], offset=2, limit=2),
        SearchRequest(kb_ids=[kb], where=[eq("tag_kwd", "none")], limit=5),
        SearchRequest(kb_ids=[kb], limit=3, offset=10_000),
    ]
    together = store.search_many(tenant, listings)
    for request, found in zip(listings, together):
        alone = store.search(tenant, request)
        assert plain(found) == plain(alone) and found.total == alone.total
    assert [h.doc for h in together[0].hits] == [{"id": f"r{i:02d}", "n_int": i} for i in (0, 2, 4, 6)]
    assert [h.id for h in together[1].hits] == ["r07", "r05"] and together[1].total == 6
    with pytest.raises(StoreError):
        store.search_many(tenant, [listings[0], SearchRequest(kb_ids=[kb], limit=-1)])


def test_get_many_reads_each_as_get_does(store: DocStore, tenant: str, kb: str) -> None:
    other = f"{kb}-other"
    store.upsert(tenant, kb, [{"id": f"g{i}", "n_int": i, "tag_kwd": f"t{i}", V: unit(i * 10)} for i in range(4)])
    store.upsert(tenant, other, [{"id": "elsewhere", "n_int": 9}])
    reads = [(["g2", "missing", "g0", "g2"], ["n_int"]), ([], None), (["g1", "elsewhere"], None),
             (["g3"], ["tag_kwd", V]), (["g0"], ["n_int"])]
    together = store.get_many(tenant, [kb], reads)
    assert together == [store.get(tenant, [kb], ids, fields) for ids, fields in reads]
    assert together[0] == [{"id": "g2", "n_int": 2}, {"id": "g0", "n_int": 0}]  # asked order, once each
    assert together[2] == [{"id": "g1", "n_int": 1, "tag_kwd": "t1", "kb_id": kb}]  # not another KB's row
    assert [round(x, 6) for x in together[3][0][V]] == [round(x, 6) for x in unit(30)]
    assert store.get_many(tenant, [kb], []) == []


def test_search_many_refuses_a_batch_with_a_request_it_cannot_answer(store: DocStore, tenant: str, kb: str) -> None:
    store.upsert(tenant, kb, [{"id": "a", V: unit(0)}])
    good = SearchRequest(kb_ids=[kb], vector=VectorQuery(V, unit(0)))
    with pytest.raises(StoreError):
        store.search_many(tenant, [good, SearchRequest(kb_ids=[kb], vector=VectorQuery(V, [1.0, 0.0]))])
    with pytest.raises(ValueError):
        store.search_many(tenant, [good, SearchRequest(kb_ids=[], vector=VectorQuery(V, unit(0)))])


def test_vector_cosines_of_named_rows(store: DocStore, tenant: str, kb: str) -> None:
    other = f"{kb}-other"
    store.upsert(tenant, kb, [{"id": "a", V: unit(0)}, {"id": "b", V: [2 * x for x in unit(60)]},
                              {"id": "c", "n_int": 1}, {"id": "d", V: unit(30), "available_int": 0},
                              {"id": "f", V: unit(120), "available_int": 1}])
    store.upsert(tenant, other, [{"id": "e", V: unit(0)}])
    found = store.vector_cosines(tenant, [kb], ["f", "b", "missing", "a", "c", "d", "e"], V, unit(0))
    # in the order named; missing, vector-less, unavailable and other knowledge bases' rows left out;
    # the stored vector's length does not matter, and a cosine may be negative
    assert list(found) == ["f", "b", "a"]
    assert found["f"] == pytest.approx(-0.5, abs=1e-6) and found["b"] == pytest.approx(0.5, abs=1e-6)
    assert found["a"] == pytest.approx(1.0, abs=1e-6)
    assert store.vector_cosines(tenant, [kb, other], ["e"], V, unit(90)) == {"e": pytest.approx(0.0, abs=1e-6)}
    assert store.vector_cosines(tenant, [kb], [], V, unit(0)) == {}
    assert store.vector_cosines(tenant, [kb], ["a"], "q_8_vec", [1.0] + [0.0] * 7) == {}  # no such vectors


def test_a_store_reads_its_own_unrefreshed_writes(store: DocStore, tenant: str, kb: str) -> None:
    """Every read of a store object sees what it wrote before, whatever ``refresh`` said."""
    store.upsert(tenant, kb, [{"id": "a", "title_tks": "fresh words", "tag_kwd": "x", V: unit(0)}], refresh=False)
    assert store.count(tenant, [kb], [eq("tag_kwd", "x")]) == 1
    assert store.aggregate(tenant, [kb], "tag_kwd") == [("x", 1)]
    assert [d["id"] for d in store.scan(tenant, [kb], [eq("tag_kwd", "x")])] == ["a"]
    text = SearchRequest(kb_ids=[kb], text=TextQuery(["fresh"], {"title_tks": 1.0}))
    assert [h.id for h in store.search(tenant, text).hits] == ["a"]
    store.patch(tenant, kb, {"a": {"tag_kwd": "y"}}, refresh=False)
    assert store.count(tenant, [kb], [eq("tag_kwd", "y")]) == 1
    assert [h.id for h in store.search_many(tenant, [SearchRequest(kb_ids=[kb], where=[eq("tag_kwd", "y")])])[0].hits] == ["a"]
    store.delete(tenant, [kb], [eq("tag_kwd", "y")], refresh=False)
    assert store.count(tenant, [kb]) == 0 and store.search(tenant, text).hits == []


@pytest.fixture
def shared_tenant(slow_pair: tuple[DocStore, DocStore]) -> Iterator[str]:
    tenant = f"tenant-{uuid.uuid4().hex}"
    slow_pair[0].ensure_index(tenant)
    yield tenant
    slow_pair[0].drop_index(tenant)


def test_refreshed_writes_are_visible_to_every_reader_at_once(slow_pair: tuple[DocStore, DocStore],
                                                              shared_tenant: str, kb: str) -> None:
    """``refresh=True``: another store object (another process) sees the write once it returns, and
    sees ``refresh=False`` writes after anyone's ``refresh()``; its ``get`` is realtime."""
    writer, reader = slow_pair
    writer.upsert(shared_tenant, kb, [{"id": "a", "tag_kwd": "x", V: unit(0)}])
    assert reader.count(shared_tenant, [kb], [eq("tag_kwd", "x")]) == 1
    assert [h.id for h in reader.search(shared_tenant, SearchRequest(kb_ids=[kb], vector=VectorQuery(V, unit(0)))).hits] == ["a"]
    writer.upsert(shared_tenant, kb, [{"id": "b", "tag_kwd": "x"}], refresh=False)
    assert [d["id"] for d in reader.get(shared_tenant, [kb], ["b"])] == ["b"]
    writer.refresh(shared_tenant)
    assert reader.count(shared_tenant, [kb], [eq("tag_kwd", "x")]) == 2
    writer.patch(shared_tenant, kb, {"a": {"tag_kwd": "z"}})
    assert reader.count(shared_tenant, [kb], [eq("tag_kwd", "z")]) == 1
    writer.delete(shared_tenant, [kb], [eq("id", "a")])
    assert reader.count(shared_tenant, [kb], [eq("tag_kwd", "z")]) == 0


def test_deletes_and_updates_act_on_rows_another_writer_left_unrefreshed(
        slow_pair: tuple[DocStore, DocStore], shared_tenant: str, kb: str) -> None:
    """Delete, update and patch act on every matching row written before them, by any writer."""
    writer, other = slow_pair
    writer.upsert(shared_tenant, kb, [{"id": f"r{i}", "doc_kwd": "d1", "n_int": i} for i in range(3)], refresh=False)
    assert other.update(shared_tenant, [kb], [eq("doc_kwd", "d1")], {"tag_kwd": "seen"}) == 3
    assert other.patch(shared_tenant, kb, {"r0": {"n_int": 10}}) == 1
    writer.upsert(shared_tenant, kb, [{"id": "r9", "doc_kwd": "d1"}], refresh=False)
    assert other.delete(shared_tenant, [kb], [eq("doc_kwd", "d1")]) == 4
    writer.upsert(shared_tenant, kb, [{"id": "s1"}, {"id": "s2"}], refresh=False)
    assert other.delete(shared_tenant, [kb], [eq("id", "s1")]) == 1
    assert [d["id"] for d in writer.get(shared_tenant, [kb], ["r0", "r9", "s1", "s2"])] == ["s2"]
