"""What only a live Elasticsearch node shows: the test node is a real 8.x; a write that races a
drop of its tenant creates nothing (writes require the tenant's alias) and the next write creates the
tenant's index with kbgraph's mapping; an index made by kbgraph before aliases is adopted."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from conftest import ES_TEST_REFRESH_INTERVAL, require_service
from kbgraph.config import load_settings
from kbgraph.store.base import SearchRequest, StoreError, TextQuery, VectorQuery
from kbgraph.store.elastic import ElasticStore
from kbgraph.store.elastic.indices import legacy_template_name, prefix_pattern
from support.es_tidy import es_prefix


@pytest.fixture
def stores() -> Iterator[tuple[ElasticStore, ElasticStore]]:
    """Two stores on the same node and prefix, as two processes would hold them."""
    url = os.environ.get("KBGRAPH_ES_URL")
    if not url:
        require_service("Elasticsearch", "KBGRAPH_ES_URL not set (bash tests/es_node/es-node.sh start)")
    settings = load_settings(store="elasticsearch", es_url=url, es_refresh_interval=ES_TEST_REFRESH_INTERVAL,
                             es_index_prefix=es_prefix(url))
    pair = (ElasticStore.from_settings(settings), ElasticStore.from_settings(settings))
    yield pair
    for store in pair:
        store.close()


def test_the_node_is_elasticsearch_8(stores: tuple[ElasticStore, ElasticStore]) -> None:
    info = stores[0]._client.info()
    assert info["version"]["number"].startswith("8.") and info["tagline"] == "You Know, for Search"


def test_a_write_racing_a_drop_creates_nothing_and_the_next_recreates(
        stores: tuple[ElasticStore, ElasticStore]) -> None:
    writer, dropper = stores
    tenant = f"race-{uuid.uuid4().hex[:8]}"
    writer.upsert(tenant, "kb", [{"id": "first", "content_ltks": "alpha", "q_4_vec": [1, 0, 0, 0]}])
    dropper.drop_index(tenant)  # another process drops it; the writer still believes it exists
    try:
        late = [{"id": "a", "content_ltks": "dock-9 harbour", "tag_kwd": "x", "q_4_vec": [0, 1, 0, 0],
                 "note": {"free": "form"}}]
        with pytest.raises(StoreError, match="not an alias"):
            writer.upsert(tenant, "kb", late)
        assert not dropper.index_exists(tenant)  # no index made with dynamic defaults
        writer.upsert(tenant, "kb", late)  # the writer forgot the index: this write creates it
        index = writer.tenants.current(tenant)
        assert index is not None and index.endswith(".1")
        mapping = writer._client.indices.get_mapping(index=writer.index_for(tenant))[index]["mappings"]["properties"]
        assert mapping["content_ltks"] == {"type": "text", "analyzer": "whitespace", "similarity": "BM25"}
        assert mapping["tag_kwd"]["type"] == "keyword" and mapping["q_4_vec"]["type"] == "dense_vector"
        assert mapping["note"] == {"type": "object", "enabled": False}  # no dynamic field explosion
        # the whitespace analyzer keeps "dock-9" one token, as the embedded store does
        hits = writer.search(tenant, SearchRequest(kb_ids=["kb"], text=TextQuery(["dock-9"], {"content_ltks": 1})))
        assert [h.id for h in hits.hits] == ["a"]
        near = writer.search(tenant, SearchRequest(kb_ids=["kb"], vector=VectorQuery("q_4_vec", [0, 1, 0, 0])))
        assert near.hits[0].id == "a" and near.hits[0].vector_score == pytest.approx(1.0, abs=1e-6)
    finally:
        writer.drop_index(tenant)


def test_an_index_made_before_aliases_is_adopted_and_dropped_with_its_template(
        stores: tuple[ElasticStore, ElasticStore]) -> None:
    """A deployment made by an older kbgraph: one index per tenant under the plain name, no alias,
    and the prefix's index template. The first open points the tenant's alias at that index; reads
    and writes then go there, from every process; dropping the tenant deletes it, and with the
    prefix's last index, the template."""
    store, other = stores
    tenant = f"old-{uuid.uuid4().hex[:8]}"
    names = store.tenants.names(tenant)
    body = store._definition()
    client = store._client
    template = legacy_template_name(store._prefix)
    client.indices.put_index_template(name=template, index_patterns=[prefix_pattern(store._prefix)], priority=200,
                                      template={"settings": body["settings"], "mappings": body["mappings"]})
    client.indices.create(index=names.legacy, settings=body["settings"], mappings=body["mappings"])
    old_rows = [{"id": f"d{i}", "kb_id": "kb", "content_ltks": f"harbour row{i}", "q_4_vec": [1, i, 0, 0]}
                for i in range(1, 6)]
    client.bulk(operations=[line for row in old_rows for line in ({"index": {"_index": names.legacy, "_id": row["id"]}},
                                                                  row)], refresh=True)
    store.ensure_index(tenant)  # what Engine.open does first
    assert store.tenants.current(tenant) == names.legacy
    assert client.indices.get_alias(name=names.alias).body == {names.legacy: {"aliases": {names.alias: {}}}}
    assert store.count(tenant, ["kb"]) == 5
    found = other.search(tenant, SearchRequest(kb_ids=["kb"], text=TextQuery(["harbour"], {"content_ltks": 1})))
    assert found.total == 5  # another process reads through the alias without adopting again
    store.upsert(tenant, "kb", [{"id": "new", "content_ltks": "harbour"}])
    assert client.get(index=names.legacy, id="new")["found"]  # writes land in the adopted index
    assert other.get(tenant, ["kb"], ["new", "d1"])[0]["id"] == "new"
    store.drop_index(tenant)
    assert not client.indices.exists(index=names.legacy)
    assert not client.indices.exists_index_template(name=template)


def test_every_node_walks_a_shards_segments_one_after_the_other(stores: tuple[ElasticStore, ElasticStore]) -> None:
    """Walked side by side (Elasticsearch 8.13 on), a kNN search's segments share the best hits
    found so far, and which hits it returns depends on its threads' timing: the same question gave
    another answer now and then (docs/cluster.md, "The same answer every time"). The node script
    starts every node without search worker threads, as docker/compose.yaml does."""
    nodes = stores[0]._client.nodes.info(metric="settings")["nodes"]
    assert nodes
    for node in nodes.values():
        assert node["settings"].get("search", {}).get("worker_threads_enabled") == "false", node["name"]
