"""GraphML and node-link JSON written without networkx (kbgraph/graph/graph_files.py) read back by
networkx itself as the graph networkx would have written."""

from __future__ import annotations

import io
import json

import networkx as nx

from kbgraph.graph.graph_files import SimpleGraph, graphml, node_link_json


def both() -> tuple[SimpleGraph, nx.Graph]:
    ours, theirs = SimpleGraph(), nx.Graph()
    for graph in (ours, theirs):
        graph.add_node("mira castell", name="Mira Castell", type="person", pagerank=0.25, mentions=3,
                       aliases="Mira|M. Castell", description='she said "<founded>" & left')
        graph.add_node("沈若溪", name="沈若溪", type="person", pagerank=0.0, mentions=1, aliases="")
        graph.add_edge("mira castell", "lumen guild", description="founded", weight=2.5, mentions=2)
        graph.add_edge("lumen guild", "mira castell", weight=3.0)  # the same edge, either way round
        graph.add_edge("沈若溪", "沈若溪", description="a loop", weight=1.0, mentions=1)
    return ours, theirs


def same(read: nx.Graph, expected: nx.Graph) -> None:
    assert dict(read.nodes(data=True)) == dict(expected.nodes(data=True))
    assert {frozenset((u, v)): d for u, v, d in read.edges(data=True)} == \
        {frozenset((u, v)): d for u, v, d in expected.edges(data=True)}


def test_graphml_reads_back_as_networkx_wrote_it() -> None:
    ours, theirs = both()
    read = nx.read_graphml(io.BytesIO(graphml(ours)))
    same(read, theirs)
    assert read.nodes["mira castell"]["mentions"] == 3 and isinstance(read.nodes["mira castell"]["mentions"], int)
    assert read.edges["mira castell", "lumen guild"]["weight"] == 3.0
    written = io.BytesIO()
    nx.write_graphml(theirs, written)
    same(nx.read_graphml(io.BytesIO(written.getvalue())), read)


def test_node_link_json_is_networkx_node_link_data() -> None:
    ours, theirs = both()
    data = json.loads(node_link_json(ours))
    assert set(data) == set(nx.node_link_data(theirs, edges="edges"))
    same(nx.node_link_graph(data, edges="edges"), theirs)
