"""The query-speed shortcuts of the graph modes give what the plain reads give, and follow changes.

Graph reads are cached per store until the knowledge base's graph_meta row changes; token budgets
skip the tokenizer when byte sizes settle them; chunk rows a search already read are not read again.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kbgraph.parse.token_count import count_tokens
from kbgraph.search.context import RetrievedChunk, any_of_scores, fit_chunks, within_budget
import kbgraph.search.graph_cache as graph_cache
from kbgraph.search.graph_cache import (
    TOUCHING_SIDES,
    RelationAdjacency,
    cached,
    clear_caches,
    entity_types,
    graph_state,
    holds_kind,
    read_relations_touching,
    relation_adjacency,
)
from kbgraph.search.kg.expand import expand
from kbgraph.search.kg.params import KGParams
from kbgraph.search.kg.retrieval import retrieve_kg
from kbgraph.search.kg.rows import CHUNK_FIELDS, ENTITY_FIELDS, fetch_chunks, first_reads
from kbgraph.search.kg.seeds import typed_entities
from kbgraph.graph.ppr import SparseGraph
from kbgraph.search.ppr_graph import (
    EntityGraph, RelationTable, build_entity_graph, entity_graph, entity_node, walked_relations,
)
from kbgraph.search.query_analysis import QueryAnalysis
from kbgraph.store.base import eq
from kbgraph.store.records import (
    CommunityReport,
    Entity,
    EntityMention,
    GraphMeta,
    Relation,
    entity_id,
    graph_meta_id,
    relation_id,
)
from kbgraph.store.sqlite import SQLiteStore

from . import EMBEDDER, KB, TENANT, cid, toy_kb

QUESTION = "What is the emblem of the guild founded by Mira Castell?"
ANALYSIS = QueryAnalysis(QUESTION, ["Mira Castell"], ["emblem", "guild", "organization"], "nlp")


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    clear_caches()
    s = toy_kb(tmp_path)
    yield s
    s.close()


def bump(store: SQLiteStore, version: int) -> None:
    store.upsert(TENANT, KB, [GraphMeta(kb_id=KB, version=version).to_doc()])


def add_relation(store: SQLiteStore, src: str, tgt: str, weight: float) -> None:
    store.upsert(TENANT, KB, [Relation(kb_id=KB, src_key=src, tgt_key=tgt, src_name=src, tgt_name=tgt,
                                       description=f"{src} and {tgt}", description_tokens=f"{src} {tgt}",
                                       weight=weight, chunk_ids=[cid("salt")]).to_doc()])


def test_graph_state_follows_the_meta_row(store: SQLiteStore) -> None:
    state = graph_state(store, TENANT, [KB])
    assert state.versions == ((KB, 1),) and state.cacheable
    assert graph_state(store, TENANT, [KB]) == state
    bump(store, 2)
    assert graph_state(store, TENANT, [KB]).versions == ((KB, 2),)
    # a pagerank refresh stamps its phase without a new version: the state moves too
    meta = GraphMeta(kb_id=KB, version=2)
    meta.phase_versions["pagerank"], meta.phase_status["pagerank"] = 2, "done"
    store.upsert(TENANT, KB, [meta.to_doc()])
    assert graph_state(store, TENANT, [KB]) != graph_state(store, TENANT, [KB, "other"])
    assert graph_state(store, TENANT, [KB, "other"]).versions == ((KB, 2), ("other", -1))
    assert not graph_state(store, TENANT, [KB, "other"]).cacheable


def test_cached_values_last_until_the_state_moves(store: SQLiteStore) -> None:
    calls: list[int] = []

    def build() -> int:
        calls.append(1)
        return len(calls)

    state = graph_state(store, TENANT, [KB])
    assert cached(store, ("t", 1), state, build, 4) == 1
    assert cached(store, ("t", 1), state, build, 4) == 1  # reused
    bump(store, 2)
    assert cached(store, ("t", 1), graph_state(store, TENANT, [KB]), build, 4) == 2  # rebuilt
    store.delete(TENANT, [KB], [eq("id", graph_meta_id(KB))])
    unversioned = graph_state(store, TENANT, [KB])
    assert cached(store, ("t", 1), unversioned, build, 4) == 3
    assert cached(store, ("t", 1), unversioned, build, 4) == 4  # never kept without a meta row
    for n in range(10):  # bounded per kind
        cached(store, ("t", 100 + n), graph_state(store, TENANT, [KB]), build, 4)


def test_adjacency_matches_the_store_and_sees_a_new_version(store: SQLiteStore) -> None:
    nodes = [(KB, "mira castell"), (KB, "silver heron")]
    adjacency = relation_adjacency(store, TENANT, [KB], graph_state(store, TENANT, [KB]))
    direct = read_relations_touching(store, TENANT, [KB], nodes)
    expected = sorted({e.id: e for edges in direct.values() for e in edges}.values())
    assert adjacency.touching(nodes) == expected
    assert adjacency.touching(nodes) == expected  # from the cache
    assert [e.id for e in adjacency.touching(nodes[:1])] == sorted(e.id for e in direct[nodes[0]])

    add_relation(store, "mira castell", "salt war", 3.0)
    same = relation_adjacency(store, TENANT, [KB], graph_state(store, TENANT, [KB]))
    assert same is adjacency  # the graph_meta row has not moved: a merge always moves it
    bump(store, 2)
    fresh = relation_adjacency(store, TENANT, [KB], graph_state(store, TENANT, [KB]))
    assert fresh is not adjacency
    assert (KB, "salt war") in {e.tgt for e in fresh.touching(nodes[:1])}


def every_end(store: SQLiteStore) -> list[tuple[str, str]]:
    return sorted({(KB, doc[side]) for doc in store.scan(TENANT, [KB], [eq("knowledge_graph_kwd", Relation.KIND)])
                   for side in TOUCHING_SIDES} | {(KB, "no such entity")})


def test_the_walk_graphs_relation_table_holds_what_the_listings_hold(store: SQLiteStore) -> None:
    add_relation(store, "salt war", "salt war", 0.5)  # an end twice: listed once under it
    versions = graph_state(store, TENANT, [KB]).versions
    graph = build_entity_graph(store, TENANT, [KB], versions)
    table = graph.relations
    assert table is not None and len(table) == store.count(TENANT, [KB], [eq("knowledge_graph_kwd", Relation.KIND)])
    ends = every_end(store)
    listed = read_relations_touching(store, TENANT, [KB], ends)
    assert {end: table.edges(end) for end in ends} == listed
    assert listed[(KB, "salt war")].count(listed[(KB, "salt war")][0]) == 1
    kept = EntityGraph.from_arrays(graph.to_arrays()).relations  # as a new process maps it from disk
    assert kept is not None and {end: kept.edges(end) for end in ends} == listed


def test_the_relation_table_lists_an_ends_relations_in_id_order_whatever_the_ids() -> None:
    ids = ["b", "ab", "a", "\u00e9t\u00e9", "z", "a\u00e9", "\u4e2d", "ab0", "a\udcff", "\U0001f600"]  # lengths,
    # prefixes, non-ASCII, a lone surrogate (text read with surrogateescape), a character past the BMP
    ends = [("kb", "hub"), ("kb", "x"), ("kb", "y")]
    names = [entity_node(*end) for end in ends]
    graph = SparseGraph.from_edges(names, [])
    rows = [(rid, ends[0], ends[1 + n % 2], float(n)) for n, rid in enumerate(ids)]
    table = RelationTable.of(graph, [r[0] for r in rows], [entity_node(*r[1]) for r in rows],
                             [entity_node(*r[2]) for r in rows], [r[3] for r in rows])
    assert [e.id for e in table.edges(ends[0])] == sorted(ids)
    assert [(e.id, e.weight) for e in table.edges(ends[2])] == sorted((r[0], r[3]) for r in rows if r[2] == ends[2])
    assert table.edges(("kb", "nobody")) == ()


def test_without_a_graph_meta_row_the_adjacency_lists_what_the_store_holds_now(store: SQLiteStore) -> None:
    store.delete(TENANT, [KB], [eq("id", graph_meta_id(KB))])
    unversioned = graph_state(store, TENANT, [KB])
    graph = entity_graph(store, TENANT, [KB], versions=unversioned.versions)
    assert graph.relations is not None
    add_relation(store, "mira castell", "salt war", 3.0)  # no version moves: the walk graph cannot know
    adjacency = relation_adjacency(store, TENANT, [KB], unversioned, graph.relations)
    assert (KB, "salt war") in {e.tgt for e in adjacency.touching([(KB, "mira castell")])}


def test_the_expansion_reads_no_listing_once_the_walk_graph_is_held(store: SQLiteStore,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    vector = EMBEDDER.embed([QUESTION])[0]
    listed = retrieve_kg(store, TENANT, [KB], ANALYSIS, vector, KGParams(), EMBEDDER)
    state = graph_state(store, TENANT, [KB])
    assert walked_relations(store, TENANT, [KB], state.versions) is None  # nothing built by asking
    clear_caches()
    entity_graph(store, TENANT, [KB], versions=state.versions)  # as a query's ppr part loads it
    assert walked_relations(store, TENANT, [KB], state.versions) is not None
    searches: list[list] = []
    search_many = store.search_many
    monkeypatch.setattr(store, "search_many", lambda tenant, requests: searches.append(requests) or
                        search_many(tenant, requests))
    assert retrieve_kg(store, TENANT, [KB], ANALYSIS, vector, KGParams(), EMBEDDER) == listed
    touching = [r for requests in searches for r in requests
                if any(c.field in TOUCHING_SIDES for c in r.where) and r.order_by == [("id", "asc")]]
    assert touching == []


def test_adjacency_drops_the_least_recently_used_entities(store: SQLiteStore) -> None:
    small = RelationAdjacency(store, TENANT, [KB], max_edges=2)
    full = read_relations_touching(store, TENANT, [KB], [(KB, k) for k in ("mira castell", "silver heron")])
    assert small.touching([(KB, "mira castell")]) == list(full[(KB, "mira castell")])
    assert small.touching([(KB, "silver heron")]) == list(full[(KB, "silver heron")])
    assert small.touching([(KB, "mira castell")]) == list(full[(KB, "mira castell")])  # read again


def test_expansion_is_the_same_with_the_adjacency_cache(store: SQLiteStore) -> None:
    seeds = {(KB, "mira castell"): 1.0, (KB, "saltmere"): 0.4}
    params = KGParams(hops=2, frontier=3)
    relevance = {relation_id(KB, "lumen cartographers guild", "mira castell"): 0.7}
    plain = expand(store, TENANT, [KB], seeds, params, relevance)
    assert set(relevance) <= set(plain[2])  # the relevant relation was walked
    adjacency = relation_adjacency(store, TENANT, [KB], graph_state(store, TENANT, [KB]))
    assert expand(store, TENANT, [KB], seeds, params, relevance, adjacency) == plain
    assert expand(store, TENANT, [KB], seeds, params, relevance, adjacency) == plain  # warm cache


def test_typed_listing_is_cached_until_pagerank_changes(store: SQLiteStore) -> None:
    fields = [*ENTITY_FIELDS, "name_ltks"]
    state = graph_state(store, TENANT, [KB])
    first = typed_entities(store, TENANT, [KB], ["geo"], 5, fields, state)
    assert [h.doc["entity_key_kwd"] for h in first] == ["varrow", "saltmere"]
    first[0].doc["name_kwd"] = "changed by a caller"
    assert typed_entities(store, TENANT, [KB], ["geo"], 5, fields, state)[0].doc["name_kwd"] == "Varrow"

    store.patch(TENANT, KB, {entity_id(KB, "saltmere"): {"pagerank_flt": 0.9}})
    meta = GraphMeta(kb_id=KB, version=1)
    meta.phase_versions["pagerank"], meta.phase_status["pagerank"] = 1, "done"
    store.upsert(TENANT, KB, [meta.to_doc()])
    moved = typed_entities(store, TENANT, [KB], ["geo"], 5, fields, graph_state(store, TENANT, [KB]))
    assert [h.doc["entity_key_kwd"] for h in moved] == ["saltmere", "varrow"]


class CountingSearches:
    """Counts the store's searches (a ``search`` or a ``search_many``: one trip to the store) and
    the requests in them."""

    def __init__(self, store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls, self.requests = 0, 0
        search = store.search

        def one(tenant, request):  # type: ignore[no-untyped-def]
            return many(tenant, [request])[0]

        def many(tenant, requests):  # type: ignore[no-untyped-def]
            self.calls += 1
            self.requests += len(requests)
            return [search(tenant, request) for request in requests]

        monkeypatch.setattr(store, "search_many", many)
        monkeypatch.setattr(store, "search", one)


def test_answer_types_the_graph_lacks_are_not_listed(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    fields = [*ENTITY_FIELDS, "name_ltks"]
    state = graph_state(store, TENANT, [KB])
    # in process a listing of a missing type costs less than the aggregation: every type is asked
    assert entity_types(store, TENANT, [KB], state) is None
    store.remote = True  # type: ignore[misc]
    assert {"geo", "person", "organization"} <= entity_types(store, TENANT, [KB], state)
    searches = CountingSearches(store, monkeypatch)
    # words of a question that name no type of the graph: no listing, not even a first one
    assert typed_entities(store, TENANT, [KB], ["emblem", "founded"], 5, fields, state) == []
    assert searches.calls == 0
    # a type the graph holds among them is listed as if asked alone
    mixed = typed_entities(store, TENANT, [KB], ["emblem", "geo"], 5, fields, state)
    assert [h.doc["entity_key_kwd"] for h in mixed] == ["varrow", "saltmere"] and searches.calls > 0

    # a type a merge brings in is seen once the graph_meta row moves
    store.upsert(TENANT, KB, [Entity(kb_id=KB, key="guild emblem", name="Guild Emblem", type="emblem",
                                     description="the heron emblem", name_tokens="guild emblem",
                                     description_tokens="the heron emblem", chunk_ids=[cid("salt")]).to_doc()])
    bump(store, 2)
    moved = graph_state(store, TENANT, [KB])
    assert "emblem" in entity_types(store, TENANT, [KB], moved)
    assert [h.doc["entity_key_kwd"] for h in typed_entities(store, TENANT, [KB], ["emblem"], 5, fields, moved)] \
        == ["guild emblem"]


def test_both_ends_of_the_relations_are_read_in_one_search(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = [(KB, "mira castell"), (KB, "silver heron")]
    whole = read_relations_touching(store, TENANT, [KB], nodes)
    assert all(whole.values())
    searches = CountingSearches(store, monkeypatch)
    assert read_relations_touching(store, TENANT, [KB], nodes) == whole
    assert (searches.calls, searches.requests) == (1, 2)
    # an end holding more relations than one listing reads is read whole
    monkeypatch.setattr(graph_cache, "TOUCHING_PAGE", 1)
    assert read_relations_touching(store, TENANT, [KB], nodes) == whole


def test_kinds_absent_are_not_searched(store: SQLiteStore) -> None:
    state = graph_state(store, TENANT, [KB])
    assert holds_kind(store, TENANT, [KB], CommunityReport.KIND, state)
    assert not holds_kind(store, TENANT, [KB], EntityMention.KIND, state)
    vector = EMBEDDER.embed([QUESTION])[0]
    with_reports = retrieve_kg(store, TENANT, [KB], ANALYSIS, vector, KGParams(), EMBEDDER)
    assert with_reports.reports
    store.delete(TENANT, [KB], [eq("knowledge_graph_kwd", CommunityReport.KIND)])
    bump(store, 2)
    assert not holds_kind(store, TENANT, [KB], CommunityReport.KIND, graph_state(store, TENANT, [KB]))
    without = retrieve_kg(store, TENANT, [KB], ANALYSIS, vector, KGParams(), EMBEDDER)
    assert without.reports == [] and [c.chunk_id for c in without.chunks] == [c.chunk_id for c in with_reports.chunks]


def test_kg_gives_the_same_answer_cold_and_warm(store: SQLiteStore) -> None:
    vector = EMBEDDER.embed([QUESTION])[0]
    cold = retrieve_kg(store, TENANT, [KB], ANALYSIS, vector, KGParams(), EMBEDDER)
    warm = retrieve_kg(store, TENANT, [KB], ANALYSIS, vector, KGParams(), EMBEDDER)
    clear_caches()
    again = retrieve_kg(store, TENANT, [KB], ANALYSIS, vector, KGParams(), EMBEDDER)
    assert cold == warm == again
    assert cold.relations  # walked relations keep their full rows
    assert all(r.description and r.src_name for r in cold.relations)


def test_fetch_chunks_uses_rows_already_read(store: SQLiteStore) -> None:
    scores = {cid("guild"): 0.9, cid("mira"): 0.8, cid("heron"): 0.5, "gone": 0.95}
    plain = fetch_chunks(store, TENANT, [KB], scores, 2, "ppr")
    assert [c.chunk_id for c in plain] == [cid("guild"), cid("mira")]
    row = store.get(TENANT, [KB], [cid("mira")], fields=CHUNK_FIELDS)[0]
    assert fetch_chunks(store, TENANT, [KB], scores, 2, "ppr", {cid("mira"): row}) == plain
    hidden = dict(row, available_int=0)
    assert [c.chunk_id for c in fetch_chunks(store, TENANT, [KB], scores, 2, "ppr", {cid("mira"): hidden})] == \
        [cid("guild"), cid("heron")]


def test_chunks_read_ahead_leave_fetch_chunks_nothing_to_read(store: SQLiteStore,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # the second place ties with the third: fetch_chunks reads both to cut the tie by document
    scores = {cid("guild"): 0.9, cid("mira"): 0.5, cid("heron"): 0.5, cid("salt"): 0.1}
    ahead = first_reads(scores, 2)
    assert ahead == [cid("guild"), *sorted([cid("mira"), cid("heron")])]
    plain = fetch_chunks(store, TENANT, [KB], scores, 2, "kg")
    rows = {doc["id"]: doc for doc in store.get(TENANT, [KB], ahead, fields=CHUNK_FIELDS)}
    monkeypatch.setattr(store, "get", lambda *args, **kwargs: pytest.fail("a row was read again"))
    assert fetch_chunks(store, TENANT, [KB], scores, 2, "kg", rows) == plain


def exact_leading(texts: list[str], budget: int) -> int:
    """How many leading texts fit when every one is tokenized (the rule before the byte bound)."""
    used = kept = 0
    for text in texts:
        cost = count_tokens(text)
        if kept and used + cost > budget:
            break
        kept += 1
        used += cost
    return kept


def test_budgets_agree_with_counting_every_token() -> None:
    rng = random.Random(3)
    words = ["guild", "heron", "Варроу", "城市", "emblem", "x" * 30, "The", "of", "🙂", "1024"]
    for _ in range(200):
        texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 40))) for _ in range(rng.randint(0, 12))]
        budget = rng.choice([0, 1, 5, 40, 200, 800, 5000])
        expected = exact_leading(texts, budget) if budget > 0 else 0
        assert len(within_budget(texts, lambda t: t, budget)) == expected
        chunks = [RetrievedChunk(chunk_id=str(n), kb_id="kb", doc_id="d", doc_name="d.md", content=t, score=1.0)
                  for n, t in enumerate(texts)]
        blocks = [f"[ID:{n}] d.md\n{t.strip()}" for n, t in enumerate(texts)]
        assert len(fit_chunks(chunks, budget)) == exact_leading(blocks, budget)


def test_entity_rows_rank_like_reading_every_row(store: SQLiteStore) -> None:
    from kbgraph.search.kg.ranking import rank_entities
    from kbgraph.search.kg.rows import _fetch_entities
    from kbgraph.search.ppr_search import entity_rows

    rng = random.Random(7)
    keys = ["mira castell", "lumen cartographers guild", "varrow", "silver heron", "saltmere", "salt war", "gone"]
    for _ in range(50):
        scores = {(KB, k): rng.choice([1.0, 0.5, 0.5000001, 0.25, rng.random()]) for k in keys}
        known = {n: d for n, d in _fetch_entities(store, TENANT, [KB], [(KB, "varrow")]).items()}
        limit = rng.randint(1, 6)
        every = _fetch_entities(store, TENANT, [KB], list(scores))
        want = rank_entities(scores, {}, every, 0.0)[:limit]
        assert rank_entities(scores, {}, entity_rows(store, TENANT, [KB], scores, known, limit), 0.0)[:limit] == want


def reference_expand(store: SQLiteStore, seeds: dict, params: KGParams, relevance: dict) -> tuple[dict, dict, dict]:
    """The expansion as its docstring states it, one relation and one direction at a time."""
    scores, hops, walked = dict(seeds), {n: 0 for n in seeds}, {}
    frontier = sorted((n for n, s in seeds.items() if s >= params.min_score), key=lambda n: (-seeds[n], n))
    frontier = frontier[:params.frontier]
    expanded: set = set()
    for hop in range(1, params.hops + 1):
        if not frontier:
            break
        expanded.update(frontier)
        edges = sorted({e.id: e for edges in read_relations_touching(store, TENANT, [KB], frontier).values()
                        for e in edges}.values())
        heaviest = {n: max([e.weight for e in edges if n in (e.src, e.tgt)] + [0.0]) for n in frontier}
        gained: dict = {}
        for edge in edges:
            for a, b in ((edge.src, edge.tgt), (edge.tgt, edge.src)):
                if a in heaviest:
                    share = edge.weight / heaviest[a] if heaviest[a] > 0 and edge.weight > 0 else 0.0
                    factor = params.hop_decay * (0.5 + 0.5 * min(1.0, share))  # hop_factor's formula
                    passed = scores[a] * any_of_scores(factor, params.relation_gain * relevance.get(edge.id, 0.0))
                    gained.setdefault(b, []).append(passed)
                    if passed > walked.get(edge.id, (0.0, edge))[0]:
                        walked[edge.id] = (passed, edge)
        for node, values in gained.items():
            scores[node] = any_of_scores(scores.get(node, 0.0), *values)
            hops.setdefault(node, hop)
        leads = [n for n in gained if n not in expanded and scores[n] >= params.min_score]
        frontier = sorted(leads, key=lambda n: (-scores[n], n))
        frontier = frontier[:params.frontier]
    return scores, hops, walked


@pytest.mark.parametrize("seed", range(4))
def test_expansion_matches_the_one_relation_at_a_time_walk(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    store = SQLiteStore(tmp_path / "walk.db")
    store.ensure_index(TENANT)
    names = [f"e{i}" for i in range(40)]
    hubs = names[:4]  # most relations touch a hub, as in real graphs; some touch nothing in the frontier
    pairs = {tuple(sorted((rng.choice(hubs if rng.random() < 0.6 else names), rng.choice(names)))) for _ in range(160)}
    pairs.add(("e1", "e1"))  # a self-relation is walked from both of its (same) ends
    relations = [Relation(kb_id=KB, src_key=a, tgt_key=b, src_name=a, tgt_name=b, description=f"{a} {b}", description_tokens=f"{a} {b}",
                          weight=rng.choice([0.0, 0.5, 1.0, 2.0, 7.0]), chunk_ids=["c"]) for a, b in sorted(pairs)]
    store.upsert(TENANT, KB, [r.to_doc() for r in relations])
    seeds = {(KB, n): rng.choice([1.0, 0.9, 0.6, 0.3, 0.04]) for n in rng.sample(names, 5)}
    relevance = {relation_id(KB, r.src_key, r.tgt_key): rng.random() for r in rng.sample(relations, 20)}
    for params in (KGParams(hops=2), KGParams(hops=3, frontier=6, relation_gain=1.5), KGParams(hops=1, frontier=2)):
        scores, hops, walked = expand(store, TENANT, [KB], seeds, params, relevance)
        want_scores, want_hops, want_walked = reference_expand(store, seeds, params, relevance)
        assert hops == want_hops
        assert scores == pytest.approx(want_scores, rel=1e-12, abs=1e-15)
        assert walked.keys() == want_walked.keys()
        for rid, (score, edge) in walked.items():
            assert edge == want_walked[rid][1] and score == pytest.approx(want_walked[rid][0], rel=1e-12)
    store.close()
