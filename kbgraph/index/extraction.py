"""Entity and relation mentions extracted from chunks: a whole document's (stored, replacing its
earlier ones), one chunk's (for an indexing run, which stores them itself), or edited chunks'
(returned, written by the chunk edit under the knowledge base's lock).

A chunk whose extraction fails after the extractor's own retries is reported, and the others go on.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from kbgraph.graph.extract.base import ChunkExtraction, Extractor
from kbgraph.graph.extract.factory import build_extractor
from kbgraph.graph.extract.base import ExtractionError
from kbgraph.index.chunks import document_chunks
from kbgraph.index.context import WRITE_ROWS, KBContext, check_cancel, report_progress
from kbgraph.llm.base import CancelCheck, Cancelled, LLMError
from kbgraph.store.base import eq
from kbgraph.store.records import Chunk, EntityMention, RelationMention
from kbgraph.utils.gc_scope import bulk_gc
from kbgraph.utils.progress import ProgressFn, never, no_progress


@dataclass
class ExtractResult:
    chunks: int = 0
    failed_chunks: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    entity_mentions: int = 0
    relation_mentions: int = 0
    dropped_records: int = 0
    llm_calls: int = 0


def build_document_extractor(ctx: KBContext) -> Extractor:
    return build_extractor(ctx.graph.method, ctx.chat, list(ctx.graph.entity_types), language=ctx.settings.language,
                           max_gleanings=ctx.graph.max_gleanings, glean_min_tokens=ctx.settings.glean_min_tokens,
                           glean_policy=ctx.settings.glean_policy, glean_missed_names=ctx.settings.glean_missed_names,
                           ledger=ctx.ledger)


def extract_chunk(ctx: KBContext, extractor: Extractor, chunk: Chunk, cancel: CancelCheck = never
                  ) -> tuple[ChunkExtraction | None, str]:
    """One chunk's extraction, or None and why the extractor gave up on it (after its retries)."""
    check_cancel(cancel)
    try:
        return extractor.extract(chunk.content, cancel=cancel), ""
    except Cancelled:
        raise
    except (LLMError, ExtractionError) as exc:
        return None, str(exc)


@bulk_gc()
def extract_document(ctx: KBContext, doc_id: str, *, progress: ProgressFn = no_progress,
                     cancel: CancelCheck = never, extractor: Extractor | None = None) -> ExtractResult:
    """Extract entity and relation mentions from every chunk of a document and store them.

    The document's earlier mentions are replaced. A chunk whose extraction fails (after the
    extractor's own retries) is reported in ``failed_chunks`` and the others go on.
    """
    extractor = extractor or build_document_extractor(ctx)
    chunks = document_chunks(ctx, doc_id)
    result = ExtractResult(chunks=len(chunks))
    ctx.store.delete(ctx.tenant, [ctx.kb_id], [eq("doc_id", doc_id), eq("knowledge_graph_kwd", EntityMention.KIND)])
    ctx.store.delete(ctx.tenant, [ctx.kb_id], [eq("doc_id", doc_id), eq("knowledge_graph_kwd", RelationMention.KIND)])
    report_progress(ctx, progress, "extract", 0, len(chunks))

    def run(chunk: Chunk) -> tuple[Chunk, ChunkExtraction | None, str]:
        check_cancel(cancel)
        try:
            return chunk, extractor.extract(chunk.content, cancel=cancel), ""
        except Cancelled:
            raise
        except (LLMError, ExtractionError) as exc:  # the extractor gave up on this chunk
            return chunk, None, str(exc)

    workers = 1 if ctx.graph.method == "nlp" else max(1, ctx.settings.llm_concurrency)
    pending: list[dict] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for done, (chunk, extraction, error) in enumerate(pool.map(run, chunks), start=1):
            if extraction is None:
                result.failed_chunks.append(chunk.id)
                result.errors.append(error)
            else:
                result.llm_calls += extraction.llm_calls
                result.dropped_records += extraction.dropped
                entities, relations = extraction.to_mentions(ctx.kb_id, chunk.doc_id, chunk.id)
                pending += [m.to_doc() for m in entities] + [m.to_doc() for m in relations]
                result.entity_mentions += len(entities)
                result.relation_mentions += len(relations)
            if len(pending) >= WRITE_ROWS:
                ctx.store.upsert(ctx.tenant, ctx.kb_id, pending, refresh=False)
                pending = []
            report_progress(ctx, progress, "extract", done, len(chunks))
    if pending:
        ctx.store.upsert(ctx.tenant, ctx.kb_id, pending, refresh=False)
    ctx.store.refresh(ctx.tenant)
    return result


def extract_chunks(ctx: KBContext, chunks: Sequence[Chunk], extractor: Extractor | None = None,
                   cancel: CancelCheck = never) -> list[dict]:
    """The mention rows of these chunks (nothing is written). Runs before any write lock is taken:
    an LLM extraction may take seconds."""
    extractor = extractor or build_document_extractor(ctx)
    rows: list[dict] = []
    for chunk in chunks:
        check_cancel(cancel)
        extraction = extractor.extract(chunk.content, cancel=cancel)
        entities, relations = extraction.to_mentions(ctx.kb_id, chunk.doc_id, chunk.id)
        rows += [m.to_doc() for m in entities] + [m.to_doc() for m in relations]
    return rows
