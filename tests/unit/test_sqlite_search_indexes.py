"""The embedded store's in-memory search indexes (text postings, vector slices) stay exact while
other writers change the store: a long-lived reader must answer exactly as a store opened afresh."""

from __future__ import annotations

import random
import threading
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from kbgraph.store.base import SearchRequest, TextQuery, VectorQuery, any_of, eq
from kbgraph.store.sqlite import SQLiteStore, change_log, slice_cache, text_index, vector_index
from kbgraph.store.sqlite.fields import _json_array
from kbgraph.store.sqlite.row_set import RowSet
from kbgraph.store.sqlite.term_search import _distinct

WORDS = [f"w{i}" for i in range(40)]
DIM = 8
KINDS = ["entity", "relation", None]


def random_doc(rng: random.Random, number: int) -> dict:
    doc = {"id": f"d{number}", "content_ltks": " ".join(rng.choices(WORDS, k=rng.randint(1, 12))),
           "tag_kwd": rng.choice(["a", "b", "c"]), f"q_{DIM}_vec": [rng.uniform(-1, 1) for _ in range(DIM)]}
    if rng.random() < 0.5:
        doc["name_ltks"] = " ".join(rng.choices(WORDS[:10], k=rng.randint(1, 3)))
    kind = rng.choice(KINDS)
    if kind:
        doc["knowledge_graph_kwd"] = kind
    return doc


def searches(rng: random.Random) -> list[SearchRequest]:
    out = []
    for kind in ("entity", "relation"):
        for where in ([eq("knowledge_graph_kwd", kind)], [eq("knowledge_graph_kwd", kind), eq("tag_kwd", "a")]):
            out.append(SearchRequest(kb_ids=["kb1"], where=where, limit=8, candidates=16,
                                     text=TextQuery(rng.sample(WORDS, 3), {"content_ltks": 1.0, "name_ltks": 2.0})))
            out.append(SearchRequest(kb_ids=["kb1", "kb2"], where=where, limit=8, candidates=16,
                                     vector=VectorQuery(f"q_{DIM}_vec", [rng.uniform(-1, 1) for _ in range(DIM)]),
                                     text=TextQuery(rng.sample(WORDS, 2), {"content_ltks": 1.0}), vector_weight=0.5))
    out.append(SearchRequest(kb_ids=["kb1"], limit=8, text=TextQuery(rng.sample(WORDS, 2), {"content_ltks": 1.0})))
    return out


def answers(store: SQLiteStore, requests: list[SearchRequest]) -> list[list[tuple[str, float]]]:
    return [[(h.id, round(h.score, 5)) for h in store.search("t", r).hits] for r in requests]


def churn(writer: SQLiteStore, rng: random.Random, next_id: int, size: int = 30) -> int:
    for _ in range(size):
        action = rng.random()
        if action < 0.6:
            writer.upsert("t", rng.choice(["kb1", "kb2"]), [random_doc(rng, rng.randrange(next_id + 1))])
            next_id += 1
        elif action < 0.75:
            writer.patch("t", "kb1", {f"d{rng.randrange(max(1, next_id))}": {"content_ltks": " ".join(rng.sample(WORDS, 4))}})
        elif action < 0.85:
            writer.patch("t", "kb1", {f"d{rng.randrange(max(1, next_id))}": {"knowledge_graph_kwd": rng.choice(["entity", "relation"])}})
        else:
            writer.delete("t", ["kb1", "kb2"], [any_of("id", [f"d{rng.randrange(max(1, next_id))}" for _ in range(3)])])
    return next_id


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_long_lived_reader_matches_a_fresh_store(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # small delta limits so that both incremental updates and rebuilds happen
    monkeypatch.setattr(text_index, "_DELTA_FLOOR", 25)
    monkeypatch.setattr(vector_index, "_TAIL_FLOOR", 25)
    monkeypatch.setattr(text_index, "_SCORED_MIN_ROWS", 1)  # every term's scores are kept between searches
    rng = random.Random(seed)
    path = tmp_path / "store.db"
    writer, reader = SQLiteStore(path), SQLiteStore(path)  # two processes, in effect
    writer.ensure_index("t")
    next_id = churn(writer, rng, 0, 120)
    for _ in range(8):
        requests = searches(rng)
        fresh = SQLiteStore(path)
        assert answers(reader, requests) == answers(fresh, requests)
        assert answers(reader, requests) == answers(fresh, requests)  # the reader's kept scores
        fresh.close()
        next_id = churn(writer, rng, next_id)
    writer.close()
    reader.close()


def test_reader_rebuilds_when_the_change_log_was_trimmed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(change_log, "_LOG_KEEP", 5)
    monkeypatch.setattr(change_log, "_LOG_PRUNE_EVERY", 1)
    rng = random.Random(9)
    path = tmp_path / "store.db"
    writer, reader = SQLiteStore(path), SQLiteStore(path)
    writer.ensure_index("t")
    next_id = churn(writer, rng, 0, 60)
    requests = searches(rng)
    answers(reader, requests)  # caches built
    churn(writer, rng, next_id, 60)
    with sqlite3.connect(path) as conn:
        (tag,) = conn.execute("SELECT tag FROM kb_tenants").fetchone()
        assert conn.execute(f"SELECT count(*) FROM {tag}_log").fetchone()[0] <= 10
    assert answers(reader, requests) == answers(SQLiteStore(path), requests)


def churned_store(path: Path, seed: int, size: int) -> tuple[SQLiteStore, random.Random, list]:
    """A store after ``size`` random writes, with the rng that wrote them and searches to ask it."""
    rng = random.Random(seed)
    store = SQLiteStore(path)
    store.ensure_index("t")
    churn(store, rng, 0, size)
    return store, rng, searches(rng)


def test_store_from_before_the_change_log_and_token_counts(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store, rng, requests = churned_store(path, 4, 80)
    expected = answers(store, requests)
    store.close()
    with sqlite3.connect(path) as conn:  # what an earlier version of the store wrote
        (tag,) = conn.execute("SELECT tag FROM kb_tenants").fetchone()
        conn.execute(f"DROP TABLE {tag}_log")
        conn.execute("DROP TABLE kb_log_floor")
        conn.execute("ALTER TABLE kb_fts DROP COLUMN tokens")
    reopened = SQLiteStore(path)
    assert answers(reopened, requests) == expected
    churn(reopened, rng, 80, 20)  # and it keeps working incrementally afterwards
    assert answers(reopened, requests) == answers(SQLiteStore(path), requests)


def test_store_that_logged_with_triggers_logs_in_bulk(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store, rng, requests = churned_store(path, 5, 60)
    answers(store, requests)  # caches built, to be caught up through the log
    with sqlite3.connect(path) as conn:  # the triggers an earlier version logged with
        (tag,) = conn.execute("SELECT tag FROM kb_tenants").fetchone()
        seq = "(SELECT n FROM kb_seq WHERE k=0)"
        conn.execute(f"CREATE TRIGGER {tag}_log_ins AFTER INSERT ON {tag}_docs BEGIN "
                     f"INSERT INTO {tag}_log VALUES ({seq}, NEW.kb_id, NEW.rowid); END")
        conn.execute(f"CREATE TRIGGER {tag}_log_del AFTER DELETE ON {tag}_docs BEGIN "
                     f"INSERT INTO {tag}_log VALUES ({seq}, OLD.kb_id, OLD.rowid); END")
    reopened = SQLiteStore(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE type='trigger'").fetchone()[0] == 0
    churn(reopened, rng, 60, 30)
    churn(store, rng, 90, 30)  # the first process catches up on both processes' writes
    assert answers(store, requests) == answers(SQLiteStore(path), requests)
    assert answers(reopened, requests) == answers(SQLiteStore(path), requests)


def test_inverted_file_search_finds_the_true_neighbours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_index, "IVF_MIN_ROWS", 2000)
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(40, 32)).astype(np.float32)
    points = centers[rng.integers(0, 40, size=6000)] + 0.4 * rng.normal(size=(6000, 32)).astype(np.float32)
    store = SQLiteStore(tmp_path / "store.db")
    store.upsert("t", "kb", [{"id": f"p{i}", "knowledge_graph_kwd": "entity", "q_32_vec": p.tolist()}
                             for i, p in enumerate(points)])
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    recalls = []
    for query in rng.normal(size=(30, 32)).astype(np.float32) + centers[rng.integers(0, 40, size=30)]:
        truth = {f"p{i}" for i in np.argsort(-(unit @ (query / np.linalg.norm(query))))[:10]}
        found = store.search("t", SearchRequest(kb_ids=["kb"], where=[eq("knowledge_graph_kwd", "entity")],
                                                vector=VectorQuery("q_32_vec", query.tolist()), limit=10,
                                                candidates=10))
        recalls.append(len(truth & {h.id for h in found.hits}) / 10)
    assert np.mean(recalls) >= 0.9
    # a filter leaving few rows is searched exactly
    allowed = [f"p{i}" for i in range(0, 6000, 97)]
    query = points[5]
    hits = store.search("t", SearchRequest(kb_ids=["kb"], where=[eq("knowledge_graph_kwd", "entity"), any_of("id", allowed)],
                                           vector=VectorQuery("q_32_vec", query.tolist()), limit=5, candidates=5)).hits
    index = [int(a[1:]) for a in allowed]
    exact = [f"p{index[i]}" for i in np.argsort(-(unit[index] @ (query / np.linalg.norm(query))))[:5]]
    assert [h.id for h in hits] == exact


def test_scan_of_spans_is_their_products_in_span_order() -> None:
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(5000, 48)).astype(np.float32)
    query = rng.normal(size=48).astype(np.float32)
    spans = [slice(0, 7), slice(100, 1300), slice(2000, 2001), slice(4000, 5000)]
    whole = np.concatenate([matrix[s] @ query for s in spans])
    assert np.allclose(vector_index._scan(matrix, spans, query), whole, rtol=1e-5, atol=1e-5)
    assert len(vector_index._scan(matrix, spans, query)) == 2208
    assert len(vector_index._scan(matrix, [], query)) == 0


def _text_hits(store: SQLiteStore, candidates: int) -> list[str]:
    request = SearchRequest(kb_ids=["kb1"], limit=50, candidates=candidates,
                            text=TextQuery(["alpha"], {"content_ltks": 1.0}))
    return [h.id for h in store.search("t", request).hits]


def test_text_candidates_tied_at_the_cut_are_the_earliest_written(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "ties.db")
    written = ["d7", "d2", "d9", "d4", "d1", "d8"]  # write order unlike id order
    store.upsert("t", "kb1", [{"id": i, "content_ltks": "alpha beta"} for i in written])
    store.upsert("t", "kb1", [{"id": "d5", "content_ltks": "alpha"}])  # shorter: scores higher
    # the page orders equal scores by id; which tied rows become candidates goes by write order
    assert _text_hits(store, 3) == ["d5", "d2", "d7"]
    assert _text_hits(store, 1) == ["d5"]
    assert _text_hits(store, 50) == ["d5", "d1", "d2", "d4", "d7", "d8", "d9"]
    many = [f"m{n:02d}" for n in reversed(range(40))]
    store.upsert("t", "kb1", [{"id": i, "content_ltks": "alpha beta"} for i in many])
    assert _text_hits(store, 4) == ["d5", "d2", "d7", "d9"]


@pytest.mark.parametrize("seed", range(3))
def test_distinct_rows_match_numpy_unique(seed: int) -> None:
    rng = np.random.default_rng(seed)
    runs = [np.sort(rng.choice(5000, size=n, replace=False)) for n in rng.integers(0, 900, size=6)]
    runs.append(rng.integers(0, 5000, size=50))  # a delta's rows come in no particular order
    values = np.concatenate(runs).astype(np.int64)
    rows, inverse = _distinct(values)
    want_rows, want_inverse = np.unique(values, return_inverse=True)
    assert np.array_equal(rows, want_rows) and np.array_equal(inverse, want_inverse)
    assert _distinct(np.zeros(0, dtype=np.int64))[0].size == 0


def test_row_set_of_a_candidate_list_matches_numpy_isin() -> None:
    rng = np.random.default_rng(5)
    for n, m in ((0, 5), (5, 0), (96, 96), (1024, 300), (50, 4000)):
        values, pool = rng.integers(0, 3000, size=n), rng.integers(0, 3000, size=m)
        assert np.array_equal(RowSet.of(pool).holds(values), np.isin(values, pool))
    assert RowSet.of(np.array([1, 7])).holds(np.array([7, 9])).tolist() == [True, False]  # past the pool's end


def test_kept_term_scores_equal_fresh_ones_and_stay_within_their_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(4)
    rows = [(rowid, rng.choices(WORDS[:6], k=rng.randint(1, 9))) for rowid in range(1, 3001)]
    postings = text_index.FieldPostings(rows)
    for word in WORDS[:6]:
        first = postings.scores(word, 1.3, 5.0)
        assert postings.scores(word, 1.3, 5.0) is first  # kept: a common term
        match = postings.term(word)
        assert np.array_equal(first[0], match.rowids)
        assert np.array_equal(first[1], text_index.bm25(match.tf, match.lengths, 1.3, 5.0))
        assert postings.scores(word, 1.3, 5.5) is not first  # other statistics: scored again
    changed = postings.updated([5], [(5, ["w0"])])
    assert changed.scores("w0", 1.3, 5.0) is not postings.scores("w0", 1.3, 5.0)  # a new instance keeps its own
    monkeypatch.setattr(text_index, "_SCORED_BYTES", 40_000)  # room for about one term
    small = text_index.FieldPostings(rows)
    for word in WORDS[:6]:
        small.scores(word, 1.3, 5.0)
        assert small._scored_bytes() <= 40_000


def test_json_arrays_for_sql_read_back_as_the_values() -> None:
    import json

    for values in ([1, 2, 3], ["kb1", "é ü", 'quote " and \\ back'], [2**70, 1], [0.5, 1e16], (7, 8), []):
        assert json.loads(_json_array(values)) == list(values)
    assert _json_array([float("nan")]) == "[NaN]"  # as before: SQLite refuses it rather than matching null


@pytest.mark.parametrize("seed", [1, 2])
def test_snapshots_on_disk_answer_as_a_fresh_build(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # a new process starts from the indexes an earlier one wrote to disk, and catches up on later
    # writes through the change log: it answers exactly as a store that builds everything anew
    monkeypatch.setattr(slice_cache, "PERSIST_MIN_ROWS", 1)
    monkeypatch.setattr(vector_index, "IVF_MIN_ROWS", 30)  # k-means lists go to disk too
    monkeypatch.setattr(text_index, "_DELTA_FLOOR", 25)
    monkeypatch.setattr(vector_index, "_TAIL_FLOOR", 25)
    builds = {"postings": 0, "vectors": 0}

    def counted(cls: type, name: str) -> None:
        original = cls.__init__

        def init(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            builds[name] += 1
            original(self, *args, **kwargs)
        monkeypatch.setattr(cls, "__init__", init)

    counted(text_index.FieldPostings, "postings")
    counted(vector_index.VectorSlice, "vectors")
    rng = random.Random(seed)
    path = tmp_path / "store.db"
    writer = SQLiteStore(path)
    writer.ensure_index("t")
    next_id = churn(writer, rng, 0, 150)

    def rebuilt(requests: list[SearchRequest]) -> list:
        store = SQLiteStore(path)
        store._index_files = None  # builds everything from the rows
        found = answers(store, requests)
        store.close()
        return found

    for round_ in range(4):
        requests = searches(rng)
        expected = rebuilt(requests)
        first = SQLiteStore(path)  # from the last round's snapshots plus the change log, or built
        assert answers(first, requests) == expected
        first.close()
        assert list(Path(f"{path}.indexes").glob("*/*-g*"))
        if round_ == 0:  # no write since the snapshots were made: a new store builds nothing
            builds.update(postings=0, vectors=0)
            second = SQLiteStore(path)
            assert answers(second, requests) == expected
            assert builds == {"postings": 0, "vectors": 0}
            second.close()
        next_id = churn(writer, rng, next_id)
    writer.close()


def test_a_store_made_anew_never_reads_the_old_ones_snapshots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slice_cache, "PERSIST_MIN_ROWS", 1)
    path = tmp_path / "store.db"
    old, rng, requests = churned_store(path, 6, 150)
    answers(old, requests)  # snapshots written
    old.close()
    (old_id,) = [p.name for p in Path(f"{path}.indexes").iterdir()]
    for leftover in tmp_path.glob("store.db*"):
        if leftover.is_file():
            leftover.unlink()
    new, _, _ = churned_store(path, 7, 150)  # same path, other rows, generations counted from 0 again
    fresh = SQLiteStore(path)
    fresh._index_files = None
    assert answers(new, requests) == answers(fresh, requests)
    assert old_id not in [p.name for p in Path(f"{path}.indexes").iterdir()]


def test_a_mapped_slice_is_read_into_memory_after_some_searches_and_answers_the_same(tmp_path: Path) -> None:
    """A slice loaded from its snapshot is searched through the file's mapping until it has served
    ``_COPY_AFTER`` searches (a one-off query reads only its probed lists), then its vectors are
    copied into memory on a thread of their own (a mapped scan took twice as long): every search
    answers the same before and after, and a slice updated from a mapped one counts its own."""
    from kbgraph.store.index_files import IndexFiles

    rng = np.random.default_rng(5)
    matrix = rng.normal(size=(3000, 24)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    files = IndexFiles(tmp_path)
    files.save(("slice",), 1, vector_index.VectorSlice(np.arange(3000, dtype=np.int64), matrix))
    loaded = files.load(("slice",), vector_index.VectorSlice, 1)
    assert loaded is not None
    mapped = loaded[1]

    def in_file(slice_: vector_index.VectorSlice) -> bool:
        return isinstance(slice_._matrix.base, np.memmap)

    queries = rng.normal(size=(vector_index._COPY_AFTER + 4, 24)).astype(np.float32)
    assert in_file(mapped)
    before = [mapped.search(q, 10) for q in queries[:vector_index._COPY_AFTER - 1]]
    assert in_file(mapped)
    updated = mapped.updated(np.array([7], dtype=np.int64), np.array([7], dtype=np.int64), matrix[8:9])
    for q in queries[vector_index._COPY_AFTER - 1:]:
        mapped.search(q, 10)
    for thread in [t for t in threading.enumerate() if t.name == "kbgraph-vectors-read-in"]:
        thread.join(10)
    assert not in_file(mapped) and mapped._matrix.flags["OWNDATA"]
    after = [mapped.search(q, 10) for q in queries[:vector_index._COPY_AFTER - 1]]
    for (ids, sims), (ids2, sims2) in zip(before, after):
        assert ids.tolist() == ids2.tolist() and sims.tolist() == sims2.tolist()
    assert in_file(updated)  # its own count, and never searched
