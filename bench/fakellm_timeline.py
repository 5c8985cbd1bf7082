"""The timeline of an indexing run as graphbench's fakellm saw it: requests finishing per window.

fakellm's ``--log`` writes one JSON line per request: ``t`` (epoch when it answered), ``kind``
(extract, other (= kbgraph's gleaning), glean_continue, summarize, community_report, embedding...)
and ``ms`` (time it held the request). With a fixed latency, a window of one latency in which
fewer requests finish than the calls allowed in flight is a gap in the dependency chain.

usage:
    python bench/fakellm_timeline.py LOG                       # the runs in the log (split at idle gaps)
    python bench/fakellm_timeline.py LOG --run RUN.json        # kbgraph's index phase (graphbench_kbgraph.py --out)
    python bench/fakellm_timeline.py LOG --segment N           # the N-th run of the listing (a peer's)
options: --window 0.8 (seconds per line), --gap 2.5 (idle seconds that separate runs)
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

SHORT = {"extract": "x", "other": "g", "glean_continue": "g", "glean_loop": "g?", "summarize": "s",
         "community_report": "r", "embedding": "e"}


def load(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        row["start"] = row["t"] - row.get("ms", 0.0) / 1000.0
    return sorted(rows, key=lambda r: r["start"])


def segments(rows: list[dict[str, Any]], gap: float) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = []
    busy_until = float("-inf")
    for row in rows:
        if row["start"] - busy_until > gap:
            out.append([])
        out[-1].append(row)
        busy_until = max(busy_until, row["t"])
    return out


def describe(seg: list[dict[str, Any]]) -> str:
    kinds = Counter(r["kind"] for r in seg)
    span = max(r["t"] for r in seg) - min(r["start"] for r in seg)
    return f"{span:6.1f} s, {len(seg)} requests: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common())


def timeline(seg: list[dict[str, Any]], t0: float, t1: float, window: float) -> list[str]:
    lines = []
    n = int((t1 - t0) / window) + 1
    for i in range(n):
        lo, hi = t0 + i * window, t0 + (i + 1) * window
        done = Counter(SHORT.get(r["kind"], r["kind"]) for r in seg if lo <= r["t"] < hi)
        # requests outstanding at the window's middle: what the client had in flight
        mid = (lo + hi) / 2
        flight = sum(1 for r in seg if r["start"] <= mid < r["t"] and r["kind"] != "embedding")
        lines.append(f"{lo - t0:6.1f}-{hi - t0:5.1f} s  in flight {flight:3d}  done: "
                     + " ".join(f"{k}{v}" for k, v in sorted(done.items())))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", type=Path)
    ap.add_argument("--run", type=Path, help="graphbench_kbgraph.py's report: its index phase's epochs")
    ap.add_argument("--segment", type=int, help="the run of the listing to show (0-based)")
    ap.add_argument("--window", type=float, default=0.8)
    ap.add_argument("--gap", type=float, default=2.5)
    a = ap.parse_args()
    rows = load(a.log)
    if a.run:
        t0, t1 = json.loads(a.run.read_text(encoding="utf-8"))["phases"]["index"]["epoch"]
        seg = [r for r in rows if t0 <= r["start"] and r["t"] <= t1 + 0.05]
        print(f"index phase {t1 - t0:.1f} s; " + describe(seg))
        print("\n".join(timeline(seg, t0, t1, a.window)))
        return
    segs = segments(rows, a.gap)
    if a.segment is None:
        for i, seg in enumerate(segs):
            print(f"{i:3d}  {describe(seg)}")
        return
    seg = segs[a.segment]
    t0, t1 = min(r["start"] for r in seg), max(r["t"] for r in seg)
    print(describe(seg))
    print("\n".join(timeline(seg, t0, t1, a.window)))


if __name__ == "__main__":
    main()
