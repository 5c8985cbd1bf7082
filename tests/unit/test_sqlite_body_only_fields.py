"""Fields no query filters on (records.UNFILTERED_FIELDS) get no kv rows in the embedded store, yet
every condition, ordering and aggregation on one answers exactly as on an indexed twin field that
holds the same values."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from kbgraph.store.base import Condition, SearchRequest, any_of, eq, exists, missing, none_of
from kbgraph.store.records import UNFILTERED_FIELDS
from kbgraph.store.sqlite import SQLiteStore

# body-only field -> an indexed field of the same type
TWINS = {"name_kwd": "twin_kwd", "mention_count_int": "twin_int", "weight_flt": "twin_flt"}
SCALARS = ["a", "b", "B", "10", "9", "true", "1", "1.5", "", "é", 1, 2, 10, -3, 1.5, 2.0, 0.1, True, False, None,
           {"x": 1}, 2 ** 70]


def random_value(rng: random.Random) -> object:
    if rng.random() < 0.3:
        return [rng.choice(SCALARS) for _ in range(rng.randint(0, 3))]
    return rng.choice(SCALARS)


def random_doc(rng: random.Random, number: int) -> dict:
    doc: dict = {"id": f"d{number:03d}", "knowledge_graph_kwd": rng.choice(["entity", "relation"])}
    for field, twin in TWINS.items():
        if rng.random() < 0.85:
            doc[field] = doc[twin] = random_value(rng)
    return doc


def twin_of(conditions: list[Condition]) -> list[Condition]:
    return [Condition(TWINS.get(c.field, c.field), c.op, c.value) for c in conditions]


def conditions(rng: random.Random, field: str) -> list[list[Condition]]:
    scalars = [v for v in SCALARS if not isinstance(v, dict) and v is not None and v != 2 ** 70]
    out: list[list[Condition]] = [[exists(field)], [missing(field)]]
    for value in scalars:
        out.append([eq(field, value)])
        for op in ("gte", "lte", "gt", "lt"):
            out.append([Condition(field, op, value)])
    for _ in range(10):
        picked = rng.sample(scalars, rng.randint(1, 6))
        out += [[any_of(field, picked)], [none_of(field, picked)],
                [eq("knowledge_graph_kwd", "entity"), any_of(field, picked)]]
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> SQLiteStore:
    assert set(TWINS) <= UNFILTERED_FIELDS
    engine = SQLiteStore(tmp_path_factory.mktemp("body_only") / "store.db")
    rng = random.Random(11)
    engine.upsert("t", "kb", [random_doc(rng, n) for n in range(120)])
    return engine


@pytest.mark.parametrize("field", sorted(TWINS))
def test_conditions_match_the_indexed_twin(store: SQLiteStore, field: str) -> None:
    for where in conditions(random.Random(field), field):
        body_only = [d["id"] for d in store.scan("t", ["kb"], where, fields=["id"])]
        indexed = [d["id"] for d in store.scan("t", ["kb"], twin_of(where), fields=["id"])]
        assert body_only == indexed, where
        assert store.count("t", ["kb"], where) == len(indexed)


@pytest.mark.parametrize("field", sorted(TWINS))
def test_aggregations_match_the_indexed_twin(store: SQLiteStore, field: str) -> None:
    for where in ([], [eq("knowledge_graph_kwd", "relation")]):
        assert store.aggregate("t", ["kb"], field, where, size=50) == \
            store.aggregate("t", ["kb"], TWINS[field], where, size=50)


@pytest.mark.parametrize("field", ["mention_count_int", "weight_flt"])
def test_numeric_orderings_match_the_indexed_twin(store: SQLiteStore, field: str) -> None:
    for direction in ("asc", "desc"):
        for offset, limit in ((0, 10), (5, 200), (100, 30)):
            pages = [[h.id for h in store.search("t", SearchRequest(
                kb_ids=["kb"], where=[eq("knowledge_graph_kwd", "entity")], order_by=[(name, direction)],
                offset=offset, limit=limit)).hits] for name in (field, TWINS[field])]
            assert pages[0] == pages[1], (direction, offset)


def test_kv_rows_an_older_store_kept_are_dropped_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SQLiteStore(path)
    store.upsert("t", "kb", [{"id": "a", "name_kwd": "x", "tag_kwd": "y"}, {"id": "b", "name_kwd": "z"}])
    store.close()
    conn = sqlite3.connect(path)
    tag = conn.execute("SELECT tag FROM kb_tenants").fetchone()[0]
    conn.execute("INSERT OR IGNORE INTO kb_fields(name) VALUES ('name_kwd')")
    code = conn.execute("SELECT code FROM kb_fields WHERE name='name_kwd'").fetchone()[0]
    # as a store written before name_kwd was kept in the body only would hold them
    conn.execute(f"INSERT INTO {tag}_kv SELECT ?, json_extract(body, '$.name_kwd'), rowid FROM {tag}_docs", (code,))
    conn.commit()
    conn.close()

    reopened = SQLiteStore(path)
    assert [d["id"] for d in reopened.scan("t", ["kb"], [eq("name_kwd", "x")])] == ["a"]
    assert reopened.count("t", ["kb"], [eq("tag_kwd", "y")]) == 1
    reopened.close()
    conn = sqlite3.connect(path)
    assert conn.execute(f"SELECT count(*) FROM {tag}_kv WHERE field=?", (code,)).fetchone()[0] == 0
    conn.close()
