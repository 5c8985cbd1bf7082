"""How fast the graph view opens on a big knowledge base (the server's part).

    python bench/graph_view_bench.py [--entities 100000] [--relations 300000] [--path DIR]

Builds a synthetic graph in the embedded SQLite store (entities with power-law PageRank, a type
and a community each; relations among them; graph meta; one level-0 report per community), then
times what the page asks for: the opening sample (top 300 entities by PageRank and the relations
among them), a bigger sample, a type filter, a community filter, one node's neighbours, name
suggestions and one entity's details. ``--path`` keeps the store to rerun the timings.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kbgraph.graph import view
from kbgraph.parse.tokenize import token_string
from kbgraph.store.base import SearchRequest, eq
from kbgraph.store.records import CommunityReport, Entity, GraphMeta, Relation
from kbgraph.store.sqlite import SQLiteStore

TENANT, KB = "bench", "kbview"
TYPES = ["person", "organization", "geo", "event", "category"]
rng = np.random.default_rng(11)


def build(store: SQLiteStore, n_ent: int, n_rel: int, n_comm: int) -> None:
    ranks = 1.0 / np.arange(1, n_ent + 1) ** 0.9
    ranks /= ranks.sum()
    community = rng.integers(0, n_comm, n_ent)
    started = time.perf_counter()
    batch = []
    for i in range(n_ent):
        name = f"Entity {i} {['North', 'South', 'East', 'West'][i % 4]}"
        batch.append(Entity(kb_id=KB, key=f"entity {i}", name=name, type=TYPES[i % len(TYPES)],
                            description=f"Description of {name}.", name_tokens=token_string(name),
                            description_tokens=token_string(f"description of {name}"), doc_ids=["d0"],
                            chunk_ids=[f"c{i % 1000}"], mention_count=1 + i % 7, pagerank=float(ranks[i]),
                            community_ids=[f"c0-{community[i]}"]).to_doc())
        if len(batch) == 5000:
            store.upsert(TENANT, KB, batch, refresh=False)
            batch = []
    store.upsert(TENANT, KB, batch, refresh=False)
    # preferential attachment: relations mostly touch the high-PageRank entities
    src = np.minimum((rng.pareto(1.2, n_rel) * 50).astype(int), n_ent - 1)
    tgt = rng.integers(0, n_ent, n_rel)
    seen, batch = set(), []
    for a, b in zip(src.tolist(), tgt.tolist()):
        if a == b:
            continue
        low, high = sorted((f"entity {a}", f"entity {b}"))
        if (low, high) in seen:
            continue
        seen.add((low, high))
        batch.append(Relation(kb_id=KB, src_key=low, tgt_key=high, src_name=low, tgt_name=high, description="r",
                              description_tokens="r", weight=float(1 + rng.integers(0, 9)), doc_ids=["d0"],
                              mention_count=1).to_doc())
        if len(batch) == 10000:
            store.upsert(TENANT, KB, batch, refresh=False)
            batch = []
    store.upsert(TENANT, KB, batch, refresh=True)
    print(f"built {n_ent} entities, {len(seen)} relations in {time.perf_counter() - started:.0f} s")


def build_reports(store: SQLiteStore, n_comm: int) -> None:
    members: dict[int, list[str]] = {}
    for doc in store.scan(TENANT, [KB], [eq("knowledge_graph_kwd", Entity.KIND)], fields=["entity_key_kwd",
                                                                                         "community_ids_kwd"]):
        members.setdefault(int(doc["community_ids_kwd"][0].split("-")[1]), []).append(doc["entity_key_kwd"])
    reports = [CommunityReport(kb_id=KB, level=0, community=f"c0-{c}", member_keys=members.get(c, []), title=f"Community {c}",
                               summary="s", findings=[], rating=5.0, rating_explanation="", graph_version=1).to_doc()
               for c in range(n_comm)]
    store.upsert(TENANT, KB, reports, refresh=False)
    entities = store.count(TENANT, [KB], [eq("knowledge_graph_kwd", Entity.KIND)])
    relations = store.count(TENANT, [KB], [eq("knowledge_graph_kwd", Relation.KIND)])
    store.upsert(TENANT, KB, [GraphMeta(kb_id=KB, version=1, entity_count=entities, relation_count=relations,
                                        report_count=n_comm).to_doc()], refresh=True)


def timed(name: str, fn: Callable[[], object], runs: int = 7) -> None:
    fn()  # a first call warms the store's caches, as an open server's are
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t) * 1000)
    size = ""
    if isinstance(out, view.GraphSample):
        size = f" ({len(out.nodes)} nodes, {len(out.edges)} edges)"
    print(f"{name}: median {statistics.median(times):.0f} ms, max {max(times):.0f} ms{size}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--relations", type=int, default=300_000)
    parser.add_argument("--communities", type=int, default=2_000)
    parser.add_argument("--path", type=Path, default=None)
    args = parser.parse_args()
    path = (args.path or Path(tempfile.mkdtemp())) / "store.db"
    fresh = not path.exists()
    store = SQLiteStore(path)
    store.ensure_index(TENANT)
    if fresh or not store.count(TENANT, [KB], [eq("knowledge_graph_kwd", Entity.KIND)]):
        build(store, args.entities, args.relations, args.communities)
    reports = store.search(TENANT, SearchRequest(kb_ids=[KB], where=[eq("knowledge_graph_kwd", CommunityReport.KIND)],
                                                 limit=1, fields=["entity_keys_kwd"])).hits
    if not reports or not reports[0].doc.get("entity_keys_kwd"):
        build_reports(store, args.communities)
    top = view.top_nodes(store, TENANT, KB, 1)[0].key
    timed("opening sample, top 300", lambda: view.sample_graph(store, TENANT, KB, limit=300))
    timed("reload after a filter change (no facets), top 300",
          lambda: view.sample_graph(store, TENANT, KB, limit=300, facets=False))
    timed("sample, top 1000", lambda: view.sample_graph(store, TENANT, KB, limit=1000))
    timed("sample, type person, top 300", lambda: view.sample_graph(store, TENANT, KB, limit=300, types=["person"]))
    timed("sample, one community", lambda: view.sample_graph(store, TENANT, KB, limit=300, community="c0-7"))
    timed("neighbours of the top entity (50)", lambda: view.neighbourhood(store, TENANT, KB, top))
    timed("suggestions for 'entity 4242'", lambda: view.suggest(store, TENANT, KB, "entity 4242"))
    timed("entity details", lambda: view.entity_detail(store, TENANT, KB, top, {}))
    store.close()


if __name__ == "__main__":
    main()
