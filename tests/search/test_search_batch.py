"""A query's searches asked together (kbgraph/search/batch.py): one ``search_many`` for everything
asked before a read, each search answered once per query, the same answers as ``search``; and the
graph modes answer the same whether their kg and ppr parts run one after the other or side by side
(``DocStore.remote``)."""

from __future__ import annotations

import threading
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
