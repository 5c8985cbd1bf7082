"""The extractor for a knowledge base's extraction method: the one module that knows the concrete
extractors (llm.py, nlp/), so that they and the types they share (base.py) import nothing above
them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from kbgraph.graph.extract.base import DEFAULT_ENTITY_TYPES, Extractor
from kbgraph.llm.base import ChatModel, LLMNotConfigured, UsageLedger

Method = Literal["general", "light", "nlp"]
METHODS: tuple[str, ...] = ("general", "light", "nlp")


def build_extractor(method: str, chat: ChatModel | None, entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES,
                    language: str = "English", max_gleanings: int = 1, glean_min_tokens: int = 0,
                    glean_policy: str = "always", glean_missed_names: int = 2,
                    ledger: UsageLedger | None = None) -> Extractor:
    """The extractor for a knowledge base's ``method``: "general" | "light" (LLM) or "nlp" (no LLM).
    Each is imported when first built, so a process loads only the extractors it uses."""
    if method == "nlp":
        from kbgraph.graph.extract.nlp.extractor import NLPExtractor
        return NLPExtractor(entity_types=list(entity_types))
    if method in ("general", "light"):
        if chat is None:
            raise LLMNotConfigured(
                f"extraction method {method!r} needs a chat model, and none is configured; configure one "
                "(KBGRAPH_LLM_BASE_URL and KBGRAPH_LLM_MODEL) or use the LLM-free method 'nlp'")
        from kbgraph.graph.extract.llm import LLMExtractor
        return LLMExtractor(chat, method=method, entity_types=list(entity_types), language=language,
                            max_gleanings=max_gleanings, glean_min_tokens=glean_min_tokens,
                            glean_policy=glean_policy, glean_missed_names=glean_missed_names, ledger=ledger)
    raise ValueError(f"unknown extraction method {method!r}; expected one of {', '.join(METHODS)}")
