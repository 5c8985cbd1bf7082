"""A query's searches asked together (kbgraph/search/batch.py): one ``search_many`` for everything
asked before a read, each search answered once per query, the same answers as ``search``; and the
graph modes answer the same whether their kg and ppr parts run one after the other or side by side
(``DocStore.remote``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from kbgraph.config import Settings
from kbgraph.graph.extract.nlp.extractor import NLPExtractor
from kbgraph.search.batch import SearchBatch
from kbgraph.search.graph_cache import clear_caches
from kbgraph.search.kg.rows import ENTITY_FIELDS, kind_request
from kbgraph.search.retrieve import retrieve
from kbgraph.store.base import SearchRequest, SearchResult
from kbgraph.store.records import Entity
from kbgraph.store.sqlite import SQLiteStore

from . import EMBEDDER, KB, TENANT, toy_kb


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    clear_caches()
    s = toy_kb(tmp_path)
    yield s
    s.close()


def counted(store: SQLiteStore) -> list[int]:
    """The sizes of the store's ``search_many`` calls, as they come."""
    sizes: list[int] = []
    send = store.search_many

    def search_many(tenant: str, requests: Sequence[SearchRequest]) -> list[SearchResult]:
        sizes.append(len(requests))
        return send(tenant, requests)

    store.search_many = search_many  # type: ignore[method-assign]
    return sizes


def first_call_held(store: SQLiteStore) -> tuple[list[int], threading.Event, threading.Event]:
    """The sizes of the store's ``search_many`` calls, as they come, with the first call held on its
    way (set: the first event) until released (the second)."""
    first_sent, release = threading.Event(), threading.Event()
    send = store.search_many
    calls: list[int] = []

    def search_many(tenant: str, requests: Sequence[SearchRequest]) -> list[SearchResult]:
        calls.append(len(requests))
        if len(calls) == 1:
            first_sent.set()
            assert release.wait(10)
        return send(tenant, requests)

    store.search_many = search_many  # type: ignore[method-assign]
    return calls, first_sent, release


def entity_search(words: str) -> SearchRequest:
    request = kind_request([KB], Entity.KIND, words.lower().split(), {"name_ltks": 1.0}, EMBEDDER.embed([words])[0],
                           5, 0.5, returned=ENTITY_FIELDS)
    assert request is not None
    return request


def test_searches_asked_together_go_in_one_call_each_answered_once(store: SQLiteStore) -> None:
    sizes = counted(store)
    batch = SearchBatch(store, TENANT)
    first, second = entity_search("mira castell"), entity_search("silver heron")
    asked = [batch.ask(first), batch.ask(second), batch.ask(entity_search("mira castell"))]
    assert sizes == []  # nothing is sent before a read
    hits = [batch.hits(ticket) for ticket in asked]
    assert sizes == [2]  # one call, the repeated search once
    for request, found in zip([first, second, first], hits):
        assert [(h.id, h.score, h.doc) for h in found] == \
            [(h.id, h.score, h.doc) for h in store.search(TENANT, request).hits]
    found[0].doc["name_kwd"] = "changed"  # callers keep and change rows: each read gets its own copies
    assert batch.hits(asked[0])[0].doc["name_kwd"] != "changed"
    assert batch.hits(batch.ask(first)) and sizes == [2]  # asked again after it was answered: not sent again


def test_a_search_asked_in_one_thread_and_read_in_another_is_sent_once(store: SQLiteStore) -> None:
    sizes = counted(store)
    batch = SearchBatch(store, TENANT)
    tickets = [batch.ask(entity_search(words)) for words in ("mira castell", "varrow", "salt war")]
    answers: list[int] = []
    threads = [threading.Thread(target=lambda t=t: answers.append(len(batch.hits(t)))) for t in tickets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sizes == [3] and len(answers) == 3


@pytest.mark.parametrize("mode", ["kg", "mix", "ppr"])
def test_graph_modes_answer_alike_with_their_parts_side_by_side(store: SQLiteStore, mode: str) -> None:
    question = "What is the emblem of the guild founded by Mira Castell?"
    results = []
    for remote in (False, True):
        clear_caches()
        store.remote = remote  # type: ignore[misc]
        found = retrieve(store, TENANT, [KB], question, mode, embedder=EMBEDDER, settings=Settings(),
                         extractor=NLPExtractor())
        results.append((found.context, [(c.chunk_id, c.score) for c in found.chunks],
                        [(e.key, e.score) for e in found.entities], [(r.id, r.score) for r in found.relations]))
    assert results[0] == results[1] and results[0][1]


@pytest.mark.parametrize("mode", ["kg", "mix"])
def test_kg_reads_its_entities_with_what_they_lead_to_and_answers_as_one_read_after_the_other(
        store: SQLiteStore, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kg part reads the rows of the entities it can choose (ranked by the PageRank held with
    the citations) in the batch that reads their relations, reports and mentions: no row is read
    by id on its own and no listing is scanned, and the answer is the one of reading the pool's
    rows first and then what the chosen entities lead to."""
    import kbgraph.search.kg.retrieval as kg_retrieval
    from kbgraph.search.kg.params import KGParams

    question = "What is the emblem of the guild founded by Mira Castell?"
    calls: list[str] = []
    inside: list[str] = []  # a get_many made of gets (the embedded store's) counts once

    for name in ("get", "scan", "get_many"):
        def spy(*args: object, _name: str = name, _send: object = getattr(store, name), **kwargs: object) -> object:
            if not inside:
                calls.append(_name)
            inside.append(_name)
            try:
                return _send(*args, **kwargs)  # type: ignore[operator]
            finally:
                inside.pop()
        monkeypatch.setattr(store, name, spy)

    def answer() -> tuple:
        # few seeds (one hit per search): the entities the expansion reaches have rows left to read;
        # three entities of six chosen: which ones the pool's ranking must get right
        found = retrieve(store, TENANT, [KB], question, mode, embedder=EMBEDDER, settings=Settings(),
                         extractor=NLPExtractor(), kg_params=KGParams(search_top_n=1, entity_matches=1, entity_top_n=3))
        return (found.context, [(c.chunk_id, c.score) for c in found.chunks], [(e.key, e.score) for e in found.entities],
                [(r.id, r.score) for r in found.relations], [(r.id, r.score) for r in found.reports])

    answer()  # warm: the graph state's caches (citations, adjacency, graph) are read once
    calls.clear()
    batched = answer()
    assert "scan" not in calls and calls.count("get") <= 1, calls  # get: the graph state's row alone
    assert batched[2] and batched[4]
    monkeypatch.setattr(kg_retrieval, "_ranked_pool", lambda *args: (None, 0.0))
    calls.clear()
    assert answer() == batched
    assert calls.count("get") > 1  # the pool's rows read on their own first


def test_a_search_asked_while_another_is_on_its_way_goes_out_beside_it(store: SQLiteStore) -> None:
    """The kg and ppr parts of a query share its batch from two threads: what one asks while the
    other's searches are on their way is sent at once, not after them (a round trip of the query
    each time), and a reader of a search on its way waits for that one answer."""
    batch = SearchBatch(store, TENANT)
    calls, first_sent, release = first_call_held(store)
    first = batch.ask(entity_search("mira castell"))
    found: dict[str, int] = {}
    reader = threading.Thread(target=lambda: found.setdefault("first", len(batch.hits(first))))
    waiter = threading.Thread(target=lambda: found.setdefault("again", len(batch.hits(batch.ask(
        entity_search("mira castell"))))))
    reader.start()
    assert first_sent.wait(10)
    waiter.start()  # the same search, on its way: waits for it, sends nothing
    second = batch.ask(entity_search("salt war"))
    beside = threading.Thread(target=lambda: found.setdefault("second", len(batch.hits(second))))
    beside.start()
    beside.join(5)
    answered = "second" in found
    release.set()
    assert answered and found["second"] and calls[:2] == [1, 1]  # answered while the first was on its way
    for thread in (reader, waiter, beside):
        thread.join(10)
    assert found["first"] and found["again"] == found["first"] and calls == [1, 1]


def test_a_reader_of_a_search_on_its_way_first_sends_what_is_asked_and_unsent(store: SQLiteStore) -> None:
    """The kg and ppr parts ask their anchors' relations side by side, some of them the same: a
    part whose first search is the other's (on its way) sends its own others before it waits for
    that one, not after (a round trip of the query one after the other)."""
    batch = SearchBatch(store, TENANT)
    calls, first_sent, release = first_call_held(store)
    shared = batch.ask(entity_search("mira castell"))
    other = threading.Thread(target=lambda: batch.hits(shared))
    other.start()
    assert first_sent.wait(10)
    found: dict[str, int] = {}

    def own_part() -> None:
        mine = [batch.ask(entity_search("mira castell")), batch.ask(entity_search("salt war"))]
        found["shared"] = len(batch.hits(mine[0]))
        found["own"] = len(batch.hits(mine[1]))

    part = threading.Thread(target=own_part)
    part.start()
    deadline = time.monotonic() + 5
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    sent_beside = list(calls)
    release.set()
    for thread in (other, part):
        thread.join(10)
    assert sent_beside == [1, 1]  # its own search went out while the shared one was on its way
    assert found["shared"] and found["own"] and calls == [1, 1]


def test_a_search_asked_later_goes_beside_the_others_and_holds_none_of_them_up(store: SQLiteStore) -> None:
    """The question's relations and reports are read at the kg part's end, and an Elasticsearch
    page of their rows costs a round trip more than the seed searches' keys: on a remote store a
    search asked ``later`` goes in a request of its own beside the others, whose answers come
    without waiting for it; in process everything goes in one call."""
    send = store.search_many
    calls: list[int] = []
    later_sent, release = threading.Event(), threading.Event()
    later_request = entity_search("salt war")

    def search_many(tenant: str, requests: Sequence[SearchRequest]) -> list[SearchResult]:
        calls.append(len(requests))
        if later_request in requests:
            later_sent.set()
            assert release.wait(10)  # the later search stays on its way until released
        return send(tenant, requests)

    store.search_many = search_many  # type: ignore[method-assign]
    store.remote = True  # type: ignore[misc]
    batch = SearchBatch(store, TENANT)
    later = batch.ask(later_request, later=True)
    first, second = batch.ask(entity_search("mira castell")), batch.ask(entity_search("varrow"))
    assert batch.hits(first) and batch.hits(second)  # answered while the later search is held
    assert later_sent.wait(10) and sorted(calls) == [1, 2]
    found: list[int] = []
    reader = threading.Thread(target=lambda: found.append(len(batch.hits(later))))
    reader.start()
    reader.join(0.2)
    waited = not found
    release.set()
    reader.join(10)
    assert waited and found and found[0] == len(store.search(TENANT, later_request).hits) and sorted(calls) == [1, 2]
    store.remote = False  # type: ignore[misc]
    calls.clear()
    release.set()
    in_process = SearchBatch(store, TENANT)
    tickets = [in_process.ask(later_request, later=True), in_process.ask(entity_search("mira castell"))]
    assert all(in_process.hits(t) for t in tickets) and calls == [2]


def test_the_kg_parts_first_hop_reads_its_relations_with_the_anchor_searches(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first hop of the expansion starts from the seeds alone: the relations touching them are
    listed in the batch that searches the anchors' relations (a round trip fewer a kg query on a
    remote store, when the adjacency cache does not hold them), and the answer is the one of
    reading them at the hop."""
    from kbgraph.search.graph_cache import EDGE_FIELDS, RelationAdjacency
    from kbgraph.search.kg.params import KGParams
    from kbgraph.search.kg.retrieval import retrieve_kg
    from kbgraph.search.query_analysis import QueryAnalysis

    question = "What is the emblem of the guild founded by Mira Castell?"
    analysis = QueryAnalysis(question, ["Mira Castell"], ["emblem", "guild", "founded"], "nlp")
    batches: list[list[SearchRequest]] = []
    send = store.search_many

    def search_many(tenant: str, requests: Sequence[SearchRequest]) -> list[SearchResult]:
        batches.append(list(requests))
        return send(tenant, requests)

    def answer() -> tuple:
        clear_caches()
        batches.clear()
        found = retrieve_kg(store, TENANT, [KB], analysis, EMBEDDER.embed([question])[0], KGParams(), EMBEDDER)
        return (found.context, [(c.chunk_id, c.score) for c in found.chunks], [(e.key, e.score) for e in found.entities],
                [(r.id, r.score) for r in found.relations])

    def listing(r: SearchRequest) -> bool:
        return r.text is None and r.vector is None and r.fields == EDGE_FIELDS

    def anchored(r: SearchRequest) -> bool:
        return r.text is not None and any(c.field in ("src_key_kwd", "tgt_key_kwd") for c in r.where)

    store.search_many = search_many  # type: ignore[method-assign]
    together = answer()
    assert together[2] and any(map(anchored, [r for b in batches for r in b]))
    assert any(any(map(listing, b)) and any(map(anchored, b)) for b in batches)
    monkeypatch.setattr(RelationAdjacency, "ask", lambda self, batch, nodes: None)
    assert answer() == together
    assert not any(any(map(listing, b)) and any(map(anchored, b)) for b in batches)


@pytest.mark.parametrize("mode", ["kg", "ppr", "mix"])
def test_a_remote_graph_query_sends_its_graph_searches_without_waiting_for_the_graph_state(
        store: SQLiteStore, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a store behind a network the graph state's read and the first graph searches go out side
    by side (a round trip of every graph query one after the other): a graph state that comes back
    only once those searches are sent holds nothing up, and the answer is the one of reading it first."""
    import kbgraph.search.retrieve as retrieve_module

    question = "What is the emblem of the guild founded by Mira Castell?"

    def answer() -> tuple:
        found = retrieve(store, TENANT, [KB], question, mode, embedder=EMBEDDER, settings=Settings(),
                         extractor=NLPExtractor())
        return found.context, [(c.chunk_id, c.score) for c in found.chunks], [(e.key, e.score) for e in found.entities]

    clear_caches()
    first = answer()  # in process: the state first, then the searches
    clear_caches()
    store.remote = True  # type: ignore[misc]
    searched = threading.Event()
    read_state = retrieve_module.graph_state
    send = store.search_many

    def state_after_the_searches(*args: object, **kwargs: object) -> object:
        searched.wait(5)
        return read_state(*args, **kwargs)  # type: ignore[arg-type]

    def search_many(tenant: str, requests: Sequence[SearchRequest]) -> list[SearchResult]:
        if len(requests) > 1:  # the graph searches (the chunk search goes on its own)
            searched.set()
        return send(tenant, requests)

    monkeypatch.setattr(retrieve_module, "graph_state", state_after_the_searches)
    store.search_many = search_many  # type: ignore[method-assign]
    started = time.perf_counter()
    assert answer() == first
    assert searched.is_set() and time.perf_counter() - started < 4


@pytest.mark.parametrize("mode", ["kg", "mix"])
def test_the_kg_part_of_a_remote_query_does_not_wait_for_the_chunk_search(
        store: SQLiteStore, mode: str) -> None:
    """The kg part wants the chunk search's rows only at its very end: on a store behind a network
    it searches its anchors' relations while the chunk search (the query's heaviest) is still on its
    way, and answers as when it waited for it."""
    question = "What is the emblem of the guild founded by Mira Castell?"

    def answer() -> tuple:
        found = retrieve(store, TENANT, [KB], question, mode, embedder=EMBEDDER, settings=Settings(),
                         extractor=NLPExtractor())
        return (found.context, [(c.chunk_id, c.score) for c in found.chunks], [(e.key, e.score) for e in found.entities],
                [(r.id, r.score) for r in found.relations])

    clear_caches()
    first = answer()
    clear_caches()
    store.remote = True  # type: ignore[misc]
    related = threading.Event()
    search, send = store.search, store.search_many

    def search_many(tenant: str, requests: Sequence[SearchRequest]) -> list[SearchResult]:
        if any(c.field in ("src_key_kwd", "tgt_key_kwd") for r in requests for c in r.where):
            related.set()  # the anchors' relations
        return send(tenant, requests)

    def chunk_search(tenant: str, request: SearchRequest) -> SearchResult:
        if any(c.field == "knowledge_graph_kwd" and c.op == "missing" for c in request.where):
            related.wait(5)  # the chunk search comes back once the kg part has searched its anchors' relations
        return search(tenant, request)

    store.search_many = search_many  # type: ignore[method-assign]
    store.search = chunk_search  # type: ignore[method-assign]
    started = time.perf_counter()
    assert answer() == first
    assert related.is_set() and time.perf_counter() - started < 4


@pytest.mark.parametrize(("limit", "window"), [(5, 48), (24, 72)])
def test_a_graph_row_search_looks_at_three_candidates_per_place(store: SQLiteStore, limit: int, window: int) -> None:
    # each half (BM25, kNN) looks at max(3 x page, 48) candidates: what kept every evaluation set's
    # rankings at a quarter fewer hits to send and fuse than 4 x page and 64 (bench/README.md)
    request = kind_request([KB], Entity.KIND, ["mira"], {"name_ltks": 1.0}, EMBEDDER.embed(["mira"])[0], limit, 0.5)
    assert request is not None and request.candidates == window and request.limit == limit
    wider = store.search(TENANT, SearchRequest(**{**request.__dict__, "candidates": 1000})).hits
    assert [(h.id, h.score) for h in store.search(TENANT, request).hits] == [(h.id, h.score) for h in wider]
