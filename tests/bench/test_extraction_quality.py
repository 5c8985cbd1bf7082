"""bench/extraction_quality.py runs on a few gold lines, and the gold set stays what its README says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLD = ROOT / "bench" / "data" / "extraction-gold"
TYPES = {"person", "organization", "location", "product", "event", "work", "group"}
sys.path.insert(0, str(ROOT / "bench"))

import extraction_quality as eq  # noqa: E402


def test_the_gold_marks_are_where_their_offsets_say_and_each_language_has_300() -> None:
    rows = eq.load_gold([GOLD])
    per_lang: dict[str, int] = {}
    for row in rows:
        assert {"doc_id", "lang", "kind", "text", "entities"} <= set(row)
        for m in row["entities"]:
            assert row["text"][m["start"]:m["end"]] == m["surface"], (row["doc_id"], m)
            assert m["type"] in TYPES and m["canonical"].strip()
        per_lang[row["lang"]] = per_lang.get(row["lang"], 0) + len(row["entities"])
    assert per_lang["en"] >= 300 and per_lang["zh"] >= 300


def test_scores_a_few_gold_lines_per_language_and_kind() -> None:
    rows = eq.load_gold([GOLD])
    few = [r for r in rows if r["lang"] == "en" and r["kind"] == "email"][:3] + \
          [r for r in rows if r["lang"] == "en" and r["kind"] == "encyclopedia"][:2] + \
          [r for r in rows if r["lang"] == "zh"][:2]
    result = eq.evaluate(few)
    assert {"en", "zh", "en/email", "en/encyclopedia", "zh/encyclopedia"} <= set(result["groups"])
    for g in result["groups"].values():
        assert g["gold_surfaces"] > 0 and g["extracted"] > 0
        for figure in ("precision", "recall"):
            assert 0.0 <= g[figure] <= 1.0
    en = result["groups"]["en"]
    assert en["alias_mentions"] > 0 and 0.0 <= en["alias_linking"] <= 1.0
    assert result["mention_map"] in (True, False)


def test_the_command_line_prints_json(tmp_path: Path) -> None:
    sample = tmp_path / "sample.jsonl"
    lines = [line for line in (GOLD / "en-email.jsonl").read_text(encoding="utf-8").splitlines()[:2]]
    lines += (GOLD / "zh-encyclopedia.jsonl").read_text(encoding="utf-8").splitlines()[:1]
    sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
    answer = subprocess.run([sys.executable, str(ROOT / "bench" / "extraction_quality.py"), str(sample), "--json"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert answer.returncode == 0, answer.stderr[-3000:]
    result = json.loads(answer.stdout)
    assert set(result["groups"]) == {"en", "en/email", "zh", "zh/encyclopedia"}
    assert result["groups"]["en"]["texts"] == 2


def test_every_language_and_kind_has_development_and_held_out_texts() -> None:
    """The extractor is worked on against the dev texts' errors; the held-out half checks it. Texts
    added to the set later (``added``: their errors were read when they came) are development texts
    and stay out of the balance of the original split."""
    rows = eq.load_gold([GOLD])
    parts: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        assert row.get("split") in ("dev", "heldout"), row["doc_id"]
        if row.get("added"):
            assert row["split"] == "dev", row["doc_id"]
            continue
        parts.setdefault((row["lang"], row["kind"]), []).append(row["split"])
    for group, splits in parts.items():
        assert abs(splits.count("dev") - splits.count("heldout")) <= 2, group


def test_split_scores_one_part(tmp_path: Path) -> None:
    answer = subprocess.run([sys.executable, str(ROOT / "bench" / "extraction_quality.py"), "--split", "heldout",
                             str(GOLD / "en-sheet.jsonl"), "--json"], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert answer.returncode == 0, answer.stderr[-3000:]
    held = [r for r in eq.load_gold([GOLD / "en-sheet.jsonl"]) if r["split"] == "heldout"]
    assert json.loads(answer.stdout)["groups"]["en"]["texts"] == len(held)


def test_over_all_texts_the_error_lists_are_the_development_texts_only(tmp_path: Path, capsys) -> None:
    """The held-out texts' errors are never printed unless asked for: their figures are the check."""
    def row(doc_id: str, split: str, text: str) -> str:
        return json.dumps({"doc_id": doc_id, "lang": "en", "kind": "email", "source": "test", "split": split,
                           "text": text, "entities": [{"surface": "Dublin", "type": "location", "start": 0,
                                                        "end": 6, "canonical": "Dublin"}]})
    gold = tmp_path / "gold.jsonl"
    gold.write_text(row("d1", "dev", "Dublin is where Zorbly Widgets met.") + "\n"
                    + row("h1", "heldout", "Dublin is where Quantrix Gadgets met.") + "\n", encoding="utf-8")
    assert eq.main([str(gold)]) == 0
    out = capsys.readouterr().out
    assert "zorbly widgets" in out and "quantrix" not in out.lower()
    assert eq.main([str(gold), "--split", "heldout"]) == 0
    out = capsys.readouterr().out
    assert "most frequent" not in out and "quantrix" not in out.lower()
