"""Curated graphs read from the files users bring: GraphML (kbgraph's export, LightRAG's), node-link JSON
(kbgraph's export, RAGFlow's knowledge_graph answer), and a pair of CSV files; bad files fail with a
message naming the file and what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbgraph.graph.curated import CuratedFormatError, parse_curated, read_curated

LIGHTRAG_GRAPHML = b"""<?xml version='1.0' encoding='utf-8'?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
<key id="d0" for="node" attr.name="entity_type" attr.type="string"/>
<key id="d1" for="node" attr.name="description" attr.type="string"/>
<key id="d3" for="edge" attr.name="weight" attr.type="double"/>
<key id="d4" for="edge" attr.name="description" attr.type="string"/>
<key id="d5" for="edge" attr.name="keywords" attr.type="string"/>
<graph edgedefault="undirected">
<node id="&quot;SCROOGE&quot;"><data key="d0">"PERSON"</data><data key="d1">A miser.</data></node>
<node id="&quot;MARLEY&quot;"><data key="d0">"PERSON"</data><data key="d1">His late partner.</data></node>
<edge source="&quot;SCROOGE&quot;" target="&quot;MARLEY&quot;"><data key="d3">2.0</data><data key="d4">partners</data>
<data key="d5">business,partner</data></edge>
</graph></graphml>"""


def test_lightrag_graphml() -> None:
    graph = parse_curated(LIGHTRAG_GRAPHML, "graphml")
    assert [(e.name, e.type, e.description) for e in graph.entities] == [
        ("SCROOGE", "PERSON", "A miser."), ("MARLEY", "PERSON", "His late partner.")]
    (relation,) = graph.relations
    assert (relation.src, relation.tgt, relation.weight, relation.keywords) == ("SCROOGE", "MARLEY", 2.0,
                                                                               ("business", "partner"))


def test_ragflow_knowledge_graph_json() -> None:
    answer = {"directed": False, "multigraph": False, "graph": {}, "nodes": [
        {"id": "Ebenezer Scrooge", "entity_name": "Ebenezer Scrooge", "entity_type": "person", "description": "A miser"},
        {"id": "Jacob Marley", "entity_name": "Jacob Marley", "entity_type": "person"}],
        "edges": [{"source": "Ebenezer Scrooge", "target": "Jacob Marley", "keywords": ["partner"], "weight": 3}]}
    graph = parse_curated(json.dumps(answer).encode(), "json")
    assert [(e.name, e.type) for e in graph.entities] == [("Ebenezer Scrooge", "person"), ("Jacob Marley", "person")]
    assert graph.relations[0].keywords == ("partner",) and graph.relations[0].weight == 3.0


def test_csv_pair(tmp_path: Path) -> None:
    entities, relations = tmp_path / "e.csv", tmp_path / "r.csv"
    entities.write_text("Name,Type,Description\nScrooge,person,A miser\n", encoding="utf-8")
    relations.write_text("source,target,description,keywords,weight\nScrooge,Marley,partners,a|b,\n"
                         "Scrooge,scrooge,itself,,\n", encoding="utf-8")
    graph = read_curated(entities, relations)
    assert [(e.name, e.type) for e in graph.entities] == [("Scrooge", "person")]
    assert [(r.src, r.tgt, r.keywords, r.weight) for r in graph.relations] == [("Scrooge", "Marley", ("a", "b"), 1.0)]


@pytest.mark.parametrize(("name", "data", "message"), [
    ("e.csv", b"label,kind\nx,y\n", "e.csv entities: the header lacks name"),
    ("e.csv", b"name\n\"\"\n", "line 2: no name"),
    ("g.json", b"[1, 2]", "expected the node-link JSON"),
    ("g.json", b"{nope", "not JSON"),
    ("g.graphml", b"<graphml><nope", "not readable GraphML"),
    ("g.txt", b"x", "cannot tell its format"),
])
def test_bad_files_say_what_is_wrong(tmp_path: Path, name: str, data: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(CuratedFormatError, match=message) as caught:
        read_curated(path)
    assert name in str(caught.value)


def test_a_bad_weight_names_its_line(tmp_path: Path) -> None:
    entities, relations = tmp_path / "e.csv", tmp_path / "r.csv"
    entities.write_text("name\nA\nB\n", encoding="utf-8")
    relations.write_text("source,target,weight\nA,B,heavy\n", encoding="utf-8")
    with pytest.raises(CuratedFormatError, match="line 2: weight 'heavy' is not a number"):
        read_curated(entities, relations)
