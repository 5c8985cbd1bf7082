"""What every indexing step knows of one knowledge base (``KBContext``), and the two things every
step does between units of work: report progress and honour a cancel request.

Kept apart from the steps so that each step's module depends on this one only, not on the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kbgraph.config import Settings
from kbgraph.graph.describe import Describer
from kbgraph.llm.base import CancelCheck, Cancelled, ChatModel, Embedder, UsageLedger
from kbgraph.meta.schemas import GraphConfig
from kbgraph.store.base import DocStore, vector_field
from kbgraph.utils.progress import Progress, ProgressFn

# rows gathered before one store write: each write is a transaction, whose commit rewrites every
# index page it touched, so fewer and larger ones write less (a few MB of documents at most)
WRITE_ROWS = 2048


@dataclass
class KBContext:
    """What every step needs to know about one knowledge base."""

    store: DocStore
    tenant: str
    kb_id: str
    settings: Settings
    embedder: Embedder
    chat: ChatModel | None = None
    graph: GraphConfig = field(default_factory=GraphConfig)
    chunk_tokens: int = 512
    chunk_overlap: int = 64
    ledger: UsageLedger = field(default_factory=UsageLedger)
    # merges leave descriptions over the budget to the refresh's summary pass (a run of many
    # documents: one summary per entity per run); False: merges summarize them at once (a worker's
    # single document, whose graph should be final when its task ends)
    defer_summaries: bool = True

    def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One float32 vector per text, as rows of one array: the stores take arrays as they take
        lists, and a round trip through Python floats would cost ~0.1 s per 3k vectors."""
        if not texts:
            return []
        vectors = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        return list(vectors)

    @property
    def vector_name(self) -> str:
        return vector_field(self.embedder.dim)

    def describer(self) -> Describer:
        """Descriptions as the graph holds them once the summary pass has run (what a rebuild gives)."""
        return Describer(self.chat, self.settings.summary_max_tokens, self.settings.language,
                         concurrency=self.settings.llm_concurrency, prompt_tokens=self.settings.summary_prompt_tokens)

    def merge_describer(self) -> Describer:
        """Descriptions as merges write them: over the budget, a stand-in left for the summary pass."""
        if not self.defer_summaries:
            return self.describer()
        return Describer(self.chat, self.settings.summary_max_tokens, self.settings.language,
                         prompt_tokens=self.settings.summary_prompt_tokens, deferred=True)


def report_progress(ctx: KBContext, progress: ProgressFn, phase: str, done: int, total: int, message: str = "") -> None:
    chat = [u for name, u in ctx.ledger.by_phase.items() if name != "embed"]
    progress(Progress(phase, done, total, message, llm_calls=sum(u.calls for u in chat),
                      tokens=sum(u.prompt_tokens + u.completion_tokens for u in chat)))


def check_cancel(cancel: CancelCheck) -> None:
    if cancel():
        raise Cancelled("cancelled by request")
