"""Query latency of `kg` and `ppr` retrieval on a large synthetic knowledge base (issue 6).

Builds, once, a knowledge base of 100k entities and 300k relations on the embedded SQLite store,
written straight through the DocStore (no extraction): relations grow by preferential attachment
(each new entity links to ``--links`` earlier ones chosen in proportion to their degree, so a few
hubs gather thousands of relations and most entities a handful), entities and relations carry
names, descriptions, token fields and hash-embedder vectors (dim 384), PageRank is computed over
the graph, and chunks cite the entities they mention. The store is kept in ``--data-dir`` and
reused by later runs. Then ~200 questions naming existing entities are retrieved in each mode
without an LLM (hash embedder, `nlp` query analysis), after a warm-up, and p50/p99 are printed.
Each mode asks questions of its own, none asked before in the process: a question asked again
finds the relations and rows it read still cached (kg ran 27% faster on questions asked once
before in mix), so modes timed on the same questions were not comparable.

    python bench/query_latency.py --data-dir /tmp/kbgraph-qlat          # build (first run) + measure
    python bench/query_latency.py --data-dir /tmp/kbgraph-qlat --entities 20000 --relations 60000

Target on the 2-core development machine (issue 41): p50 <= 20 ms, p99 <= 100 ms for both modes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from kbgraph.engine import Engine
from kbgraph.config import load_settings
from kbgraph.meta.schemas import DEFAULT_TENANT, GraphConfig
from kbgraph.graph.derive.vectors import entity_text, relation_text
from kbgraph.graph.extract.nlp.extractor import NLPExtractor
from kbgraph.graph.pagerank import weighted_pagerank
from kbgraph.llm.embedders import HashEmbedder
from kbgraph.parse.tokenize import token_string
from kbgraph.search.ppr_graph import entity_graph
from kbgraph.search.retrieve import retrieve
from kbgraph.store.records import Chunk, Entity, GraphMeta, Relation, chunk_id
from kbgraph.store.sqlite import SQLiteStore

TENANT = DEFAULT_TENANT
KB_NAME = "synthetic"
DIM = 384
TYPES = ["person", "organization", "geo", "event", "category"]
_SYLLABLES = ["ka", "lo", "mi", "ren", "tor", "sa", "vel", "dun", "ar", "is", "mon", "bel", "cor", "fen", "gal",
              "hal", "jor", "kes", "lin", "mar", "nor", "ost", "pel", "quin", "ros", "tal", "ur", "vin", "wen", "zar"]
_WORDS = ("guild harbor treaty council archive river tower fleet market scholar merchant captain library "
          "festival storm bridge academy charter alliance debt lantern map observatory flood salt garden "
          "rebellion order ledger canal forge mill temple court").split()


def entity_names(n: int, rng: random.Random) -> list[str]:
    names: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        first = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        last = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        name = f"{first} {last}"
        if name not in names:
            names.add(name)
            out.append(name)
    return out


def preferential_edges(n: int, m: int, links: int, rng: random.Random) -> list[tuple[int, int]]:
    """~m undirected edges over n nodes by preferential attachment (Barabási-Albert style)."""
    targets: list[int] = list(range(links))  # one entry per edge end: sampling it is degree-proportional
    edges: set[tuple[int, int]] = set()
    for node in range(links, n):
        for _ in range(links):
            other = rng.choice(targets) if rng.random() < 0.9 else rng.randrange(node)
            if other != node:
                pair = (min(node, other), max(node, other))
                if pair not in edges:
                    edges.add(pair)
                    targets += [node, other]
        if len(edges) >= m:
            break
    while len(edges) < m:  # top up with random pairs when attachment fell short
        a, b = rng.randrange(n), rng.randrange(n)
        if a != b:
            edges.add((min(a, b), max(a, b)))
    return sorted(edges)[:m] if len(edges) > m else sorted(edges)


def build(store: SQLiteStore, kb: str, n_entities: int, n_relations: int, n_chunks: int, seed: int) -> dict:
    rng = random.Random(seed)
    # the hash embedder the queries use, a batch at a time (it keeps each word's features once)
    embedder = HashEmbedder(DIM)
    started = time.perf_counter()
    names = entity_names(n_entities, rng)
    keys = [n.lower() for n in names]
    types = [TYPES[min(len(TYPES) - 1, int(rng.expovariate(1.0)))] for _ in names]
    edges = preferential_edges(n_entities, n_relations, max(1, round(n_relations / n_entities)), rng)
    ranks = weighted_pagerank([(keys[a], keys[b], 1.0) for a, b in edges], keys)

    # chunks: each mentions a few entities, hubs more often (drawn from the edge ends)
    ends = [x for e in edges for x in e]
    mentions: dict[int, list[str]] = {}
    chunks: list[Chunk] = []
    for pos in range(n_chunks):
        members = sorted({rng.choice(ends) for _ in range(4)} | {rng.randrange(n_entities)})
        cid = chunk_id("doc-synthetic", pos)
        for i in members:
            mentions.setdefault(i, []).append(cid)
        text = " ".join(f"{names[i]} met the {rng.choice(_WORDS)} of {names[j]} near the {rng.choice(_WORDS)}."
                        for i, j in zip(members, members[1:] + members[:1]))
        chunks.append(Chunk(id=cid, kb_id=kb, doc_id="doc-synthetic", doc_name="synthetic.txt", content=text,
                            content_tokens=token_string(text), title_tokens="synthetic", position=pos,
                            start=0, end=len(text), token_count=len(text) // 4, page=0,
                            vector=None, created=0.0))
    for start in range(0, n_chunks, 5000):
        batch = chunks[start:start + 5000]
        for chunk, vector in zip(batch, embedder.embed([c.content for c in batch])):
            chunk.vector = vector.tolist()
    degree = [0] * n_entities
    for a, b in edges:
        degree[a] += 1
        degree[b] += 1

    def entity(i: int) -> Entity:
        words = " ".join(rng.sample(_WORDS, 3))
        desc = f"{names[i]} is a {types[i]} known for the {words}; linked to {degree[i]} others."
        cited = mentions.get(i) or [chunks[i % n_chunks].id]
        e = Entity(kb_id=kb, key=keys[i], name=names[i], type=types[i], description=desc,
                   name_tokens=token_string(names[i]), description_tokens=token_string(desc), aliases=[],
                   doc_ids=["doc-synthetic"], chunk_ids=sorted(cited)[:50], mention_count=len(cited),
                   pagerank=round(float(ranks.get(keys[i], 0.0)), 9), community_ids=[])
        return e

    def relation(a: int, b: int) -> Relation:
        word = rng.choice(_WORDS)
        desc = f"{names[a]} and {names[b]} share the {word}."
        cited = sorted(set(mentions.get(a, [])[:2] + mentions.get(b, [])[:2])) or [chunks[a % n_chunks].id]
        r = Relation(kb_id=kb, src_key=keys[a], tgt_key=keys[b], src_name=names[a], tgt_name=names[b],
                     description=desc, description_tokens=token_string(" ".join([names[a], names[b], desc, word])),
                     keywords=[word], weight=float(1 + rng.randrange(5)), doc_ids=["doc-synthetic"],
                     chunk_ids=cited, mention_count=1)
        return r

    def embedded(rows: list, text_of) -> list[dict]:
        for row, vector in zip(rows, embedder.embed([text_of(row) for row in rows])):
            row.vector = vector.tolist()
        return [row.to_doc() for row in rows]

    def write(docs: list[dict]) -> None:
        store.upsert(TENANT, kb, docs, refresh=False)

    for start in range(0, n_chunks, 5000):
        write([c.to_doc() for c in chunks[start:start + 5000]])
    for start in range(0, n_entities, 5000):
        write(embedded([entity(i) for i in range(start, min(n_entities, start + 5000))], entity_text))
        print(f"[build] entities {min(n_entities, start + 5000)}/{n_entities}", file=sys.stderr)
    for start in range(0, len(edges), 10000):
        write(embedded([relation(a, b) for a, b in edges[start:start + 10000]], relation_text))
        print(f"[build] relations {min(len(edges), start + 10000)}/{len(edges)}", file=sys.stderr)
    meta = GraphMeta(kb_id=kb, version=1, entity_count=n_entities, relation_count=len(edges))
    meta.phase_versions["pagerank"], meta.phase_status["pagerank"] = 1, "done"
    write([meta.to_doc()])
    info = {"entities": n_entities, "relations": len(edges), "chunks": n_chunks, "seed": seed,
            "max_degree": max(degree), "median_degree": statistics.median(degree),
            "build_s": round(time.perf_counter() - started, 1), "names_sample": names[:5]}
    return info


def questions(store: SQLiteStore, kb: str, n: int, seed: int) -> list[str]:
    """``n`` distinct questions naming existing entities: hubs and ordinary ones, one or two per
    question (fewer when the graph is too small to word that many)."""
    from kbgraph.store.base import eq

    rows = [(d["name_kwd"], d.get("pagerank_flt", 0.0)) for d in
            store.scan(TENANT, [kb], [eq("knowledge_graph_kwd", Entity.KIND)], fields=["name_kwd", "pagerank_flt"])]
    rows.sort(key=lambda r: -r[1])
    hubs = [r[0] for r in rows[:200]]
    everyone = [r[0] for r in rows]
    rng = random.Random(seed)
    templates = ["Who is {a}?", "What is the relationship between {a} and {b}?", "How is {a} connected to {b}?",
                 "What does {a} know about the {w}?", "Which organization is {a} part of?",
                 "Tell me about {a} and the {w}."]
    out: dict[str, None] = {}  # each question once: one asked again finds what it read still cached
    for i in range(50 * n):
        if len(out) == n:
            break
        a = rng.choice(hubs) if len(out) % 4 == 0 else rng.choice(everyone)
        b = rng.choice(everyone)
        out.setdefault(rng.choice(templates).format(a=a, b=b, w=rng.choice(_WORDS)))
    return list(out)


STEP_REPEATS = 30


def walk_step_ms(store: SQLiteStore, kb_id: str) -> float:
    """The fastest of ``STEP_REPEATS`` whole-graph steps of the ppr walk (a memory-bound sparse product
    that no query-path change touches): a reference for this machine's speed at the time of the run.
    On the 2-core development machine it took 0.64-0.69 ms one day and 1.37 ms another on the same
    130k-node graph, and the query p50s moved with it (bench/README.md)."""
    graph = entity_graph(store, TENANT, [kb_id]).graph
    scores = np.full(graph.size, 1.0 / max(graph.size, 1), dtype=graph.matrix.dtype)
    graph.step(scores)  # the first step makes the plan
    times = []
    for _ in range(STEP_REPEATS):
        started = time.perf_counter()
        graph.step(scores)
        times.append(time.perf_counter() - started)
    return round(min(times) * 1000, 3)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, required=True, help="where the synthetic store is kept between runs")
    ap.add_argument("--entities", type=int, default=100_000)
    ap.add_argument("--relations", type=int, default=300_000)
    ap.add_argument("--chunks", type=int, default=30_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--modes", default="kg,ppr")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args(argv)

    tag = f"e{a.entities}-r{a.relations}-c{a.chunks}-s{a.seed}"
    data_dir = a.data_dir / tag
    info_path = data_dir / "synthetic.json"
    # a knowledge base of an ordinary data dir, so `KBGRAPH_DATA_DIR=<it> kbgraph query ... --kb synthetic`
    # times a cold query on it too (its vectors are hash-384, which the KB records as its model)
    settings = load_settings(data_dir=data_dir, embedding_provider="hash", embedding_dim=DIM)
    if a.rebuild or not info_path.exists():
        shutil.rmtree(data_dir, ignore_errors=True)
        with Engine.open(settings) as engine:
            kb = engine.create_kb(KB_NAME, graph=GraphConfig(enabled=True, method="nlp", entity_types=TYPES))
            info = build(engine.store, kb.id, a.entities, a.relations, a.chunks, a.seed)
        info_path.write_text(json.dumps(info, indent=1))
    info = json.loads(info_path.read_text())
    path = settings.sqlite_store_path
    print(f"[kb] {info['entities']} entities, {info['relations']} relations, {info['chunks']} chunks; "
          f"max degree {info['max_degree']}, median {info['median_degree']}; built in {info['build_s']} s; "
          f"KBGRAPH_DATA_DIR={data_dir} (knowledge base {KB_NAME!r})")
    with Engine.open(settings) as engine:
        kb_id = engine.kb(KB_NAME).id

    store = SQLiteStore(path)
    embedder = HashEmbedder(DIM)
    extractor = NLPExtractor(entity_types=TYPES)
    modes = a.modes.split(",")
    # each mode asks questions of its own: one asked before in the process finds the graph caches
    # (relations touching its entities, postings, token caches) filled, and a mode measured after
    # another on the same questions looked a fifth faster than the same mode measured first
    per_mode = a.queries + a.warmup
    pool = questions(store, kb_id, per_mode * len(modes), a.seed)
    if len(pool) < per_mode * len(modes):
        print(f"error: the graph words only {len(pool)} distinct questions, {per_mode * len(modes)} wanted "
              f"({per_mode} per mode); ask for fewer --queries or build a larger graph", file=sys.stderr)
        return 2
    figures: dict[str, dict] = {"kb": info, "machine": {"walk_step_ms": walk_step_ms(store, kb_id)}}
    print(f"[machine] one step of the ppr walk over this graph: {figures['machine']['walk_step_ms']} ms (min of "
          f"{STEP_REPEATS}): compare p50s taken on different days through it, not as they are")
    asked: set[str] = set()
    for number, mode in enumerate(modes):
        qs = pool[number * per_mode:(number + 1) * per_mode]

        def run(question: str) -> float:
            t = time.perf_counter()
            result = retrieve(store, TENANT, [kb_id], question, mode, embedder=embedder, chat=None, settings=settings,
                              extractor=extractor, entity_types=TYPES)
            elapsed = time.perf_counter() - t
            if not (result.entities or result.chunks):
                empty.append(question)
            return elapsed

        empty: list[str] = []
        asked_before = len(asked.intersection(qs))
        asked.update(qs)
        cold = run(qs[0])
        for q in qs[1:a.warmup]:
            run(q)
        times = [run(q) * 1000 for q in qs[a.warmup:]]
        figures[mode] = {"first_query_ms": round(cold * 1000, 1), "p50_ms": round(pct(times, 0.5), 1),
                         "p90_ms": round(pct(times, 0.9), 1), "p99_ms": round(pct(times, 0.99), 1),
                         "max_ms": round(max(times), 1), "mean_ms": round(statistics.fmean(times), 1),
                         "queries": len(times), "empty_results": len(empty),
                         "asked_before": asked_before}
        f = figures[mode]
        print(f"[{mode}] p50 {f['p50_ms']} ms  p90 {f['p90_ms']} ms  p99 {f['p99_ms']} ms  max {f['max_ms']} ms  "
              f"(first query {f['first_query_ms']} ms, {f['queries']} queries after {a.warmup} warm-up, "
              f"{f['empty_results']} empty)")
    store.close()
    if a.json:
        a.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
