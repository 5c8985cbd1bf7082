"""Pass rate per area of RAGFlow's test suites from pytest junit files.

usage: python summarize.py run1.xml [run2.xml ...] [--failures]
Skipped cases (RAGFlow marks them skip itself: known issues, Infinity-only...) are not counted."""

from __future__ import annotations

import collections
import sys
import xml.etree.ElementTree as ET

# the first key found in a case's module path names its area
AREAS = [("retrieval", "retrieval"), ("file_management", "documents"), ("chunk_management", "chunks"),
         ("session_management", "sessions"), ("chat_assistant", "chats"), ("dataset", "datasets")]
ORDER = ["datasets", "documents", "chunks", "retrieval", "chats", "sessions", "other"]


def area(classname: str) -> str:
    return next((label for key, label in AREAS if key in classname), "other")


def main(paths: list[str], show_failures: bool) -> None:
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    failures = []
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            where = area(case.get("classname", ""))
            status = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    status = "failed"
                    failures.append((where, case.get("classname", "").rsplit(".", 1)[-1], case.get("name", ""),
                                     (child.get("message") or "").splitlines()[0][:160]))
                elif child.tag == "skipped":
                    status = "skipped"
            counts[where][status] += 1
    total: collections.Counter[str] = collections.Counter()
    print(f"| area | passed | failed | skipped | pass rate |\n|---|---|---|---|---|")
    for name in ORDER:
        if name in counts:
            c = counts[name]
            total += c
            print(f"| {name} | {c['passed']} | {c['failed']} | {c['skipped']} | "
                  f"{100 * c['passed'] / max(c['passed'] + c['failed'], 1):.1f}% |")
    print(f"| **all** | {total['passed']} | {total['failed']} | {total['skipped']} | "
          f"{100 * total['passed'] / max(total['passed'] + total['failed'], 1):.1f}% |")
    if show_failures:
        for row in failures:
            print(" | ".join(row))


if __name__ == "__main__":
    args = sys.argv[1:]
    main([a for a in args if not a.startswith("--")], "--failures" in args)
