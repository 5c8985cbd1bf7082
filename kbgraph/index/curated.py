"""Curated knowledge as its own source: entities and relations added by hand or imported
(kbgraph.graph.curated) become mentions of a curated pseudo-document, each with a chunk of its own
text (named "curated: <source>", embedded and searchable like a document's), so retrieval finds,
ranks and cites them exactly as it does extracted knowledge. Documents coming and going never touch
them (their document id is no document's); a source is removed as a whole by its document id, one
added row by its chunk id.
"""

from __future__ import annotations

from collections.abc import Sequence

from kbgraph.graph.curated import CuratedEntity, CuratedGraph, CuratedRelation
from kbgraph.graph.derive.aliases import load_aliases
from kbgraph.graph.derive.corrections import curated_doc_id
from kbgraph.graph.derive.mentions import touched_keys
from kbgraph.graph.derive.recompute import DeriveResult, recompute
from kbgraph.graph.keys import normalize_key
from kbgraph.index.context import KBContext
from kbgraph.index.corrections import list_corrections
from kbgraph.index.graph_meta import bump_version, ensure_mention_format
from kbgraph.parse.token_count import count_tokens
from kbgraph.parse.tokenize import token_string
from kbgraph.store.base import Condition, any_of, eq
from kbgraph.store.records import Chunk, EntityMention, RelationMention, stable_id

MANUAL_SOURCE = "by hand"
# chunks embedded per call when a curated graph is imported
_EMBED_BATCH = 256


def source_name(doc_name: str) -> str:
    return f"curated: {doc_name}"


def _entity_text(e: CuratedEntity) -> str:
    return f"{e.name} ({e.type}): {e.description}".rstrip(": ") if e.description else f"{e.name} ({e.type})"


def _relation_text(r: CuratedRelation) -> str:
    text = f"{r.src} -- {r.tgt}" + (f": {r.description}" if r.description else "")
    return text + (f" ({', '.join(r.keywords)})" if r.keywords else "")


def curated_rows(kb_id: str, source: str, graph: CuratedGraph, tag: str = "") -> tuple[list[Chunk], list[dict]]:
    """The chunks (without vectors) and mention rows of a curated graph from ``source``; ``tag``
    tells rows added by hand apart (each addition its own chunk)."""
    doc_id, doc_name = curated_doc_id(kb_id, source), source_name(source)
    chunks: list[Chunk] = []
    mentions: list[dict] = []
    named = {normalize_key(e.name) for e in graph.entities}

    def chunk(kind: str, ident: str, text: str) -> str:
        cid = stable_id(doc_id, tag, kind, ident)
        chunks.append(Chunk(id=cid, kb_id=kb_id, doc_id=doc_id, doc_name=doc_name, content=text,
                            content_tokens=token_string(text), title_tokens=token_string(doc_name),
                            position=len(chunks), start=0, end=len(text), token_count=count_tokens(text)))
        return cid

    for e in graph.entities:
        key = normalize_key(e.name)
        cid = chunk("entity", key, _entity_text(e))
        mentions.append(EntityMention(kb_id, doc_id, cid, key, e.name, e.type, e.description).to_doc())
    for r in graph.relations:
        src, tgt = normalize_key(r.src), normalize_key(r.tgt)
        cid = chunk("relation", f"{min(src, tgt)}\n{max(src, tgt)}", _relation_text(r))
        mentions.append(RelationMention(kb_id, doc_id, cid, src, tgt, r.description, list(r.keywords),
                                        r.weight).to_doc())
        # an end the source does not list is an entity of it all the same, found in this relation
        for name, key in ((r.src, src), (r.tgt, tgt)):
            if key not in named:
                mentions.append(EntityMention(kb_id, doc_id, cid, key, name, "unknown", "").to_doc())
    return chunks, mentions


def write_curated(ctx: KBContext, source: str, graph: CuratedGraph, tag: str = "") -> DeriveResult:
    """Store a curated graph's chunks (embedded) and mentions, and derive the rows they touch."""
    chunks, mentions = curated_rows(ctx.kb_id, source, graph, tag)
    for start in range(0, len(chunks), _EMBED_BATCH):
        batch = chunks[start:start + _EMBED_BATCH]
        for c, vector in zip(batch, ctx.embed([c.content for c in batch])):
            c.vector = vector
    with ctx.store.batch():
        ensure_mention_format(ctx)
        ctx.store.upsert(ctx.tenant, ctx.kb_id, [c.to_doc() for c in chunks] + mentions, refresh=False)
        keys = {m["entity_key_kwd"] for m in mentions if "entity_key_kwd" in m}
        pairs = {(m["src_key_kwd"], m["tgt_key_kwd"]) for m in mentions if "src_key_kwd" in m}
        change = _rederive(ctx, keys, pairs)
    ctx.store.refresh(ctx.tenant)
    return change


def remove_curated(ctx: KBContext, where: Sequence[Condition]) -> DeriveResult:
    """Remove the curated chunks and mentions matching ``where`` and re-derive what they touched."""
    with ctx.store.batch():
        ensure_mention_format(ctx)
        keys, pairs = touched_keys(ctx.store, ctx.tenant, ctx.kb_id, where)
        ctx.store.delete(ctx.tenant, [ctx.kb_id], list(where), refresh=False)
        change = _rederive(ctx, keys, pairs)
    ctx.store.refresh(ctx.tenant)
    return change


def remove_source(ctx: KBContext, source: str) -> DeriveResult:
    return remove_curated(ctx, [eq("doc_id", curated_doc_id(ctx.kb_id, source))])


def remove_added(ctx: KBContext, graph: CuratedGraph, tag: str) -> DeriveResult:
    """Remove what one addition by hand (``tag``) wrote: its chunks and their mentions."""
    chunks, _ = curated_rows(ctx.kb_id, MANUAL_SOURCE, graph, tag)
    ids = [c.id for c in chunks]
    change = remove_curated(ctx, [any_of("chunk_id_kwd", ids)])
    ctx.store.delete(ctx.tenant, [ctx.kb_id], [any_of("id", ids)])
    return change


def curated_keys(ctx: KBContext, sources: Sequence[str]) -> tuple[set[str], set[tuple[str, str]]]:
    """The entity keys and pairs of the mentions of these curated sources."""
    docs = sorted({curated_doc_id(ctx.kb_id, s) for s in sources})
    return touched_keys(ctx.store, ctx.tenant, ctx.kb_id, [any_of("doc_id", docs)]) if docs else (set(), set())


def live_sources(ctx: KBContext) -> list[str]:
    """The curated sources the knowledge base's live corrections wrote mentions for."""
    live = [c for c in list_corrections(ctx) if not c.undone]
    sources = {c.params["source"] for c in live if c.op == "import"}
    if any(c.op in ("add_entity", "add_relation") for c in live):
        sources.add(MANUAL_SOURCE)
    return sorted(sources)


def rederive_curated(ctx: KBContext, sources: Sequence[str]) -> DeriveResult:
    """Derive the rows of these curated sources' mentions again (after the graph was dropped for a
    rebuild: its curated mentions stay)."""
    keys, pairs = curated_keys(ctx, sources)
    if not keys and not pairs:
        return DeriveResult()
    return _rederive(ctx, keys, pairs)


def _rederive(ctx: KBContext, keys: set[str], pairs: set[tuple[str, str]]) -> DeriveResult:
    change = recompute(ctx.store, ctx.tenant, ctx.kb_id, keys, pairs, ctx.merge_describer(), None,
                       load_aliases(ctx.store, ctx.tenant, ctx.kb_id), ctx.vector_name)
    bump_version(ctx, change)
    return change
