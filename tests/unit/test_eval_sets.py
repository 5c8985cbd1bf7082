"""The retrieval evaluation's own sets (bench/data) and its metrics (bench/eval_retrieval.py)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SETS = sorted(p for p in (BENCH / "data").iterdir() if (p / "corpus.jsonl").exists())
GENERATED = [p for p in SETS if (p / "make.py").exists()]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _eval_module():
    spec = importlib.util.spec_from_file_location("eval_retrieval", BENCH / "eval_retrieval.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules.setdefault("eval_retrieval", module)  # its dataclasses look their module up there
    spec.loader.exec_module(sys.modules["eval_retrieval"])
    return sys.modules["eval_retrieval"]


def test_the_suite_holds_the_large_sets() -> None:
    names = {p.name for p in _eval_module().suite()}
    assert {"chatlogs", "zh-news", "chatlogs-large", "zh-news-large"} <= names


@pytest.mark.parametrize("dataset", SETS, ids=lambda p: p.name)
def test_every_gold_passage_exists(dataset: Path) -> None:
    corpus = _rows(dataset / "corpus.jsonl")
    ids = [c["id"] for c in corpus]
    assert len(ids) == len(set(ids)) and all(c["title"] and c["text"] for c in corpus)
    questions = _rows(dataset / "questions.jsonl")
    assert questions
    for q in questions:
        assert q["gold_passage_ids"] and set(q["gold_passage_ids"]) <= set(ids), q["question"]
        assert len(set(q["gold_passage_ids"])) == len(q["gold_passage_ids"])


@pytest.mark.parametrize("dataset", GENERATED, ids=lambda p: p.name)
def test_a_generated_set_is_what_its_script_writes(dataset: Path, tmp_path: Path) -> None:
    # the script writes beside itself and checks every question's answer against its gold
    shutil.copy(dataset / "make.py", tmp_path / "make.py")
    subprocess.run([sys.executable, str(tmp_path / "make.py")], check=True, capture_output=True)
    for name in ("corpus.jsonl", "questions.jsonl"):
        assert (tmp_path / name).read_text(encoding="utf-8") == (dataset / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("dataset", GENERATED, ids=lambda p: p.name)
def test_a_generated_sets_answers_are_in_its_gold(dataset: Path) -> None:
    text = {c["id"]: c["title"] + "\n" + c["text"] for c in _rows(dataset / "corpus.jsonl")}
    questions = _rows(dataset / "questions.jsonl")
    multi = [q for q in questions if q["hops"] >= 2]
    assert len(multi) >= 15 and len(questions) >= 60
    for q in questions:
        assert any(q["answer"] in text[g] for g in q["gold_passage_ids"]), q["question"]


def test_the_metrics() -> None:
    ev = _eval_module()
    questions = [ev.Question("one hop", {"a"}, 1), ev.Question("two hops", {"b", "c"}, 2),
                 ev.Question("a list", {"d", "e", "f", "g", "h", "i"}, 1)]
    rankings = [["x", "a"], ["c", "x", "y", "z", "w", "b"], ["d", "e", "x", "f", "g", "h"]]
    m = ev.score(questions, rankings)  # rounded to 4 places
    assert m["recall@2"] == pytest.approx((1 + 0.5 + 2 / 6) / 3, abs=1e-4)
    assert m["recall@5"] == pytest.approx((1 + 0.5 + 4 / 6) / 3, abs=1e-4)
    assert m["all_recall@5"] == pytest.approx(1 / 3, abs=1e-4)
    # a list question's page holds five at most: 4 of them gold
    assert m["precision@5"] == pytest.approx((1 + 0.5 + 4 / 5) / 3, abs=1e-4)
    assert m["hits@1"] == pytest.approx(2 / 3, abs=1e-4)
    assert (m["mh_recall@5"], m["mh_all@5"], m["multi_hop"]) == (0.5, 0.0, 1)


def test_the_dev_and_held_out_halves_split_every_set_the_same_way_each_run() -> None:
    ev = _eval_module()
    for dataset in SETS:
        questions = [row["question"] for row in _rows(dataset / "questions.jsonl")]
        halves = [ev.split_of(q) for q in questions]
        assert set(halves) <= {"dev", "heldout"}
        assert halves == [ev.split_of(q) for q in questions]  # by the text alone: the same every run
        # each half holds a fair share of the set (a tuning half and a checking half)
        assert 0.25 <= halves.count("dev") / len(halves) <= 0.75, dataset.name
