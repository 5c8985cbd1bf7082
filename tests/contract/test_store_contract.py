"""The DocStore contract (kbgraph/store/base.py), run against every engine.

Only the DocStore interface is used here, so the same assertions hold on SQLite and Elasticsearch.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from kbgraph.store.base import (
    Condition, DocStore, SearchRequest, StoreError, TextQuery, VectorQuery, any_of, eq, exists, missing,
    none_of,
)

V = "q_4_vec"


def ids_of(result: Any) -> list[str]:
    return [h.id for h in result.hits]


def listing(store: DocStore, tenant: str, kbs: list[str], where: list[Condition], **kw: Any) -> list[str]:
    return ids_of(store.search(tenant, SearchRequest(kb_ids=kbs, where=where, limit=1000, **kw)))


def text_search(store: DocStore, tenant: str, kb: str, tokens: list[str], fields: dict[str, float],
                **kw: Any) -> Any:
    return store.search(tenant, SearchRequest(kb_ids=[kb], text=TextQuery(tokens, fields), **kw))


# ---------------------------------------------------------------------------- index lifecycle


def test_index_lifecycle(store: DocStore, kb: str) -> None:
    tenant = f"tenant-{uuid.uuid4().hex}"
    assert not store.index_exists(tenant)
    store.ensure_index(tenant)
    store.ensure_index(tenant)
    assert store.index_exists(tenant)
    store.upsert(tenant, kb, [{"id": "a", "title_tks": "x"}])
    store.drop_index(tenant)
    store.drop_index(tenant)
    assert not store.index_exists(tenant)
    # reads on a missing index find nothing rather than fail
    assert store.count(tenant, [kb]) == 0
    assert store.get(tenant, [kb], ["a"]) == []
    assert list(store.scan(tenant, [kb])) == []
    assert store.search(tenant, SearchRequest(kb_ids=[kb])).total == 0


def test_odd_tenant_ids_are_separate(store: DocStore, kb: str) -> None:
    tenants = [f"Tenant {uuid.uuid4().hex}; DROP TABLE x", f"租户-{uuid.uuid4().hex}/../\"'"]
    try:
        for i, tenant in enumerate(tenants):
            store.ensure_index(tenant)
            store.upsert(tenant, kb, [{"id": "same", "n_int": i}])
        for i, tenant in enumerate(tenants):
            assert store.get(tenant, [kb], ["same"])[0]["n_int"] == i
    finally:
        for tenant in tenants:
            store.drop_index(tenant)


def test_empty_kb_ids_is_an_error(store: DocStore, tenant: str) -> None:
    with pytest.raises(ValueError):
        store.count(tenant, [])
    with pytest.raises(ValueError):
        store.get(tenant, [], ["a"])
    with pytest.raises(ValueError):
        store.delete(tenant, [])
    with pytest.raises(ValueError):
        store.update(tenant, [], [], {"x_int": 1})
    with pytest.raises(ValueError):
        list(store.scan(tenant, []))
    with pytest.raises(ValueError):
        store.aggregate(tenant, [], "tag_kwd")
    with pytest.raises(ValueError):
        store.search(tenant, SearchRequest(kb_ids=[]))


# ---------------------------------------------------------------------------- writes


def test_upsert_get_and_replace(store: DocStore, tenant: str, kb: str) -> None:
    n = store.upsert(tenant, kb, [
        {"id": "a", "title_tks": "alpha", "tag_kwd": ["x", "y"], "n_int": 1, "pay_with_weight": {"k": [1, 2]}},
        {"id": "b", "title_tks": "beta", "tag_kwd": "x", "n_int": 2},
        {"id": "c", "title_tks": "gamma", "n_int": 3},
    ])
    assert n == 3
    docs = store.get(tenant, [kb], ["c", "missing", "a"])
    assert [d["id"] for d in docs] == ["c", "a"]
    assert docs[1]["kb_id"] == kb
    assert docs[1]["tag_kwd"] == ["x", "y"]
    assert docs[1]["pay_with_weight"] == {"k": [1, 2]}

    # an upsert replaces the whole document: fields it does not name are gone
    store.upsert(tenant, kb, [{"id": "a", "title_tks": "delta", "other_kwd": "z"}])
    a = store.get(tenant, [kb], ["a"])[0]
    assert a["title_tks"] == "delta" and a["other_kwd"] == "z"
    assert "tag_kwd" not in a and "n_int" not in a
    assert store.count(tenant, [kb]) == 3
    assert store.count(tenant, [kb], [eq("tag_kwd", "y")]) == 0
    assert ids_of(text_search(store, tenant, kb, ["alpha"], {"title_tks": 1})) == []
    assert ids_of(text_search(store, tenant, kb, ["delta"], {"title_tks": 1})) == ["a"]


def test_a_list_field_that_changes_is_filtered_by_its_new_values(store: DocStore, tenant: str, kb: str) -> None:
    store.upsert(tenant, kb, [{"id": "e", "doc_ids_kwd": ["d1", "d2"], "n_int": 1}])
    store.upsert(tenant, kb, [{"id": "e", "doc_ids_kwd": ["d2", "d3", "d4"], "n_int": 2}])
    assert store.count(tenant, [kb], [eq("doc_ids_kwd", "d1")]) == 0
    for value in ("d2", "d3", "d4"):
        assert store.count(tenant, [kb], [eq("doc_ids_kwd", value)]) == 1
    assert store.count(tenant, [kb], [eq("n_int", 1)]) == 0 and store.count(tenant, [kb], [eq("n_int", 2)]) == 1
    store.patch(tenant, kb, {"e": {"doc_ids_kwd": ["d4"]}})
    assert [store.count(tenant, [kb], [eq("doc_ids_kwd", v)]) for v in ("d2", "d3", "d4")] == [0, 0, 1]


def test_upsert_reports_bad_documents_and_writes_the_rest(store: DocStore, tenant: str, kb: str) -> None:
    with pytest.raises(StoreError):
        store.upsert(tenant, kb, [{"id": "good", "n_int": 1}, {"title_tks": "no id"}])
    assert [d["id"] for d in store.get(tenant, [kb], ["good"])] == ["good"]
    with pytest.raises(StoreError):
        store.upsert(tenant, kb, [{"id": "nan", "x_flt": float("nan")}, {"id": "fine"}])
    assert [d["id"] for d in store.get(tenant, [kb], ["nan", "fine"])] == ["fine"]
    store.upsert(tenant, kb, [{"id": "v", V: [1, 0, 0, 0]}])
    with pytest.raises(StoreError):
        store.upsert(tenant, kb, [{"id": "w", V: [1, 0, 0]}])
    with pytest.raises(StoreError):
        store.search(tenant, SearchRequest(kb_ids=[kb], vector=VectorQuery(V, [1, 0])))


def test_patch(store: DocStore, tenant: str, kb: str) -> None:
    store.upsert(tenant, kb, [
        {"id": "a", "title_tks": "old words", "tag_kwd": "x", "n_int": 1, V: [1, 0, 0, 0]},
        {"id": "b", "title_tks": "other", "tag_kwd": "x", "n_int": 2},
    ])
    changed = store.patch(tenant, kb, {"a": {"tag_kwd": ["y", "z"], "title_tks": "new words"},
                                       "nope": {"n_int": 5}})
    assert changed == 1
    a = store.get(tenant, [kb], ["a"], fields=["tag_kwd", "title_tks", "n_int", V])[0]
    assert a["tag_kwd"] == ["y", "z"] and a["title_tks"] == "new words" and a["n_int"] == 1
    assert a[V] == pytest.approx([1, 0, 0, 0])
    # the patched values are what filters and full text now see
    assert store.count(tenant, [kb], [eq("tag_kwd", "x")]) == 1
    assert store.count(tenant, [kb], [eq("tag_kwd", "z")]) == 1
    assert ids_of(text_search(store, tenant, kb, ["old"], {"title_tks": 1})) == []
    assert ids_of(text_search(store, tenant, kb, ["new"], {"title_tks": 1})) == ["a"]
    # a patch never crosses into another knowledge base
    assert store.patch(tenant, f"{kb}-other", {"a": {"n_int": 9}}) == 0
    assert store.get(tenant, [kb], ["a"])[0]["n_int"] == 1
    # vectors can be patched too
    store.patch(tenant, kb, {"b": {V: [0, 1, 0, 0]}})
    hits = store.search(tenant, SearchRequest(kb_ids=[kb], vector=VectorQuery(V, [0, 1, 0, 0]), limit=1)).hits
    assert hits[0].id == "b" and hits[0].vector_score == pytest.approx(1.0, abs=1e-5)


def test_vectors_may_be_float32_arrays(store: DocStore, tenant: str, kb: str) -> None:
    """The indexing steps write embeddings as rows of a float32 array; they read back as lists."""
    rows = np.array([[1, 0, 0, 0], [0.6, 0.8, 0, 0]], dtype=np.float32)
    store.upsert(tenant, kb, [{"id": "a", V: rows[0]}, {"id": "b"}])
    store.patch(tenant, kb, {"b": {V: rows[1]}})
    got = {d["id"]: d[V] for d in store.get(tenant, [kb], ["a", "b"], fields=[V])}
    assert isinstance(got["a"], list) and got["a"] == pytest.approx([1, 0, 0, 0])
    assert got["b"] == pytest.approx([0.6, 0.8, 0, 0])
    hits = store.search(tenant, SearchRequest(kb_ids=[kb], vector=VectorQuery(V, [0, 1, 0, 0]), limit=1)).hits
    assert hits[0].id == "b" and hits[0].vector_score == pytest.approx(0.8, abs=1e-5)


def test_update_and_delete_by_filter(store: DocStore, tenant: str, kb: str) -> None:
    store.upsert(tenant, kb, [{"id": f"d{i}", "doc_id": f"doc{i % 3}", "available_int": 1, "n_int": i}
                              for i in range(12)])
    assert store.update(tenant, [kb], [eq("doc_id", "doc1")], {"available_int": 0, "state_kwd": "off"}) == 4
    assert store.count(tenant, [kb], [eq("available_int", 0)]) == 4
    assert store.count(tenant, [kb], [eq("state_kwd", "off")]) == 4
    assert store.get(tenant, [kb], ["d1"])[0]["n_int"] == 1
    assert store.delete(tenant, [kb], [eq("doc_id", "doc2")]) == 4
    assert store.count(tenant, [kb]) == 8
    assert store.count(tenant, [kb], [eq("doc_id", "doc2")]) == 0
    assert store.delete(tenant, [kb], [Condition("n_int", "gte", 9)]) == 2  # 9 and 10
    assert store.delete(tenant, [kb]) == 6
    assert store.count(tenant, [kb]) == 0


# ---------------------------------------------------------------------------- filters


@pytest.fixture
def filter_docs(store: DocStore, tenant: str, kb: str) -> tuple[str, str]:
    store.upsert(tenant, kb, [
        {"id": "a", "kind_kwd": "x", "tags_kwd": ["red", "blue"], "n_int": 1, "f_flt": 0.5, "knowledge_graph_kwd": "entity"},
        {"id": "b", "kind_kwd": "y", "tags_kwd": ["blue"], "n_int": 5, "f_flt": 1.5, "knowledge_graph_kwd": "relation"},
        {"id": "c", "kind_kwd": "x", "tags_kwd": [], "n_int": 10, "knowledge_graph_kwd": "entity"},
        {"id": "d", "n_int": 7, "f_flt": 2.5},
    ])
    return tenant, kb


@pytest.mark.parametrize("where, expected", [
    ([eq("kind_kwd", "x")], "ac"),
    ([eq("tags_kwd", "blue")], "ab"),
    ([eq("tags_kwd", "red")], "a"),
    ([any_of("tags_kwd", ["red", "green"])], "a"),
    ([any_of("kind_kwd", ["y", "z"])], "b"),
    ([any_of("kind_kwd", [])], ""),
    ([none_of("tags_kwd", ["red"])], "bcd"),
    ([none_of("kind_kwd", ["x"])], "bd"),
    ([none_of("kind_kwd", [])], "abcd"),
    ([exists("tags_kwd")], "ab"),
    ([missing("tags_kwd")], "cd"),
    ([exists("f_flt")], "abd"),
    ([missing("kind_kwd")], "d"),
    ([Condition("n_int", "gte", 5)], "bcd"),
    ([Condition("n_int", "gt", 5)], "cd"),
    ([Condition("n_int", "lte", 5)], "ab"),
    ([Condition("n_int", "lt", 5)], "a"),
    ([Condition("f_flt", "gt", 1.0), Condition("f_flt", "lt", 2.0)], "b"),
    ([eq("n_int", 7)], "d"),
    ([eq("id", "c")], "c"),
    ([any_of("id", ["a", "d", "zz"])], "ad"),
    ([none_of("id", ["a", "d"])], "bc"),
    ([eq("knowledge_graph_kwd", "entity")], "ac"),
    ([missing("knowledge_graph_kwd")], "d"),
    ([none_of("knowledge_graph_kwd", ["relation"])], "acd"),
    ([eq("knowledge_graph_kwd", "entity"), eq("tags_kwd", "blue")], "a"),
    ([eq("kind_kwd", "x"), Condition("n_int", "gte", 5), any_of("id", ["a", "c"])], "c"),
    ([eq("nonexistent_kwd", "x")], ""),
    ([none_of("nonexistent_kwd", ["x"])], "abcd"),
])
def test_filters(store: DocStore, filter_docs: tuple[str, str], where: list[Condition], expected: str) -> None:
    tenant, kb = filter_docs
    assert sorted(listing(store, tenant, [kb], where)) == list(expected)
    assert store.count(tenant, [kb], where) == len(expected)
    assert sorted(d["id"] for d in store.scan(tenant, [kb], where)) == list(expected)


def test_listing_order_by(store: DocStore, filter_docs: tuple[str, str]) -> None:
    tenant, kb = filter_docs
    assert listing(store, tenant, [kb], [], order_by=[("n_int", "desc")]) == ["c", "d", "b", "a"]
    assert listing(store, tenant, [kb], [], order_by=[("n_int", "asc")]) == ["a", "b", "d", "c"]
    # missing values sort last in both directions; ties go by id
    assert listing(store, tenant, [kb], [], order_by=[("f_flt", "desc")]) == ["d", "b", "a", "c"]
    assert listing(store, tenant, [kb], [], order_by=[("f_flt", "asc")]) == ["a", "b", "d", "c"]
    assert listing(store, tenant, [kb], [], order_by=[("kind_kwd", "asc")]) == ["a", "c", "b", "d"]
    assert listing(store, tenant, [kb], []) == ["a", "b", "c", "d"]



def test_numeric_order_pages_ties_and_missing_values(store: DocStore, tenant: str, kb: str) -> None:
    # ties broken by id, rows without the field last (by id) in both directions, filters applied
    ranks = {"r01": 0.5, "r02": 0.9, "r03": 0.5, "r04": 0.1, "r05": None, "r06": 0.9, "r07": 0.5,
             "r08": None, "r09": 0.3, "r10": 0.7}
    store.upsert(tenant, kb, [{"id": i, "kind_kwd": "odd" if int(i[1:]) % 2 else "even",
                               **({"rank_flt": r} if r is not None else {})} for i, r in ranks.items()])
    ranked = [i for i in ranks if ranks[i] is not None]
    desc = sorted(ranked, key=lambda i: (-ranks[i], i)) + ["r05", "r08"]
    asc = sorted(ranked, key=lambda i: (ranks[i], i)) + ["r05", "r08"]
    for direction, expected in (("desc", desc), ("asc", asc)):
        assert listing(store, tenant, [kb], [], order_by=[("rank_flt", direction)]) == expected
        pages = [ids_of(store.search(tenant, SearchRequest(kb_ids=[kb], order_by=[("rank_flt", direction)],
                                                           offset=start, limit=3))) for start in range(0, 10, 3)]
        assert [i for page in pages for i in page] == expected
    odd = [i for i in desc if int(i[1:]) % 2]
    assert listing(store, tenant, [kb], [eq("kind_kwd", "odd")], order_by=[("rank_flt", "desc")]) == odd
    uncounted = store.search(tenant, SearchRequest(kb_ids=[kb], order_by=[("rank_flt", "desc")], limit=2,
                                                   count_total=False))
    assert ids_of(uncounted) == desc[:2] and uncounted.total >= 2
    assert store.search(tenant, SearchRequest(kb_ids=[kb], order_by=[("rank_flt", "desc")], limit=2)).total == 10


def test_listings_page_past_ten_thousand_rows(store: DocStore, tenant: str, kb: str) -> None:
    """Any offset and limit, as deep as the rows go (Elasticsearch refuses from + size past 10,000:
    the store walks the rows instead); rows without the ordering field come last, and a page may
    start among them."""
    rows = 10_050
    docs = [{"id": f"r{i:05d}", "kind_kwd": "odd" if i % 2 else "even",
             **({"n_int": (i * 7919) % 1000} if i % 101 else {})} for i in range(rows)]
    for start in range(0, rows, 2500):
        store.upsert(tenant, kb, docs[start:start + 2500], refresh=False)
    store.refresh(tenant)
    ordered = [d["id"] for d in sorted(docs, key=lambda d: ("n_int" not in d, -d.get("n_int", 0), d["id"]))]
    by_n = [("n_int", "desc")]
    page = store.search(tenant, SearchRequest(kb_ids=[kb], order_by=by_n, offset=10_000, limit=40, fields=["n_int"]))
    assert ids_of(page) == ordered[10_000:10_040] and page.total == rows
    assert all("n_int" not in hit.doc for hit in page.hits)  # the last rows are the ones without n_int
    everything = store.search(tenant, SearchRequest(kb_ids=[kb], limit=rows + 10, fields=[], count_total=False))
    assert ids_of(everything) == sorted(ordered)
    odd = [i for i in ordered if int(i[1:]) % 2]
    deep_odd = store.search(tenant, SearchRequest(kb_ids=[kb], where=[eq("kind_kwd", "odd")], order_by=by_n,
                                                  offset=4_990, limit=20, fields=[]))
    assert ids_of(deep_odd) == odd[4_990:5_010] and deep_odd.total == len(odd)
    past_the_end = store.search(tenant, SearchRequest(kb_ids=[kb], offset=rows + 5, limit=10))
    assert past_the_end.hits == [] and past_the_end.total == rows


# ---------------------------------------------------------------------------- full text


def lucene_length(n: int) -> int:
    """A field length as Lucene's one-byte norm gives it back (SmallFloat.intToByte4, byte4ToInt):
    exact under 24, then the 4 most significant bits of what is over 24."""
    if n < 24:
        return n
    rest = n - 24
    shift = max(rest.bit_length() - 4, 0)
    return 24 + ((rest >> shift) << shift)


def lucene_bm25(corpus: dict[str, dict[str, str]], tokens: list[str], fields: dict[str, float]) -> dict[str, float]:
    """Reference BM25 (k1=1.2, b=0.75, Lucene idf, Lucene's field lengths) summed over fields with boosts."""
    scores: dict[str, float] = {}
    for name, boost in fields.items():
        docs = {i: f[name].split() for i, f in corpus.items() if f.get(name)}
        n_docs = len(docs)
        avg = sum(map(len, docs.values())) / n_docs
        for token in dict.fromkeys(tokens):
            df = sum(token in toks for toks in docs.values())
            if not df:
                continue
            idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
            for i, toks in docs.items():
                tf = toks.count(token)
                if tf:
                    norm = tf / (tf + 1.2 * (1 - 0.75 + 0.75 * lucene_length(len(toks)) / avg))
                    scores[i] = scores.get(i, 0.0) + boost * idf * norm
    return scores


def test_bm25_scores_and_boosts(store: DocStore, tenant: str, kb: str) -> None:
    corpus = {
        "a": {"title_tks": "graph database", "content_ltks": "a graph stores nodes and edges"},
        "b": {"title_tks": "cooking", "content_ltks": "graph graph graph of recipes"},
        "c": {"title_tks": "graph", "content_ltks": "short"},
        "d": {"title_tks": "music theory", "content_ltks": "scales chords and rhythm in music for all"},
        "e": {"content_ltks": "a long text about graph theory and graph algorithms with many other words"},
    }
    store.upsert(tenant, kb, [{"id": i, **f} for i, f in corpus.items()])
    for fields in ({"content_ltks": 1.0}, {"title_tks": 1.0}, {"title_tks": 5.0, "content_ltks": 1.0}):
        for tokens in (["graph"], ["graph", "music"], ["theory", "graph", "chords"]):
            expect = lucene_bm25(corpus, tokens, fields)
            result = text_search(store, tenant, kb, tokens, fields, limit=10)
            best = max(expect.values())
            assert ids_of(result) == sorted(expect, key=lambda i: (-expect[i], i)), (fields, tokens)
            for hit in result.hits:
                assert hit.term_score == pytest.approx(expect[hit.id] / best, rel=1e-3)
                assert hit.score == pytest.approx(hit.term_score) and hit.vector_score == 0.0
    # the boost decides: title-heavy puts "c" (title "graph") first, content-heavy puts "b" first
    assert ids_of(text_search(store, tenant, kb, ["graph"], {"title_tks": 10, "content_ltks": 1}))[0] == "c"
    assert ids_of(text_search(store, tenant, kb, ["graph"], {"title_tks": 0.1, "content_ltks": 1}))[0] == "b"


# Lucene keeps a field's length in one byte (exact under 24 tokens, then 4 significant bits of the
# rest): both stores score with the lengths it keeps (lucene_length), so long fields score alike
# (with exact lengths the embedded store departed from Elasticsearch by up to 0.016)
BM25_LONG_FIELD_TOLERANCE = 1e-6


def test_bm25_on_long_fields_within_tolerance(store: DocStore, tenant: str, kb: str) -> None:
    filler = [f"w{i}" for i in range(400)]
    corpus = {f"d{n}": {"content_ltks": " ".join(["graph"] * (1 + n % 4) + ["theory"] * (n % 3)
                                                   + filler[:37 + 23 * n])} for n in range(12)}
    store.upsert(tenant, kb, [{"id": i, **f} for i, f in corpus.items()])
    for tokens in (["graph"], ["graph", "theory"]):
        expect = lucene_bm25(corpus, tokens, {"content_ltks": 1.0})
        best = max(expect.values())
        result = text_search(store, tenant, kb, tokens, {"content_ltks": 1.0}, limit=20)
        assert sorted(ids_of(result)) == sorted(expect)
        assert ids_of(result)[0] == max(expect, key=lambda i: (expect[i], i))
        for hit in result.hits:
            assert hit.term_score == pytest.approx(expect[hit.id] / best, abs=BM25_LONG_FIELD_TOLERANCE), hit.id


def test_minimum_should_match(store: DocStore, tenant: str, kb: str) -> None:
    store.upsert(tenant, kb, [
        {"id": "all", "content_ltks": "w1 w2 w3 w4"},
        {"id": "three", "content_ltks": "w1 w2 w3 zz"},
        {"id": "two", "title_tks": "w1", "content_ltks": "w2 zz zz"},
        {"id": "one", "content_ltks": "w4 w4 w4 w4"},
    ])
    fields = {"content_ltks": 1.0, "title_tks": 1.0}
    tokens = ["w1", "w2", "w3", "w4"]

    def found(msm: float) -> list[str]:
        req = SearchRequest(kb_ids=[kb], text=TextQuery(tokens, fields, minimum_should_match=msm), limit=10)
        return sorted(ids_of(store.search(tenant, req)))

    assert found(0.0) == ["all", "one", "three", "two"]
    assert found(0.5) == ["all", "three", "two"]  # "two" has w1 in the title and w2 in the content
    assert found(0.75) == ["all", "three"]
    assert found(1.0) == ["all"]


def test_text_tokens_are_exact(store: DocStore, tenant: str, kb: str) -> None:
    try:
        from kbgraph.parse.tokenize import token_string
    except ImportError:  # pragma: no cover - the tokenizer lands separately
        token_string = None
    zh = "知识图谱是一种结构化的知识表示方法"
    zh_tokens = token_string(zh) if token_string else "知识 图谱 是 一种 结构化 的 知识 表示 方法"
    store.upsert(tenant, kb, [
        {"id": "zh", "content_ltks": zh_tokens},
        {"id": "ja", "content_ltks": "東京 は 日本 の 首都 です"},
        {"id": "digits", "content_ltks": "gpt4 v2 2023 3.14 c++ o'neil"},
        {"id": "digits2", "content_ltks": "gpt v20 20230"},
    ])
    f = {"content_ltks": 1.0}
    assert ids_of(text_search(store, tenant, kb, ["图谱"], f)) == ["zh"]
    assert ids_of(text_search(store, tenant, kb, ["知识"], f)) == ["zh"]
    assert ids_of(text_search(store, tenant, kb, ["首都"], f)) == ["ja"]
    for token in ("gpt4", "v2", "2023", "3.14", "c++", "o'neil"):
        assert ids_of(text_search(store, tenant, kb, [token], f)) == ["digits"], token
    assert ids_of(text_search(store, tenant, kb, ["v20"], f)) == ["digits2"]
    # query syntax in tokens is just text
    for token in ('"', "AND", "OR", "NOT", "*", "(", "a:b", "NEAR(x"):
        assert ids_of(text_search(store, tenant, kb, [token], f)) == []


# ---------------------------------------------------------------------------- vectors and fusion


def unit(angle_deg: float) -> list[float]:
    rad = math.radians(angle_deg)
    return [math.cos(rad), math.sin(rad), 0.0, 0.0]


def test_knn_ordering_and_scores(store: DocStore, tenant: str, kb: str) -> None:
    angles = {"a0": 0, "a10": 10, "a45": 45, "a80": 80, "a135": 135, "a180": 180}
    store.upsert(tenant, kb, [{"id": i, V: [3 * x for x in unit(a)], "grp_kwd": "g" if a < 90 else "h"}
                              for i, a in angles.items()] + [{"id": "novec", "grp_kwd": "g"}])
    result = store.search(tenant, SearchRequest(kb_ids=[kb], vector=VectorQuery(V, unit(5)), limit=10))
    assert ids_of(result) == ["a0", "a10", "a45", "a80", "a135", "a180"]
    for hit in result.hits:
        cos = math.cos(math.radians(angles[hit.id] - 5))
        assert hit.vector_score == pytest.approx(max(0.0, cos), abs=1e-5)
        assert hit.score == pytest.approx(hit.vector_score) and hit.term_score == 0.0
    # filters apply before the candidate window
    result = store.search(tenant, SearchRequest(kb_ids=[kb], where=[eq("grp_kwd", "h")],
                                                vector=VectorQuery(V, unit(0)), candidates=1))
    assert ids_of(result) == ["a135"]
    result = store.search(tenant, SearchRequest(kb_ids=[kb], vector=VectorQuery(V, unit(0)), candidates=2))
    assert ids_of(result) == ["a0", "a10"] and result.total == 2


def test_similarity_floor_rescales_vector_scores_not_their_order(store: DocStore, tenant: str, kb: str) -> None:
    # a model whose unrelated texts sit at cosine ~0.75 weighs in the fusion like one centred on 0
    angles = {"a0": 0, "a20": 20, "a40": 40, "a60": 60}
    store.upsert(tenant, kb, [{"id": i, V: unit(a)} for i, a in angles.items()])
    plain = store.search(tenant, SearchRequest(kb_ids=[kb], vector=VectorQuery(V, unit(0)), limit=10))
    floored = store.search(tenant, SearchRequest(kb_ids=[kb], vector=VectorQuery(V, unit(0), floor=0.8), limit=10,
                                                 threshold=0.01))
    assert ids_of(floored) == ["a0", "a20"] and ids_of(plain)[:2] == ids_of(floored)  # a40, a60 fall under the floor
    for hit in floored.hits:
        cos = math.cos(math.radians(angles[hit.id]))
        assert hit.vector_score == pytest.approx(max(0.0, (cos - 0.8) / 0.2), abs=1e-4)


def test_hybrid_fusion_follows_vector_weight(store: DocStore, tenant: str, kb: str) -> None:
    store.upsert(tenant, kb, [
        # the text winner points away from the query vector; the vector winner barely matches the text
        {"id": "text", "content_ltks": "apple apple apple", V: unit(90)},
        {"id": "vector", "content_ltks": "apple pie with cream and many other words here", V: unit(0)},
        {"id": "middle", "content_ltks": "apple and pear", V: unit(45)},
        {"id": "none", "content_ltks": "banana"},
    ])
    q_text, q_vec = TextQuery(["apple"], {"content_ltks": 1.0}), VectorQuery(V, unit(0))
    seen: dict[float, list[str]] = {}
    for w in (0.1, 0.5, 0.9):
        result = store.search(tenant, SearchRequest(kb_ids=[kb], text=q_text, vector=q_vec, vector_weight=w))
        for hit in result.hits:
            assert hit.score == pytest.approx((1 - w) * hit.term_score + w * hit.vector_score, abs=1e-6)
        by_id = {h.id: h for h in result.hits}
        assert by_id["text"].term_score == pytest.approx(1.0)
        assert by_id["text"].vector_score == pytest.approx(0.0, abs=1e-6)
        assert by_id["vector"].vector_score == pytest.approx(1.0, abs=1e-5)
        assert "none" not in by_id
        seen[w] = ids_of(result)
    assert seen[0.1][0] == "text"
    assert seen[0.9][0] == "vector"
    assert seen[0.1] != seen[0.9]


def test_vector_only_candidates_get_no_term_score(store: DocStore, tenant: str, kb: str) -> None:
    store.upsert(tenant, kb, [{"id": "t", "content_ltks": "kiwi", V: unit(60)},
                              {"id": "v", "content_ltks": "other", V: unit(0)}])
    result = store.search(tenant, SearchRequest(kb_ids=[kb], text=TextQuery(["kiwi"], {"content_ltks": 1}),
                                                vector=VectorQuery(V, unit(0)), vector_weight=0.5))
    by_id = {h.id: h for h in result.hits}
    assert by_id["v"].term_score == 0.0 and by_id["v"].score == pytest.approx(0.5, abs=1e-5)
    assert by_id["t"].vector_score == pytest.approx(0.5, abs=1e-5)
    assert by_id["t"].score == pytest.approx(0.75, abs=1e-5)


def test_a_page_without_a_count_is_the_page_with_one(store: DocStore, tenant: str, kb: str) -> None:
    """``count_total=False`` lets a store look at fewer candidates for a small page (Elasticsearch:
    narrow windows, searched again whole when they cannot decide), never get another page."""
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(12)]
    store.upsert(tenant, kb, [{"id": f"d{i:03d}", "content_ltks": " ".join(rng.choice(words, int(rng.integers(3, 12)))),
                               V: rng.normal(size=4).tolist()} for i in range(300)])
    differs = 0
    for round_ in range(12):
        text = TextQuery([str(w) for w in rng.choice(words, 3, replace=False)], {"content_ltks": 1.0})
        vector = VectorQuery(V, rng.normal(size=4).tolist())
        for weight in (0.1, 0.5, 0.9):
            for limit, threshold in ((3, 0.0), (5, 0.3)):
                asked = dict(kb_ids=[kb], text=text, vector=vector, vector_weight=weight, candidates=200,
                             limit=limit, threshold=threshold)
                counted = store.search(tenant, SearchRequest(**asked))
                page = store.search(tenant, SearchRequest(**asked, count_total=False))
                assert [(h.id, round(h.score, 6)) for h in page.hits] == \
                    [(h.id, round(h.score, 6)) for h in counted.hits], (round_, weight, limit)
                assert len(page.hits) <= page.total <= counted.total
                differs += page.total != counted.total
    # on Elasticsearch, the narrow windows (64 of 200 here) left candidates uncounted
    assert differs or store.__class__.__name__ != "ElasticStore"


def test_a_search_of_key_fields_gives_the_rows_fields(store: DocStore, tenant: str, kb: str) -> None:
    """``key_fields``: the fields named are single-valued keywords and numbers, which a store may
    read from its index with the hits; the hits, their scores and those fields are the same."""
    rng = np.random.default_rng(11)
    words = [f"w{i}" for i in range(8)]
    store.upsert(tenant, kb, [{"id": f"d{i:03d}", "content_ltks": " ".join(rng.choice(words, 6)),
                               "entity_key_kwd": f"key {i}", "n_int": int(i), "w_flt": i / 7,
                               "knowledge_graph_kwd": "entity" if i % 3 else "relation", V: rng.normal(size=4).tolist()}
                              for i in range(120)])
    fields = ["entity_key_kwd", "n_int", "w_flt"]
    for _ in range(6):
        asked = dict(kb_ids=[kb], where=[eq("knowledge_graph_kwd", "entity")],
                     text=TextQuery([str(w) for w in rng.choice(words, 2, replace=False)], {"content_ltks": 1.0}),
                     vector=VectorQuery(V, rng.normal(size=4).tolist()), candidates=30, limit=8, fields=fields)
        rows = store.search(tenant, SearchRequest(**asked))
        keys = store.search(tenant, SearchRequest(**asked, key_fields=True))
        assert [(h.id, round(h.score, 6)) for h in keys.hits] == [(h.id, round(h.score, 6)) for h in rows.hits]
        assert [h.doc for h in keys.hits] == [h.doc for h in rows.hits] and len(rows.hits) == 8
        assert all(set(h.doc) == {"id", *fields} for h in keys.hits)


def test_a_listing_of_key_fields_gives_the_rows_fields(store: DocStore, tenant: str, kb: str) -> None:
    """A listing (no text, no vector) of ``key_fields``: the same rows in the same order, each with
    the fields it has (a row without a value has no such field, as when its row is read)."""
    store.upsert(tenant, kb, [{"id": f"m{i:03d}", "knowledge_graph_kwd": "entity_mention", "entity_key_kwd": f"key {i % 7}",
                               "chunk_id_kwd": f"c{i}", **({"weight_flt": i / 3} if i % 5 else {})}
                              for i in range(60)])
    fields = ["kb_id", "entity_key_kwd", "chunk_id_kwd", "weight_flt"]
    asked = dict(kb_ids=[kb], where=[eq("knowledge_graph_kwd", "entity_mention"), any_of("entity_key_kwd", ["key 2", "key 5"])],
                 limit=1000, fields=fields, count_total=False)
    rows = store.search(tenant, SearchRequest(**asked))
    keys = store.search(tenant, SearchRequest(**asked, key_fields=True))
    assert [h.id for h in keys.hits] == [h.id for h in rows.hits] and len(rows.hits) == 17
    assert [h.doc for h in keys.hits] == [h.doc for h in rows.hits]
    weights = {h.doc["id"]: h.doc.get("weight_flt") for h in keys.hits}
    assert weights["m005"] is None and weights["m012"] == 4.0


def test_a_scored_search_of_key_lists_gives_each_lists_distinct_values_sorted(store: DocStore, tenant: str,
                                                                              kb: str) -> None:
    """A scored search whose ``list_fields`` are among its keys: the same hits, in the same order and
    with the same scores, as the search reading rows; each list field as its distinct values in
    sorted order (one value stays a list; an empty list or a missing field is no field)."""
    lists = {"r0": ["c9", "c2", "c9", "c10"], "r1": ["c5"], "r2": [], "r3": None, "r4": ["b", "a"]}
    store.upsert(tenant, kb, [{"id": rid, "knowledge_graph_kwd": "relation", "src_key_kwd": f"s{rid}",
                               "title_tks": f"guild founder {rid}", V: unit(10 * i),
                               **({"chunk_ids_kwd": chunks} if chunks is not None else {})}
                              for i, (rid, chunks) in enumerate(lists.items())])
    asked = dict(kb_ids=[kb], where=[eq("knowledge_graph_kwd", "relation")],
                 text=TextQuery(["guild", "founder"], {"title_tks": 1.0}), vector=VectorQuery(V, unit(0)),
                 limit=10, fields=["id", "kb_id", "src_key_kwd", "chunk_ids_kwd"])
    rows = store.search(tenant, SearchRequest(**asked))
    keys = store.search(tenant, SearchRequest(**asked, key_fields=True, list_fields=("chunk_ids_kwd",)))
    assert [(h.id, round(h.score, 6)) for h in keys.hits] == [(h.id, round(h.score, 6)) for h in rows.hits]
    assert len(keys.hits) == 5
    got = {h.id: h.doc.get("chunk_ids_kwd") for h in keys.hits}
    assert got == {"r0": ["c10", "c2", "c9"], "r1": ["c5"], "r2": None, "r3": None, "r4": ["a", "b"]}
    assert all(h.doc["src_key_kwd"] == f"s{h.id}" and h.doc["kb_id"] == kb for h in keys.hits)


def test_threshold_offset_limit_total(store: DocStore, tenant: str, kb: str) -> None:
    store.upsert(tenant, kb, [{"id": f"d{a:02d}", V: unit(a)} for a in range(0, 90, 10)])
    q = VectorQuery(V, unit(0))
    result = store.search(tenant, SearchRequest(kb_ids=[kb], vector=q, threshold=0.45, limit=100))
    expected = [f"d{a:02d}" for a in range(0, 90, 10) if math.cos(math.radians(a)) >= 0.45]
    assert ids_of(result) == expected and result.total == len(expected)
    page = store.search(tenant, SearchRequest(kb_ids=[kb], vector=q, threshold=0.45, offset=2, limit=3))
    assert ids_of(page) == expected[2:5] and page.total == len(expected)
    beyond = store.search(tenant, SearchRequest(kb_ids=[kb], vector=q, offset=50, limit=3))
    assert beyond.hits == [] and beyond.total == 9
    listed = store.search(tenant, SearchRequest(kb_ids=[kb], offset=3, limit=4))
    assert ids_of(listed) == [f"d{a:02d}" for a in range(30, 70, 10)] and listed.total == 9


def test_fields_projection(store: DocStore, tenant: str, kb: str) -> None:
    store.upsert(tenant, kb, [{"id": "a", "title_tks": "hello", "n_int": 3, "tag_kwd": "x", V: unit(0)}])
    full = store.get(tenant, [kb], ["a"])[0]
    assert V not in full and full["n_int"] == 3 and full["tag_kwd"] == "x"
    some = store.get(tenant, [kb], ["a"], fields=["n_int", V, "absent_kwd"])[0]
    assert set(some) - {"id"} == {"n_int", V}
    assert some[V] == pytest.approx(unit(0), abs=1e-6)
    hit = store.search(tenant, SearchRequest(kb_ids=[kb], text=TextQuery(["hello"], {"title_tks": 1}),
                                             fields=["tag_kwd"])).hits[0]
    assert hit.id == "a" and set(hit.doc) - {"id"} == {"tag_kwd"}
    hit = store.search(tenant, SearchRequest(kb_ids=[kb], vector=VectorQuery(V, unit(0)))).hits[0]
    assert V not in hit.doc and hit.doc["title_tks"] == "hello"
    scanned = list(store.scan(tenant, [kb], fields=["title_tks", V]))
    assert scanned[0]["title_tks"] == "hello" and scanned[0][V] == pytest.approx(unit(0), abs=1e-6)


# ---------------------------------------------------------------------------- scan, count, aggregate


def test_scan_past_ten_thousand(store: DocStore, tenant: str, kb: str) -> None:
    total = 12_500
    for start in range(0, total, 2500):
        store.upsert(tenant, kb, [{"id": f"s{i:06d}", "n_int": i, "odd_kwd": str(i % 2)}
                                  for i in range(start, start + 2500)], refresh=False)
    store.refresh(tenant)
    assert store.count(tenant, [kb]) == total
    ids = [d["id"] for d in store.scan(tenant, [kb], fields=["n_int"], batch_size=3000)]
    assert len(ids) == total and len(set(ids)) == total and ids == sorted(ids)
    odd = [d["n_int"] for d in store.scan(tenant, [kb], [eq("odd_kwd", "1")], fields=["n_int"])]
    assert len(odd) == total // 2 and all(n % 2 for n in odd)


def test_aggregate(store: DocStore, tenant: str, kb: str) -> None:
    store.upsert(tenant, kb, [
        {"id": "1", "tags_kwd": ["a", "b"], "type_kwd": "p"},
        {"id": "2", "tags_kwd": ["b", "c"], "type_kwd": "p"},
        {"id": "3", "tags_kwd": ["b"], "type_kwd": "q"},
        {"id": "4", "tags_kwd": ["c"]},
        {"id": "5"},
    ])
    assert store.aggregate(tenant, [kb], "tags_kwd") == [("b", 3), ("c", 2), ("a", 1)]
    assert store.aggregate(tenant, [kb], "tags_kwd", size=2) == [("b", 3), ("c", 2)]
    assert store.aggregate(tenant, [kb], "type_kwd") == [("p", 2), ("q", 1)]
    assert store.aggregate(tenant, [kb], "tags_kwd", [eq("type_kwd", "p")]) == [("b", 2), ("a", 1), ("c", 1)]
    assert store.aggregate(tenant, [kb], "nothing_kwd") == []


# ---------------------------------------------------------------------------- isolation


def test_tenant_isolation(store: DocStore, new_tenant: Callable[[], str], kb: str) -> None:
    one, two = new_tenant(), new_tenant()
    for tenant, word in ((one, "first"), (two, "second")):
        store.upsert(tenant, kb, [{"id": f"d{i}", "content_ltks": f"{word} shared", "tag_kwd": word, V: unit(i)}
                                  for i in range(5)])
    f = {"content_ltks": 1.0}
    assert ids_of(text_search(store, one, kb, ["second"], f)) == []
    assert store.patch(one, kb, {"d0": {"tag_kwd": "patched"}}) == 1
    assert store.update(one, [kb], [eq("tag_kwd", "first")], {"n_int": 1}) == 4
    assert store.delete(one, [kb], [any_of("id", ["d1", "d2"])]) == 2
    store.upsert(one, kb, [{"id": "d3", "content_ltks": "replaced"}])
    assert store.count(one, [kb]) == 3
    assert store.count(two, [kb]) == 5
    assert store.aggregate(two, [kb], "tag_kwd") == [("second", 5)]
    assert store.get(two, [kb], ["d3"])[0]["content_ltks"] == "second shared"
    assert len(text_search(store, two, kb, ["shared"], f, limit=10).hits) == 5
    result = store.search(two, SearchRequest(kb_ids=[kb], vector=VectorQuery(V, unit(0)), limit=10))
    assert len(result.hits) == 5
    store.drop_index(one)
    assert store.count(two, [kb]) == 5


def test_kb_isolation(store: DocStore, tenant: str) -> None:
    kb1, kb2 = f"kb-{uuid.uuid4().hex[:8]}", f"kb-{uuid.uuid4().hex[:8]}"
    store.upsert(tenant, kb1, [{"id": "a", "content_ltks": "word", "tag_kwd": "x", V: unit(0)}])
    store.upsert(tenant, kb2, [{"id": "b", "content_ltks": "word", "tag_kwd": "x", V: unit(0)}])
    f = {"content_ltks": 1.0}
    assert ids_of(text_search(store, tenant, kb1, ["word"], f)) == ["a"]
    both = store.search(tenant, SearchRequest(kb_ids=[kb1, kb2], text=TextQuery(["word"], f)))
    assert ids_of(both) == ["a", "b"]
    vec = store.search(tenant, SearchRequest(kb_ids=[kb2], vector=VectorQuery(V, unit(0))))
    assert ids_of(vec) == ["b"]
    assert store.get(tenant, [kb1], ["a", "b"])[0]["id"] == "a" and len(store.get(tenant, [kb1], ["a", "b"])) == 1
    assert store.count(tenant, [kb1, kb2]) == 2
    assert store.aggregate(tenant, [kb2], "tag_kwd") == [("x", 1)]
    assert store.update(tenant, [kb1], [], {"n_int": 1}) == 1
    assert "n_int" not in store.get(tenant, [kb2], ["b"])[0]
    assert store.delete(tenant, [kb1]) == 1
    assert store.count(tenant, [kb2]) == 1
    assert [d["id"] for d in store.scan(tenant, [kb1, kb2])] == ["b"]


# ---------------------------------------------------------------------------- concurrency


def test_concurrent_writers(store: DocStore, tenant: str, kb: str) -> None:
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for batch in range(10):
                store.upsert(tenant, kb, [{"id": f"w{worker}-{batch}-{i}", "worker_kwd": str(worker),
                                           "content_ltks": f"worker{worker} text", V: unit(worker * 10)}
                                          for i in range(20)])
                store.count(tenant, [kb], [eq("worker_kwd", str(worker))])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.count(tenant, [kb]) == 800
    assert Counter(dict(store.aggregate(tenant, [kb], "worker_kwd"))) == Counter({str(w): 200 for w in range(4)})

