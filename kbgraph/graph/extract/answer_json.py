"""JSON and reasoning in a model's free-form answer: reasoning blocks stripped, the JSON values
found in prose or code fences, and a lenient read of the first one. Extraction reads records with
these, and so do the query-side answers that are JSON (query analysis, global search's map step).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(r"^.*?</(?:think|thinking|reasoning)>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"</?(?:think|thinking|reasoning)>", re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*```[\w+-]*[ \t]*$", re.MULTILINE)


def json_values(text: str, openers: str = "[{") -> list[Any]:
    """Every JSON value that starts at one of ``openers`` somewhere in ``text`` and parses, in order
    (for model answers that wrap JSON in prose or fences)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    for match in re.finditer(f"[{re.escape(openers)}]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        found.append(value)
    return found


def load_json_lenient(text: str) -> Any:
    """The first JSON value in text (fences, prose, trailing commas and Python-style quoting
    tolerated), or None."""
    s = _FENCE.sub("", strip_reasoning(text)).strip()
    starts = [i for i in (s.find("{"), s.find("[")) if i >= 0]
    if not starts:
        return None
    begin = min(starts)
    closer = "}" if s[begin] == "{" else "]"
    end = s.rfind(closer)
    if end <= begin:
        return None
    candidate = s[begin:end + 1]
    for attempt in (candidate, re.sub(r",\s*([\]}])", r"\1", candidate)):
        try:
            return json.loads(attempt)
        except (ValueError, RecursionError):
            pass
        try:
            return ast.literal_eval(attempt)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    return None


def strip_reasoning(text: str) -> str:
    s = _THINK_BLOCK.sub("", text or "")
    s = _THINK_CLOSE.sub("", s)  # a closing tag without its opening: everything before was thinking
    return _THINK_OPEN.sub("", s)
