"""The embedded store writes bodies with orjson: whatever it takes in comes back exactly, and what
JSON cannot hold is refused for that document only."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbgraph.store.base import StoreError, eq
from kbgraph.store.sqlite import SQLiteStore


@pytest.fixture()
def store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / "store.db")


def test_values_round_trip_exactly(store: SQLiteStore) -> None:
    odd = {"id": "odd", "big_int": 2 ** 70, "neg_int": -(2 ** 80), "nested_with_weight": {"k": [1, 2 ** 65, "é"]},
           "ratio_flt": 0.1, "name_kwd": "Ölmühle ✓ 中文", "quote_tks": 'say "hi"\n\\ done'}
    plain = {"id": "plain", "n_int": 2 ** 63 - 1, "x_flt": 1e-300, "flags_kwd": ["a", "b"], "empty": {}}
    store.upsert("t", "kb", [odd, plain])
    got = {d["id"]: d for d in store.get("t", ["kb"], ["odd", "plain"])}
    for doc in (odd, plain):
        assert {k: v for k, v in got[doc["id"]].items() if k != "kb_id"} == doc
        assert type(got[doc["id"]].get("big_int", 0)) is int
    # a body written the slow way is still read by the SQL that filters on body-only fields
    assert store.count("t", ["kb"], [eq("name_kwd", "Ölmühle ✓ 中文")]) == 1


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), [1.0, float("-inf")], {"deep": [{"x": float("nan")}]}])
def test_non_finite_numbers_are_refused_anywhere_in_a_document(store: SQLiteStore, bad: object) -> None:
    with pytest.raises(StoreError, match="bad"):
        store.upsert("t", "kb", [{"id": "bad", "v_with_weight": bad}, {"id": "fine"}])
    assert [d["id"] for d in store.get("t", ["kb"], ["bad", "fine"])] == ["fine"]
