"""A graph query on Elasticsearch sends few requests: its independent reads go together.

The sample corpus with the nlp graph (PageRank, communities, reports) on a real Elasticsearch node
(KBGRAPH_ES_URL), every sample question asked in kg, ppr and mix after a warm-up pass (the graph
caches filled, as on a running service); the HTTP requests each query sends are counted at the
client's transport. A graph query sent 10-16.5 requests one after the other before its reads were
batched (bench/README.md, "Issue 40's speed table"); batched it sends the graph searches of each
step in one ``_msearch`` (DocStore.search_many), the rows it reads by id in one ``_mget``
(DocStore.get_many), and the kg part's listings of reports and mentions in one ``_msearch``. A
change that reads one row, one listing or one search at a time again fails here, whatever the
machine's speed; the answers themselves are held equal to the embedded store's by
test_es_matches_sqlite.py and to the one-at-a-time reads by tests/search/test_search_batch.py.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.es_tidy import es_prefix

from conftest import ES_TEST_REFRESH_INTERVAL, require_service
from kbgraph.config import load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR, SAMPLE_QUESTIONS
from kbgraph.engine import Engine
from kbgraph.meta.schemas import GraphConfig
from kbgraph.store.base import SearchRequest, TextQuery, eq

# the most requests one query of a mode may send on the sample corpus, caches warm: measured with the
# batched reads kg 15, ppr 11, mix 14 (the chunk search goes beside the graph searches: two requests
# more than with it in their batch, and two fewer waits); with a scored search's page rows read with
# its missed cosines (two requests a step, not three, wherever a kNN window leaves text hits out and
# bounds which of them can reach the page) kg 14, ppr 11, mix 13, naive 2 (its missed cosines and rows
# in one request): the caps; with one search or read per request (the batches broken on purpose) kg
# sent 31, ppr 21, mix 28. Which reads wait for which (the graph state, the chunk search, the other
# part's searches) is held by tests/search/test_search_batch.py. mix fuses the kg part's chunks since
# (MixParams.kg_weight), reading them as kg does: one read more, 14. With the graph rows' text out
# of the chunks' field (records.GRAPH_TEXT: the chunk search's BM25 statistics are the chunks'
# own) one question's chunk search no longer finds a chunk its kg part ranks, and the read ahead
# of that row is one request more: kg 15, mix 15. The question's relations and reports asked
# ``later`` (SearchBatch.ask) go in requests of their own beside the seed searches (two requests
# more, a round trip fewer one after the other: the seeds no longer wait for those pages' rows): 17.
# The ppr mode reads its anchors' relations as keys (their ends and chunk lists from doc values, with
# their hits: SearchRequest.list_fields), no page of rows after them: 10 (11 reading their rows)
MOST_REQUESTS = {"naive": 2, "kg": 17, "ppr": 10, "mix": 17}
# a kg query's scans (one ``_search`` per listing of reports or mentions, one per page: 3 a kg query
# here) went in one ``_msearch``: a step with one listing alone sends it as a plain ``_search``
SINGLE_SEARCHES = 1


class Requests:
    """The requests a client sends, by endpoint, counted at its transport."""

    def __init__(self, client: Any) -> None:
        self.sent: Counter[str] = Counter()
        self._lock = threading.Lock()
        send = client.transport.perform_request

        def counted(method: str, target: str, *args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.sent[target.split("?")[0].rsplit("/", 1)[-1]] += 1
            return send(method, target, *args, **kwargs)

        client.transport.perform_request = counted

    def during(self, work: Any) -> Counter[str]:
        before = Counter(self.sent)
        work()
        return self.sent - before


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    url = os.environ.get("KBGRAPH_ES_URL")
    if not url:
        require_service("Elasticsearch", "KBGRAPH_ES_URL not set (bash tests/es_node/es-node.sh start)")
    root = tmp_path_factory.mktemp("es_round_trips")
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith("KBGRAPH_") and key not in {"KBGRAPH_REQUIRE_SERVICES", "KBGRAPH_ES_URL"}:
                mp.delenv(key, raising=False)
        opened = Engine.open(load_settings(data_dir=root, store="elasticsearch", embedding_provider="hash",
                                           embedding_dim=64, es_url=url, es_refresh_interval=ES_TEST_REFRESH_INTERVAL,
                                           es_index_prefix=es_prefix(url)))
        opened.create_kb("sample", graph=GraphConfig(enabled=True, method="nlp", community=True))
        opened.index_paths("sample", [SAMPLE_CORPUS_DIR])
        yield opened
        opened.store.drop_index(opened.tenant)
        opened.close()


def _questions() -> list[str]:
    return [q["question"] for q in json.loads(Path(SAMPLE_QUESTIONS).read_text(encoding="utf-8"))]


@pytest.mark.parametrize("mode", ["naive", "kg", "ppr", "mix"])
def test_a_warm_query_sends_few_requests(engine: Engine, mode: str) -> None:
    requests = Requests(engine.store._client)  # type: ignore[attr-defined]
    for question in _questions():  # warm-up: the graph caches of a running service
        engine.query(["sample"], question, mode=mode)
    worst: tuple[int, str, Counter[str]] = (0, "", Counter())
    for question in _questions():
        sent = requests.during(lambda: engine.query(["sample"], question, mode=mode))
        assert sent["_search"] <= SINGLE_SEARCHES, (question, dict(sent))
        worst = max(worst, (sum(sent.values()), question, sent), key=lambda w: w[0])
    count, question, sent = worst
    assert count <= MOST_REQUESTS[mode], f"{mode}: {count} requests for {question!r}: {dict(sent)}"


def test_a_batchs_listings_go_out_beside_its_scored_searches(engine: Engine) -> None:
    """A batch of scored searches and listings (the anchors' relations and the first hop's
    relations) costs the round trips of its scored searches alone: the listings are sent while the
    scored searches' first request is on its way, and each answers as when sent alone."""
    store, kb_id = engine.store, engine.kb("sample").id
    scored = SearchRequest(kb_ids=[kb_id], text=TextQuery(["guild", "emblem"], {"content_ltks": 1.0}), limit=3)
    listing = SearchRequest(kb_ids=[kb_id], where=[eq("knowledge_graph_kwd", "relation")], order_by=[("id", "asc")],
                            limit=5, count_total=False)
    transport = store._client.transport  # type: ignore[attr-defined]
    send = transport.perform_request
    listed, beside = threading.Event(), []

    def held(method: str, target: str, *args: Any, **kwargs: Any) -> Any:
        lines = kwargs.get("body")
        searches = lines[1::2] if isinstance(lines, list) else [lines or {}]
        if any("sort" in s for s in searches):
            listed.set()
        elif any("knn" in s or "query" in s and "sort" not in s for s in searches) and not beside:
            beside.append(listed.wait(5))  # the scored searches' first request waits for the listing's
        return send(method, target, *args, **kwargs)

    transport.perform_request = held
    try:
        together = store.search_many(engine.tenant, [scored, listing])
    finally:
        transport.perform_request = send
    assert beside == [True]
    for request, found in zip([scored, listing], together):
        alone = store.search(engine.tenant, request)
        assert [(h.id, h.score) for h in found.hits] == [(h.id, h.score) for h in alone.hits] and found.hits
