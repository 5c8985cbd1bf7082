"""Question -> the entities it names and the keywords for what it asks.

With a chat model this is one cached call (prompt ``query_analysis``, phase "query"). Without
one, or when the model's answer cannot be read, the `nlp` extractor finds the entities and the
remaining content words of the question become the keywords, so graph retrieval never depends on
an LLM being configured or well-behaved.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kbgraph.graph.extract.base import DEFAULT_ENTITY_TYPES, Extractor
from kbgraph.graph.extract.factory import build_extractor
from kbgraph.graph.keys import normalize_key
from kbgraph.graph.extract.answer_json import json_values
from kbgraph.llm.base import ChatModel, LLMError, Message
from kbgraph.parse.tokenize import tokenize, tokenize_query
from kbgraph.prompts import prompt_version, render

PROMPT = "query_analysis"
PHASE = "query"
MAX_ITEMS = 12  # a rambling answer should not turn into dozens of lookups

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_ENTITY_NAMES = ("entities", "entities_from_query", "low_level_keywords", "named_entities")
_KEYWORD_NAMES = ("keywords", "answer_type_keywords", "high_level_keywords", "topics")


@dataclass
class QueryAnalysis:
    question: str
    entities: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    source: Literal["llm", "nlp"] = "nlp"

    def own_words(self) -> set[str]:
        """The question's own words: its keywords' tokens, without those of the entities it names
        (what it describes rather than names: "the *institute* that built X")."""
        named = {t for name in self.entities for t in tokenize(name)}
        return {t for keyword in self.keywords for t in tokenize(keyword)} - named


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        value = re.split(r"[,;\n]", value)
    if not isinstance(value, (list, tuple)):
        return []
    out: list[str] = []
    seen: set[str] = set()
    for item in value:
        if isinstance(item, dict):  # {"name": ...} or {"entity": ...} from over-eager models
            item = next((item[k] for k in ("name", "entity", "keyword", "text") if isinstance(item.get(k), str)), "")
        if not isinstance(item, str):
            continue
        text = " ".join(item.split()).strip(" \"'`")
        key = text.casefold()
        if text and key not in seen:
            seen.add(key)
            out.append(text)
    return out[:MAX_ITEMS]


def parse_analysis(answer: str) -> tuple[list[str], list[str]] | None:
    """(entities, keywords) from a model answer, or None when it holds no usable object.

    Tolerates <think> blocks, code fences, prose around the object and single-quoted or
    trailing-comma JSON.
    """
    text = _THINK.sub("", answer or "")
    text = re.sub(r"```(?:json|JSON)?", "", text)
    candidates = json_values(text, "{")
    if not candidates:
        loose = re.sub(r",\s*([\]}])", r"\1", text.replace("'", '"'))
        candidates = json_values(loose, "{")
    for obj in candidates:
        if not isinstance(obj, dict):
            continue
        lower = {str(k).lower(): v for k, v in obj.items()}
        ent_key = next((k for k in _ENTITY_NAMES if k in lower), None)
        kw_key = next((k for k in _KEYWORD_NAMES if k in lower), None)
        if ent_key is None and kw_key is None:
            continue
        return (_strings(lower.get(ent_key)) if ent_key else [], _strings(lower.get(kw_key)) if kw_key else [])
    return None


def _without_name_parts(names: list[str]) -> list[str]:
    """The names without those that are only the part after "of" of another one: a passage about
    the Bank of England also names England (a link in the graph), but a question about the Bank of
    England is not about England, and anchoring on it pulls in everything England is related to."""
    lowered = [n.lower() for n in names]
    return [n for n, low in zip(names, lowered)
            if not any(other != low and (other.endswith(f" of {low}") or other.endswith(f" of the {low}"))
                       for other in lowered)]


def nlp_analysis(question: str, extractor: Extractor | None = None,
                 entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES) -> QueryAnalysis:
    extractor = extractor or build_extractor("nlp", None, list(entity_types))
    found = extractor.extract(question)
    entities = _without_name_parts(_strings([e.name for e in found.entities if normalize_key(e.name)]))
    entity_tokens = {t for name in entities for t in tokenize(name)}
    keywords = [t for t in tokenize_query(question) if t not in entity_tokens][:MAX_ITEMS]
    return QueryAnalysis(question=question, entities=entities, keywords=keywords, source="nlp")


def analyze_query(question: str, chat: ChatModel | None, extractor: Extractor | None = None, *,
                  entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES) -> QueryAnalysis:
    """The question's entities and keywords: from the LLM when there is one, else (or when its
    answer is unusable or the call fails) from the `nlp` extractor."""
    if chat is not None:
        prompt = render(PROMPT, question=question, entity_types=list(entity_types))
        try:
            answer = chat.chat([Message("user", prompt)], phase=PHASE, prompt_version=prompt_version(PROMPT),
                               temperature=0.0)
        except LLMError:
            answer = ""
        parsed = parse_analysis(answer)
        if parsed is not None and (parsed[0] or parsed[1]):
            return QueryAnalysis(question=question, entities=parsed[0], keywords=parsed[1], source="llm")
    return nlp_analysis(question, extractor, entity_types)
