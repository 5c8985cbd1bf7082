"""bench/bridge_report.py reads a set's multi-hop questions through the nlp extractor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_reports_the_entities_a_small_sets_gold_passages_share() -> None:
    answer = subprocess.run([sys.executable, str(ROOT / "bench" / "bridge_report.py"),
                             str(ROOT / "bench" / "data" / "chatlogs"), "--json"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert answer.returncode == 0, answer.stderr[-3000:]
    summary = json.loads(answer.stdout)
    assert summary["multi_hop"] == 17 and summary["passages"] == 34
    assert 0 < summary["gold_share_an_entity"] <= summary["multi_hop"]
    assert summary["most_cited"]
