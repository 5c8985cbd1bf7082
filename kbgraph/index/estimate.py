"""What an indexing run will roughly cost, before it starts (for a warning on long work): chunks,
LLM calls and seconds, from the files' sizes and the knowledge base's settings."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kbgraph.index.context import KBContext


@dataclass
class RunEstimate:
    """What an indexing run will roughly cost, before it starts (for a warning on long work)."""

    documents: int
    bytes: int
    chunks: int
    llm_calls: int
    seconds: float


# rough figures for the estimate, measured on one core (bench/README.md, "A 50 MB text file" and
# "1,890 MuSiQue files"): a token is ~4 bytes of text; offline work (parsing, nlp extraction, merges,
# the store) takes ~15 us per token and ~7 ms per document with a graph, ~3 us per token without;
# the local embedder ~0.4 ms of one of its threads per token it embeds (chunks overlap: a little
# more than the text's; 0.28-0.36 ms measured, rounded up so the warning errs long) and, with a
# graph, ~0.15 s per document for the entities' vectors when they embed their text (~0.05 s when
# single-chunk entities embed their name only, ``entity_vectors``) and ~0.28 s for the relations'
# when they embed their text (``relation_vectors``; from their chunks: nothing);
# a hosted model answers in ~2 s
_BYTES_PER_TOKEN = 4
_GRAPH_SECONDS_PER_TOKEN = 15e-6
_GRAPH_SECONDS_PER_DOCUMENT = 0.007
_PARSE_SECONDS_PER_TOKEN = 3e-6
_LOCAL_EMBED_SECONDS_PER_TOKEN = 0.4e-3
_LOCAL_ENTITY_EMBED_SECONDS_PER_DOCUMENT = 0.15
_LOCAL_ENTITY_FROM_CHUNK_SECONDS_PER_DOCUMENT = 0.05
_LOCAL_RELATION_EMBED_SECONDS_PER_DOCUMENT = 0.28
_MODEL_SECONDS_PER_CALL = 2.0


def estimate_run(ctx: KBContext, sizes: Iterable[int]) -> RunEstimate:
    """Chunks, LLM calls and seconds a run over files of these sizes will take, roughly: chunk
    count from the bytes; the offline work and the local embedder's from the tokens and documents;
    two calls per chunk with gleaning, one report call per ~4 chunks, at a hosted model's ~2 s per
    call with ``llm_concurrency`` in flight."""
    files = list(sizes)
    sizes = [size for size in files if size]
    total = sum(sizes)
    tokens = total / _BYTES_PER_TOKEN
    step = max(1, ctx.chunk_tokens - ctx.chunk_overlap)
    chunks = sum(max(1, -(-size // _BYTES_PER_TOKEN) // step + 1) for size in sizes)
    graph = ctx.graph.enabled
    if graph:
        seconds = tokens * _GRAPH_SECONDS_PER_TOKEN + len(sizes) * _GRAPH_SECONDS_PER_DOCUMENT
    else:
        seconds = tokens * _PARSE_SECONDS_PER_TOKEN
    if ctx.settings.embedding_provider == "local":
        embedded = tokens * ctx.chunk_tokens / step
        per_document = (
            _LOCAL_ENTITY_FROM_CHUNK_SECONDS_PER_DOCUMENT if ctx.settings.entity_vectors_from_chunk
            else _LOCAL_ENTITY_EMBED_SECONDS_PER_DOCUMENT) + (
            0.0 if ctx.settings.relation_vectors_from_chunks else _LOCAL_RELATION_EMBED_SECONDS_PER_DOCUMENT)
        rows = len(sizes) * per_document if graph else 0.0
        seconds += (embedded * _LOCAL_EMBED_SECONDS_PER_TOKEN + rows) / ctx.settings.local_embedding_threads
    calls = 0
    if graph and ctx.graph.method != "nlp":
        per_chunk = 1 + (ctx.graph.max_gleanings if ctx.chunk_tokens >= ctx.settings.glean_min_tokens else 0)
        calls = chunks * per_chunk + chunks // 4
        seconds += calls * _MODEL_SECONDS_PER_CALL / max(1, ctx.settings.llm_concurrency)
    return RunEstimate(len(files), total, chunks, calls, seconds)
