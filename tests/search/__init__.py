"""Retrieval tests. ``toy_kb`` writes a tiny hand-made graph straight into a real SQLite store, so
scoring can be checked against numbers worked out by hand."""

from __future__ import annotations

from pathlib import Path

from kbgraph.llm.embedders import HashEmbedder
from kbgraph.parse.tokenize import token_string
from kbgraph.store.records import (
    Chunk,
    CommunityReport,
    Entity,
    Finding,
    GraphMeta,
    Relation,
    chunk_id,
)
from kbgraph.store.sqlite import SQLiteStore

TENANT, KB = "tenant1", "kb1"
EMBEDDER = HashEmbedder(64)

CHUNKS = {
    "mira": "Mira Castell founded the Lumen Cartographers Guild in the port city of Varrow.",
    "guild": "The Lumen Cartographers Guild chose a silver heron as its emblem.",
    "heron": "The silver heron is a wading bird of the Saltmere coast.",
    "salt": "The Salt War ended with a treaty signed on a barge.",
}
# key -> (name, type, description, chunk names)
ENTITIES = {
    "mira castell": ("Mira Castell", "person", "Founder of the guild", ["mira"]),
    "lumen cartographers guild": ("Lumen Cartographers Guild", "organization", "A guild of map makers",
                                  ["mira", "guild"]),
    "varrow": ("Varrow", "geo", "A port city", ["mira"]),
    "silver heron": ("silver heron", "category", "A bird, the guild's emblem", ["guild", "heron"]),
    "saltmere": ("Saltmere", "geo", "A sea coast", ["heron"]),
    "salt war": ("Salt War", "event", "A war over salt", ["salt"]),
}
# (src, tgt, weight, chunk names)
RELATIONS = [
    ("lumen cartographers guild", "mira castell", 2.0, ["mira"]),
    ("mira castell", "varrow", 1.0, ["mira"]),
    ("lumen cartographers guild", "silver heron", 1.0, ["guild"]),
    ("saltmere", "silver heron", 1.0, ["heron"]),
]


def cid(name: str) -> str:
    return chunk_id(f"doc-{name}", 0)


def toy_kb(path: Path, version: int = 1) -> SQLiteStore:
    store = SQLiteStore(path / "store.db")
    store.ensure_index(TENANT)
    docs = []
    for name, text in CHUNKS.items():
        docs.append(Chunk(id=cid(name), kb_id=KB, doc_id=f"doc-{name}", doc_name=f"{name}.md", content=text,
                          content_tokens=token_string(text), title_tokens=token_string(name), position=0, start=0,
                          end=len(text), token_count=len(text.split()),
                          vector=EMBEDDER.embed([text])[0].tolist()).to_doc())
    for key, (name, etype, desc, chunks) in ENTITIES.items():
        docs.append(Entity(kb_id=KB, key=key, name=name, type=etype, description=desc,
                           name_tokens=token_string(name), description_tokens=token_string(desc),
                           doc_ids=[f"doc-{c}" for c in chunks], chunk_ids=[cid(c) for c in chunks],
                           mention_count=len(chunks), pagerank=0.1 + 0.05 * len(chunks),
                           community_ids=["L0-a"] if key != "salt war" else ["L0-b"],
                           vector=EMBEDDER.embed([f"{name} ({etype}): {desc}"])[0].tolist()).to_doc())
    for src, tgt, weight, chunks in RELATIONS:
        names = {k: v[0] for k, v in ENTITIES.items()}
        desc = f"{names[src]} is related to {names[tgt]}"
        docs.append(Relation(kb_id=KB, src_key=src, tgt_key=tgt, src_name=names[src], tgt_name=names[tgt],
                             description=desc, description_tokens=token_string(desc), weight=weight,
                             doc_ids=[f"doc-{c}" for c in chunks], chunk_ids=[cid(c) for c in chunks],
                             mention_count=len(chunks), vector=EMBEDDER.embed([desc])[0].tolist()).to_doc())
    for label, members, title, summary, rating in [
        ("L0-a", [k for k in ENTITIES if k != "salt war"], "The Lumen guild and its heron",
         "Mira Castell founded the Lumen Cartographers Guild, whose emblem is the silver heron.", 7.0),
        ("L0-b", ["salt war"], "The Salt War", "The Salt War was fought over salt and ended by a treaty.", 4.0),
    ]:
        docs.append(CommunityReport(kb_id=KB, level=0, community=label, member_keys=members, title=title,
                                    summary=summary, findings=[Finding("Key fact", summary)], rating=rating,
                                    rating_explanation="", graph_version=version,
                                    content_tokens=token_string(f"{title} {summary}"),
                                    vector=EMBEDDER.embed([f"{title}\n{summary}"])[0].tolist()).to_doc())
    docs.append(GraphMeta(kb_id=KB, version=version).to_doc())
    store.upsert(TENANT, KB, docs)
    return store
