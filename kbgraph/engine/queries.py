"""Retrieval in any mode over one or more knowledge bases, and a chat dialog bound to them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kbgraph.engine.core import EngineCore
from kbgraph.engine.errors import KBGraphError
from kbgraph.meta.schemas import KnowledgeBase

if TYPE_CHECKING:
    from kbgraph.chat import Dialog
    from kbgraph.search.retrieve import RetrievalResult


class Queries(EngineCore):
    """The retrieval part of ``Engine``."""

    def default_mode(self, kbs: Sequence[KnowledgeBase]) -> str:
        return "mix" if any(kb.graph.enabled for kb in kbs) else "naive"

    def query(self, kb_names: Sequence[str], question: str, *, mode: str | None = None,
              top_n: int | None = None) -> "RetrievalResult":
        """Retrieve for a question in any mode (default: mix when a KB has a graph, else naive)."""
        from kbgraph.graph.extract.nlp.extractor import NLPExtractor
        from kbgraph.search.retrieve import retrieve

        if not question.strip():
            raise KBGraphError("the question is empty")
        kbs = [self.kb(n) for n in kb_names]
        mode = mode or self.default_mode(kbs)
        if mode != "naive" and not any(kb.graph.enabled for kb in kbs):
            raise KBGraphError(f"mode {mode!r} needs a knowledge graph, and {', '.join(kb_names)} has none; "
                               "use --mode naive, or switch the graph on with `kbgraph kb set NAME --graph nlp`")
        embedder = self.embedder_for(kbs[0])
        mixed = sorted({kb.embedding_model for kb in kbs if self.embedder_for(kb) is not embedder})
        if mixed:
            raise KBGraphError(f"{', '.join(kb_names)} were indexed with different embedding models "
                               f"({embedder.model_name}, {', '.join(mixed)}) and cannot be searched together; "
                               "re-embed them with one model: `kbgraph kb reembed NAME`")
        entity_types = list(dict.fromkeys(t for kb in kbs for t in kb.graph.entity_types))
        return retrieve(self.store, self.tenant, [kb.id for kb in kbs], question, mode, embedder=embedder,
                        chat=self.chat_for(kbs[0]), settings=self.settings, top_n=top_n,
                        extractor=NLPExtractor(entity_types=entity_types), entity_types=entity_types)

    def dialog(self, kb_names: Sequence[str], *, mode: str | None = None, system_prompt: str = "",
               top_n: int | None = None) -> "Dialog":
        """A chat bound to these knowledge bases (raises LLMNotConfigured without a chat model)."""
        from kbgraph.chat import AssistantConfig, Dialog

        kbs = [self.kb(n) for n in kb_names]
        mode = mode or self.default_mode(kbs)
        config = AssistantConfig(system_prompt=system_prompt, empty_response=self.settings.empty_response,
                                 language=self.settings.language)
        return Dialog(lambda q: self.query(kb_names, q, mode=mode, top_n=top_n), self.chat_for(kbs[0]), config)
