"""A graph written as GraphML or as node-link JSON, the two formats networkx reads and writes.

kbgraph only ever writes these files (``kbgraph graph export``, the web page's export links), an
undirected simple graph with plain attributes; networkx (19 MB installed) was there for nothing else.
The output follows networkx's writers (``write_graphml``, ``node_link_data(edges="edges")``): the
same keys and attribute types, so networkx, Gephi, Cytoscape and yEd read it back alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from xml.etree import ElementTree

Attributes = dict[str, object]

_GRAPHML_NS = "http://graphml.graphdrawing.org/xmlns"
_XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
_SCHEMA = "http://graphml.graphdrawing.org/xmlns http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd"


@dataclass
class SimpleGraph:
    """An undirected graph without parallel edges: adding an edge twice (either way round) updates
    its attributes, and an edge's unknown end becomes a node without attributes (as nx.Graph)."""

    nodes: dict[str, Attributes] = field(default_factory=dict)
    edges: dict[frozenset[str], tuple[str, str, Attributes]] = field(default_factory=dict)

    def add_node(self, key: str, **attributes: object) -> None:
        self.nodes.setdefault(key, {}).update(attributes)

    def add_edge(self, source: str, target: str, **attributes: object) -> None:
        for end in (source, target):
            self.nodes.setdefault(end, {})
        pair = frozenset((source, target))
        if pair in self.edges:
            self.edges[pair][2].update(attributes)
        else:
            self.edges[pair] = (source, target, dict(attributes))


def node_link_json(graph: SimpleGraph) -> bytes:
    data = {
        "directed": False, "multigraph": False, "graph": {},
        "nodes": [{**attrs, "id": key} for key, attrs in graph.nodes.items()],
        "edges": [{**attrs, "source": source, "target": target}
                  for source, target, attrs in graph.edges.values()],
    }
    return json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8")


def _graphml_type(value: object) -> str:
    # networkx's names: bool before int (a bool is an int in Python)
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "long"
    if isinstance(value, float):
        return "double"
    return "string"


def _graphml_text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def graphml(graph: SimpleGraph) -> bytes:
    ElementTree.register_namespace("", _GRAPHML_NS)
    root = ElementTree.Element(f"{{{_GRAPHML_NS}}}graphml", {f"{{{_XSI_NS}}}schemaLocation": _SCHEMA})
    keys: dict[tuple[str, str], str] = {}

    def key_of(scope: str, name: str, value: object) -> str:
        if (scope, name) not in keys:
            keys[(scope, name)] = f"d{len(keys)}"
            ElementTree.SubElement(root, f"{{{_GRAPHML_NS}}}key", {
                "id": keys[(scope, name)], "for": scope, "attr.name": name,
                "attr.type": _graphml_type(value)})
        return keys[(scope, name)]

    # keys come before the graph element, so the graph is built aside and appended last
    body = ElementTree.Element(f"{{{_GRAPHML_NS}}}graph", {"edgedefault": "undirected"})
    for node_key, attrs in graph.nodes.items():
        node = ElementTree.SubElement(body, f"{{{_GRAPHML_NS}}}node", {"id": node_key})
        _add_data(node, attrs, lambda name, value: key_of("node", name, value))
    for source, target, attrs in graph.edges.values():
        edge = ElementTree.SubElement(body, f"{{{_GRAPHML_NS}}}edge", {"source": source, "target": target})
        _add_data(edge, attrs, lambda name, value: key_of("edge", name, value))
    root.append(body)
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)


def _add_data(element: ElementTree.Element, attrs: Attributes, key_of: Callable[[str, object], str]) -> None:
    for name, value in attrs.items():
        if value is None:
            continue
        data = ElementTree.SubElement(element, f"{{{_GRAPHML_NS}}}data", {"key": key_of(name, value)})
        data.text = _graphml_text(value)
