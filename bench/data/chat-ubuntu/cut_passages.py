"""Cut the published #ubuntu logs into this set's passages (corpus.jsonl); the questions are hand-written.

    python cut_passages.py IRC_DISENTANGLEMENT_CHECKOUT

IRC_DISENTANGLEMENT_CHECKOUT is a clone of github.com/jkkummerfeld/irc-disentanglement (data under
CC BY 4.0). Each file below is cut into runs of LINES consecutive non-empty lines, as published
(timestamps, nicks, system lines such as nick changes kept); a last run shorter than half of LINES
joins the run before it. Only data/train files: data/test is the extraction gold set's source.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

LINES = 32
FILES = ("2008-07-03.train-c", "2010-10-17.train-c", "2011-02-13.train-c", "2012-11-24.train-a",
         "2013-10-28.train-a", "2014-09-29.train-c", "2015-05-08.train-c")


def runs(lines: list[str]) -> list[tuple[int, int, list[str]]]:
    """(first and last line number of the run in the file, counted from 1; its lines)."""
    numbered = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    cut = [numbered[i:i + LINES] for i in range(0, len(numbered), LINES)]
    if len(cut) > 1 and len(cut[-1]) < LINES // 2:
        cut[-2] += cut.pop()
    return [(run[0][0], run[-1][0], [line for _, line in run]) for run in cut]


def passages(checkout: Path) -> list[dict]:
    rows = []
    for name in FILES:
        lines = (checkout / "data" / "train" / f"{name}.raw.txt").read_text(encoding="utf-8").splitlines()
        day = name.split(".")[0]
        for first, last, run in runs(lines):
            title = f"#ubuntu log {day} ({name}.raw.txt), lines {first}-{last}"
            rows.append({"id": f"ubuntu-{day}-{first:04d}", "title": title, "text": "\n".join(run)})
    return rows


def main() -> None:
    out = Path(__file__).resolve().parent / "corpus.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for row in passages(Path(sys.argv[1])):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
