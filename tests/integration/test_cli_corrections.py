"""`kbgraph graph rename|set|merge|split|rm|add|import|corrections|undo|similar` as a user runs them:
real processes on the sample corpus, the embedded store. Corrections hold through document adds and
deletes and `graph refresh --rebuild`; collisions are refused until confirmed; an export edited and
imported into a fresh knowledge base is retrieved and cited as curated."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from kbgraph.data import SAMPLE_CORPUS_DIR
from integration.test_cli import env, run  # noqa: F401  (env: the fixture)


def _entity(env: dict[str, str], name: str, kb: str = "lore") -> dict | None:
    done = run(env, "graph", "show", name, "--kb", kb, "--json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def _names(env: dict[str, str], kb: str = "lore") -> set[str]:
    exported = json.loads(run(env, "graph", "export", "--kb", kb, "--format", "json").stdout)
    return {n["name"] for n in exported["nodes"]}


@pytest.fixture
def lore(env: dict[str, str], tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS_DIR, corpus)
    run(env, "kb", "create", "lore", "--graph", "nlp", "--community")
    run(env, "index", str(corpus), "--kb", "lore")
    return corpus


def test_corrections_hold_through_document_changes_and_a_rebuild(env: dict[str, str], lore: Path) -> None:
    similar = run(env, "graph", "similar", "Corran", "--kb", "lore").stdout
    assert "Isle of Corran" in similar.splitlines()[0]  # the name holding "Corran" whole comes first

    clash = run(env, "graph", "rename", "Caldmere", "Varrow", "--kb", "lore", check=False)
    assert clash.returncode == 2 and "exists already" in clash.stderr and "--force" in clash.stderr
    mixed = run(env, "graph", "merge", "Varrow", "Brightwater Trading Company", "--kb", "lore", check=False)
    assert mixed.returncode == 2 and "different types" in mixed.stderr
    missing = run(env, "graph", "rm", "Varow Citty", "--kb", "lore", check=False)
    assert missing.returncode == 2 and "no entity named" in missing.stderr

    run(env, "graph", "merge", "Corran", "Isle of Corran", "--into", "Isle of Corran", "--kb", "lore", "--who", "ann")
    run(env, "graph", "rename", "Varrow", "Varrow City", "--kb", "lore")
    run(env, "graph", "set", "Kestrel Observatory", "--type", "place", "--description", "An observatory on cliffs",
        "--kb", "lore")
    run(env, "graph", "rm", "Caldmere", "--kb", "lore")
    run(env, "graph", "add", "Pell Harbour", "--type", "geo", "--description", "A harbour town", "--kb", "lore")
    run(env, "graph", "add", "Pell Harbour", "Varrow City", "--description", "a ferry route", "--keyword", "ferry",
        "--kb", "lore")

    def check() -> None:
        corran = _entity(env, "Isle of Corran")
        assert corran and "Corran" in corran["aliases"]
        assert _entity(env, "Varrow City")["name"] == "Varrow City"
        kestrel = _entity(env, "Kestrel Observatory")
        assert (kestrel["type"], kestrel["description"]) == ("place", "An observatory on cliffs")
        names = _names(env)
        assert "Caldmere" not in names and "Corran" not in names and "Varrow" not in names
        pell = _entity(env, "Pell Harbour")
        assert list(pell["documents"].values()) == ["curated: by hand"]
        assert any(n["name"] == "Varrow City" and "ferry" in n["description"] for n in pell["neighbours"])

    check()
    (lore / "harbour.md").write_text("Caldmere sent grain to Varrow. Corran and Varrow signed the Harbour Pact.\n")
    run(env, "index", str(lore / "harbour.md"), "--kb", "lore")
    check()
    run(env, "docs", "rm", "salt_war.md", "--kb", "lore")
    check()
    run(env, "graph", "refresh", "--kb", "lore", "--rebuild")
    check()

    listed = json.loads(run(env, "graph", "corrections", "--kb", "lore", "--json").stdout)
    assert [c["op"] for c in listed] == ["merge", "rename", "set", "delete_entity", "add_entity", "add_relation"]
    assert listed[0]["who"] == "ann" and listed[0]["at"] > 0
    run(env, "graph", "undo", "--kb", "lore")  # the relation added last
    run(env, "graph", "undo", "4", "--kb", "lore")  # the deletion
    assert "Caldmere" in _names(env)
    assert not any(n["name"] == "Varrow City" for n in _entity(env, "Pell Harbour")["neighbours"])
    twice = run(env, "graph", "undo", "4", "--kb", "lore", check=False)
    assert twice.returncode == 2 and "already undone" in twice.stderr


def test_split_by_document_and_by_name(env: dict[str, str], lore: Path) -> None:
    run(env, "graph", "merge", "Corran", "Isle of Corran", "--into", "Isle of Corran", "--kb", "lore")
    run(env, "graph", "split", "Isle of Corran", "--name", "Corran", "--kb", "lore")
    assert {"Corran", "Isle of Corran"} <= _names(env)
    before = _entity(env, "Varrow")
    documents = sorted(before["documents"].values())
    bad = run(env, "graph", "split", "Varrow", "--doc", documents[0], "--kb", "lore", check=False)
    assert bad.returncode == 2 and "needs the name" in bad.stderr
    run(env, "graph", "split", "Varrow", "--doc", documents[0], "--as", "Old Varrow", "--kb", "lore")
    old = _entity(env, "Old Varrow")
    assert sorted(old["documents"].values()) == [documents[0]]
    assert documents[0] not in _entity(env, "Varrow")["documents"].values()


def test_an_edited_export_imported_into_a_fresh_kb_is_cited_as_curated(env: dict[str, str], lore: Path,
                                                                     tmp_path: Path) -> None:
    exported = json.loads(run(env, "graph", "export", "--kb", "lore", "--format", "json").stdout)
    for node in exported["nodes"]:
        if node["name"] == "Kestrel Observatory":
            node["description"] = "The Kestrel Observatory watches the comets above the Isle of Corran."
    exported["nodes"].append({"id": "pell harbour", "name": "Pell Harbour", "type": "geo",
                              "description": "Pell Harbour is where the ferry to Corran leaves."})
    edited = tmp_path / "atlas.json"
    edited.write_text(json.dumps(exported))
    run(env, "kb", "create", "atlas", "--graph", "nlp")
    done = run(env, "graph", "import", str(edited), "--kb", "atlas", "--source", "lore atlas")
    assert f"{len(exported['nodes'])} entities" in done.stdout
    assert _names(env, "atlas") == {n["name"] for n in exported["nodes"]}
    assert "comets" in _entity(env, "Kestrel Observatory", "atlas")["description"]

    answer = json.loads(run(env, "query", "What does the Kestrel Observatory watch?", "--kb", "atlas", "--mode", "kg",
                            "--json").stdout)
    assert answer["chunks"] and answer["chunks"][0]["doc_name"] == "curated: lore atlas"
    assert "comets" in answer["context"]

    # the graph as GraphML, into another fresh knowledge base
    graphml = tmp_path / "lore.graphml"
    run(env, "graph", "export", "--kb", "lore", "--format", "graphml", "-o", str(graphml))
    run(env, "kb", "create", "atlas2", "--graph", "nlp")
    run(env, "graph", "import", str(graphml), "--kb", "atlas2")
    answer = json.loads(run(env, "query", "Where does the Kestrel Observatory stand?", "--kb", "atlas2", "--mode", "kg",
                            "--json").stdout)
    assert answer["chunks"][0]["doc_name"] == "curated: lore.graphml"
    assert _names(env, "atlas2") == _names(env, "lore")

    # the same graph as two CSV files
    entities, relations = tmp_path / "entities.csv", tmp_path / "relations.csv"
    with entities.open("w", newline="") as f:
        csv.writer(f).writerows([["name", "type", "description"], ["Pell Harbour", "geo", "A harbour"],
                                 ["Ferry Guild", "organization", "Runs the ferries"]])
    with relations.open("w", newline="") as f:
        csv.writer(f).writerows([["source", "target", "description", "keywords", "weight"],
                                 ["Ferry Guild", "Pell Harbour", "The guild sails from the harbour", "ferry", "2"]])
    run(env, "graph", "import", str(entities), "--relations", str(relations), "--kb", "atlas", "--source", "ferries")
    guild = _entity(env, "Ferry Guild", "atlas")
    assert guild["neighbours"][0]["name"] == "Pell Harbour"

    run(env, "graph", "import", "--remove", "ferries", "--kb", "atlas")
    assert _entity(env, "Ferry Guild", "atlas") is None
    assert _entity(env, "Pell Harbour", "atlas")  # the atlas still has it

    broken = tmp_path / "broken.csv"
    broken.write_text("label,kind\nx,y\n")
    bad = run(env, "graph", "import", str(broken), "--kb", "atlas", check=False)
    assert bad.returncode == 2 and "broken.csv" in bad.stderr and "lacks name" in bad.stderr
