"""A scripted model that answers kbgraph's own prompts plausibly, for end-to-end tests in LLM mode.

It reads the chunk after the extraction prompt's ``---Input Text---`` marker and answers with
GraphRAG-style records built from the capitalized names in it (via kbgraph's nlp extractor), so
different chunks give different, overlapping graphs. Gleaning gets "nothing more" and "NO",
summaries the first sentences, reports valid JSON, resolution the pairs listed in ``same_pairs``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kbgraph.graph.extract.nlp.extractor import NLPExtractor

_NLP = NLPExtractor()


def _last_user(request: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")


def extraction_answer(prompt: str) -> str:
    text = prompt.split("---Input Text---", 1)[1].split("---Output---", 1)[0]
    found = _NLP.extract(text)
    records = [f'("entity"<|>{e.name}<|>{e.type}<|>{e.description})' for e in found.entities]
    records += [f'("relationship"<|>{r.source}<|>{r.target}<|>{r.description}<|>{max(1, round(r.weight * 5))})'
                for r in found.relations]
    return "##\n".join(records) + "\n<|COMPLETE|>"


class GraphModel:
    """Callable responder for ScriptedLLM; ``same_pairs`` are name pairs resolution calls the same."""

    def __init__(self, same_pairs: set[frozenset[str]] | None = None) -> None:
        self.same_pairs = same_pairs or set()
        self.kinds: list[str] = []

    def __call__(self, request: dict[str, Any]) -> str:
        return self.answer(request)[1]

    def answer(self, request: dict[str, Any]) -> tuple[str, str]:
        """(the kind of call, the answer)."""
        prompt = _last_user(request)
        kind, answer = self._answer(prompt)
        self.kinds.append(kind)
        return kind, answer

    def _answer(self, prompt: str) -> tuple[str, str]:
        if "answer YES or NO" in prompt:
            return "glean_check", "NO"
        if "left out some entities" in prompt:
            return "glean_continue", "<|COMPLETE|>"
        if "---Input Text---" in prompt:
            return "extract", extraction_answer(prompt)
        if prompt.startswith("Summarize the following descriptions"):
            fragments = [line[2:] for line in prompt.splitlines() if line.startswith("- ") and len(line) > 40]
            return "summarize", " ".join(fragments[:2])[:600] or "A summary."
        if "briefing about one cluster" in prompt:
            names = re.findall(r"^\d+,([^,]+),", prompt, flags=re.M)[:3] or ["the cluster"]
            return "report", json.dumps({
                "title": " and ".join(names), "summary": f"A cluster around {', '.join(names)}.",
                "rating": 5, "rating_explanation": "scripted",
                "findings": [{"summary": n, "explanation": f"{n} belongs to this cluster."} for n in names]})
        if "<number>: yes" in prompt:
            lines = []
            for number, a, b in re.findall(r"^(\d+)\. A: (.+?) \(.*?\n\s+B: (.+?) \(", prompt, flags=re.M):
                same = frozenset((a.strip(), b.strip())) in self.same_pairs
                lines.append(f"{number}: {'yes' if same else 'no'}")
            return "resolution", "\n".join(lines)
        if "Analyse a question" in prompt:
            return "query", json.dumps({"entities": re.findall(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)*", prompt.split("Question:")[-1]),
                                        "keywords": []})
        return "other", "A scripted answer."
