"""Knowledge bases created, moved to another embedding model, and deleted."""

from __future__ import annotations

from kbgraph.engine.core import EngineCore
from kbgraph.engine.errors import KBGraphError
from kbgraph.engine.graph import check_graph_llm
from kbgraph.meta.schemas import GraphConfig, KnowledgeBase
from kbgraph.utils.progress import Progress, ProgressFn, no_progress


class KnowledgeBases(EngineCore):
    """The knowledge-base part of ``Engine`` (finding one by name is the core's: kbgraph/engine/core.py)."""

    def create_kb(self, name: str, *, graph: GraphConfig | None = None, description: str = "",
                  chunk_tokens: int | None = None, chunk_overlap: int | None = None,
                  llm: dict[str, str] | None = None, embedding_model: str = "") -> KnowledgeBase:
        """Create a knowledge base. ``llm`` overrides the chat settings for it (llm_model, llm_base_url,
        llm_api_key, llm_temperature...), e.g. a cheaper model for extraction. ``embedding_model``: the
        configured embedder (default), or ``model@provider``, an embedding model of the tenant's providers."""
        graph = graph or GraphConfig()
        llm = {k: v for k, v in (llm or {}).items() if v not in (None, "")}
        unknown = sorted(k for k in llm if not k.startswith("llm_") or not hasattr(self.settings, k))
        if unknown:
            raise KBGraphError(f"unknown LLM setting(s) for a knowledge base: {', '.join(unknown)}")
        check_graph_llm(self.settings, graph, llm)
        return self.meta.create_kb(
            self.tenant, name, description=description, embedding_model=self.embedding_choice(embedding_model),
            chunk_tokens=chunk_tokens or self.settings.chunk_tokens,
            chunk_overlap=chunk_overlap if chunk_overlap is not None else self.settings.chunk_overlap, graph=graph,
            extra={"llm": llm} if llm else None)

    def embedding_choice(self, name: str = "") -> str:
        """What a knowledge base records for the embedding model ``name``: "" is the configured one;
        ``model@provider`` one of the tenant's providers' embedding models (raises KBGraphError
        listing the choices for any other name)."""
        from kbgraph.engine.providers import embedding_choice

        default = self.embedder.model_name
        chosen = embedding_choice(self.meta, self.tenant, name, default) if name.strip() else default
        if chosen is None:
            offered = [f"{m}@{p.name}" for p in self.meta.list_providers(self.tenant) for m in p.embedding_models]
            raise KBGraphError(f"no embedding model {name!r} here: the choices are the server's {default!r}"
                               + (f" and your providers' {', '.join(offered)}" if offered else
                                  " (add a model provider with embedding models to have more)"))
        return chosen

    def reembed_kb(self, name: str, *, progress: ProgressFn = no_progress, force: bool = False,
                   model: str | None = None) -> int:
        """Move a knowledge base to an embedding model: ``model`` (see ``embedding_choice``), else the
        one it is on when that is one of the tenant's providers', else the configured one. Every vector
        is recomputed from the text it was made of (nothing is re-parsed or re-extracted). Returns the
        rows changed: none when the knowledge base is on that model already (its vectors would come
        out the same), unless ``force``."""
        from kbgraph.index.reembed import reembed_rows

        kb = self.kb(name)
        if model is not None:
            target = self.embedding_choice(model)
        else:
            target = kb.embedding_model if "@" in kb.embedding_model else self.embedder.model_name
        if kb.embedding_model == target and not force:
            return 0
        embedder = self.embedder_for(kb.model_copy(update={"embedding_model": target}))
        with self.kb_lock(kb.id):
            changed = reembed_rows(self.store, self.tenant, kb.id, embedder,
                                   lambda phase, done, total: progress(Progress(f"reembed {phase}", done, total)),
                                   relations_from_chunks=self.settings.relation_vectors_from_chunks,
                                   entities_from_chunk=self.settings.entity_vectors_from_chunk)
            self.meta.update_kb(self.tenant, kb.id, embedding_model=target)
        return changed

    def delete_kb(self, name: str) -> None:
        kb = self.kb(name)
        self.store.delete(self.tenant, [kb.id])
        self.meta.delete_kb(self.tenant, kb.id)
