"""A new user's session with the `kbgraph` command: a mixed folder, graph settings changed afterwards,
every command's exit code on success, on a missing item and on a model failure.

The command runs in-process (click's runner: real engine, real files, the embedded store) to keep
the many invocations cheap; tests/integration/test_cli.py covers real processes.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from support.documents import SALES, STAFF, make_docx, make_pdf, make_pptx, make_xlsx

from kbgraph.cli import main
from kbgraph.data import SAMPLE_CORPUS_DIR


@pytest.fixture
def kbgraph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in list(os.environ):
        if name.startswith("KBGRAPH_"):
            monkeypatch.delenv(name)
    base = {"KBGRAPH_DATA_DIR": str(tmp_path / "data"), "KBGRAPH_EMBEDDING_PROVIDER": "hash",
            "KBGRAPH_EMBEDDING_DIM": "64"}

    def run(*args: str, code: int | None = 0, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        result = CliRunner().invoke(main, list(args), input=input, env={**base, **(env or {})})
        if code is not None and result.exit_code != code:
            raise AssertionError(f"kbgraph {' '.join(args)} exited {result.exit_code}, not {code}:\n"
                                 f"{result.stdout}\n{result.stderr}\n{result.exception!r}")
        return result

    return run


def dead_endpoint() -> dict[str, str]:
    """An LLM endpoint nobody listens on: every call fails to connect, at once (no retries)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return {"KBGRAPH_LLM_BASE_URL": f"http://127.0.0.1:{port}/v1", "KBGRAPH_LLM_MODEL": "m",
            "KBGRAPH_LLM_MAX_RETRIES": "0"}


def mixed_folder(root: Path) -> Path:
    folder = root / "mixed"
    folder.mkdir()
    (folder / "notes.md").write_text("# Harbor\n\nMira Castell charted the harbor of Varrow in 790.\n")
    (folder / "report.pdf").write_bytes(make_pdf(["The Glass Tower stands in Varrow.", "Tobias Wren built cranes."]))
    (folder / "report.docx").write_bytes(make_docx())
    (folder / "sales.xlsx").write_bytes(make_xlsx({"Sales": SALES, "Staff": STAFF}))
    (folder / "deck.pptx").write_bytes(make_pptx([("The Lumen Guild", "Founded by Mira Castell", "Say 790"),
                                                  ("Emblem", "A silver heron above a compass rose", "")]))
    (folder / "broken.xlsx").write_bytes(b"PK\x03\x04 cut off")
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    return folder


def test_mixed_folder_then_the_graph_switched_on_changed_and_off(kbgraph, tmp_path: Path) -> None:
    folder = mixed_folder(tmp_path)
    indexed = kbgraph("index", str(folder), "--kb", "work", code=1)  # two files failed
    assert "kbgraph kb set work --graph nlp" in indexed.stderr  # created with the graph off: the hint
    assert "5 indexed, 0 unchanged, 2 failed" in indexed.stdout
    assert "FAILED  broken.xlsx: corrupt or unreadable XLSX" in indexed.stderr
    assert "FAILED  logo.png: unsupported file type (.png)" in indexed.stderr
    docs = {d["name"]: d for d in json.loads(kbgraph("docs", "list", "--kb", "work", "--json").stdout)}
    assert set(docs) == {"notes.md", "report.pdf", "report.docx", "sales.xlsx", "deck.pptx", "broken.xlsx", "logo.png"}
    assert docs["logo.png"]["status"] == "failed" and "unsupported file type" in docs["logo.png"]["error"]
    assert docs["broken.xlsx"]["status"] == "failed" and "corrupt or unreadable XLSX" in docs["broken.xlsx"]["error"]
    assert docs["sales.xlsx"]["chunk_count"] == 2 and docs["deck.pptx"]["chunk_count"] == 2  # per sheet, per slide
    table = kbgraph("docs", "list", "--kb", "work").stdout.splitlines()
    assert table[0].split() == ["ID", "STATUS", "CHUNKS", "SIZE", "NAME", "DETAIL"] and len(table) == 8
    assert "unsupported file type" in next(line for line in table if "logo.png" in line)

    slide = json.loads(kbgraph("query", "silver heron emblem", "--kb", "work", "--json").stdout)["chunks"][0]
    assert slide["doc_name"] == "deck.pptx" and "Slide 2" in slide["content"]

    # the graph switched on afterwards is built for what is indexed
    switched = kbgraph("kb", "set", "work", "--graph", "nlp", "--community")
    assert "graph switched on (nlp); 5 documents to extract" in switched.stdout
    assert "graph built for 5 document(s), 0 failed" in switched.stdout
    stats = json.loads(kbgraph("graph", "stats", "--kb", "work", "--json").stdout)
    assert stats["entities"] > 3 and stats["communities"] > 0
    assert kbgraph("graph", "show", "Mira Castell", "--kb", "work", "--json").exit_code == 0
    assert all(d["extracted"] for d in json.loads(kbgraph("docs", "list", "--kb", "work", "--json").stdout)
               if d["status"] == "done")

    # extraction settings: said, not done, until graph refresh --rebuild
    changed = kbgraph("kb", "set", "work", "--entity-types", "person,vessel")
    assert "extraction settings changed (entity_types)" in changed.stdout and "--rebuild" in changed.stdout
    def entity_types() -> set[str]:
        return {t for t, _ in json.loads(kbgraph("graph", "stats", "--kb", "work", "--json").stdout)["entity_types"]}

    # the nlp extractor honours the listed types: its people are "person", and what no listed type
    # takes (places, organizations, other names: "vessel" has no nlp cue) gets the fallback "other"
    assert "category" in entity_types() and "other" not in entity_types()  # not extracted again yet
    assert "--rebuild" in kbgraph("graph", "refresh", "--kb", "work").stderr  # reminded
    rebuilt = kbgraph("graph", "refresh", "--kb", "work", "--rebuild")
    assert "graph built for 5 document(s)" in rebuilt.stdout
    assert "other" in entity_types() and entity_types() <= {"person", "other"}
    assert "--rebuild" not in kbgraph("graph", "refresh", "--kb", "work").stderr

    off = kbgraph("kb", "set", "work", "--graph", "off")
    assert "graph switched off" in off.stdout
    assert json.loads(kbgraph("graph", "stats", "--kb", "work", "--json").stdout)["entities"] == 0
    assert kbgraph("query", "silver heron emblem", "--kb", "work", "--json").exit_code == 0  # chunks stay
    assert kbgraph("graph", "refresh", "--kb", "work", code=2).stderr.count("kb set work --graph nlp") == 1


def test_exit_codes_of_every_command(kbgraph, tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("# Lumen Guild\n\nMira Castell founded the Lumen Cartographers Guild in Varrow in 790.\n")
    kbgraph("kb", "create", "lore", "--graph", "nlp", "--community")
    kbgraph("index", str(note), "--kb", "lore")
    kbgraph("kb", "list")
    config_text = " ".join(kbgraph("config").stdout.split())
    # what the entity types do for the nlp method is said where the settings are
    assert "With the nlp method" in config_text and "gets the type 'other'" in config_text

    # unknown items exit 2, with a suggestion where a name is close
    assert "did you mean 'lore'" in kbgraph("query", "guild", "--kb", "lroe", code=2).stderr
    for args in (["kb", "set", "nope", "--community"], ["kb", "rm", "nope", "--yes"], ["docs", "list", "--kb", "nope"],
                 ["graph", "stats", "--kb", "nope"], ["graph", "refresh", "--kb", "nope"],
                 ["graph", "export", "--kb", "nope"], ["chat", "--kb", "nope", "-q", "hi"]):
        assert "no knowledge base named 'nope'" in kbgraph(*args, code=2).stderr, args
    assert "did you mean 'note.md'" in kbgraph("docs", "rm", "notes.md", "--kb", "lore", code=2).stderr
    assert "did you mean 'Mira Castell'" in kbgraph("graph", "show", "Mira Castel", "--kb", "lore", code=2).stderr
    kbgraph("index", str(tmp_path / "absent.md"), "--kb", "lore", code=2)
    kbgraph("query", "guild", "--kb", "lore", "--mode", "sideways", code=2)  # a bad option
    kbgraph("kb", "set", "lore", code=2)  # nothing to change
    kbgraph("kb", "set", "lore", "--graph", "general", code=2)  # needs an LLM, none configured

    # found, and nothing found
    kbgraph("graph", "show", "Mira Castell", "--kb", "lore")
    kbgraph("graph", "stats", "--kb", "lore")
    kbgraph("graph", "refresh", "--kb", "lore")
    kbgraph("graph", "export", "--kb", "lore", "--format", "json")
    kbgraph("query", "Who founded the Lumen Cartographers Guild?", "--kb", "lore")
    kbgraph("query", "zzyzx qwertyuiop", "--kb", "lore", "--mode", "naive", code=1)

    # a model needed but none configured: cannot run as given (2); the model fails: ran and failed (1)
    kbgraph("chat", "--kb", "lore", "-q", "Who founded the guild?", code=2)
    dead = dead_endpoint()
    failed = kbgraph("chat", "--kb", "lore", "-q", "Who founded the Lumen Cartographers Guild?", env=dead, code=1)
    assert "could not be answered" in failed.stderr
    kbgraph("chat", "--kb", "lore", input="Who founded the Lumen Cartographers Guild?\n", env=dead, code=1)
    assert "connection refused" in kbgraph("query", "What are the main themes?", "--kb", "lore", "--mode", "global",
                                          env=dead, code=1).stderr

    # kb rm asks; no answer (or no) keeps everything
    assert "nothing removed" in kbgraph("kb", "rm", "lore", input="", code=1).stderr
    kbgraph("kb", "rm", "lore", input="n\n", code=1)
    assert "lore" in kbgraph("kb", "list").stdout
    kbgraph("kb", "rm", "lore", input="y\n")
    kbgraph("kb", "create", "lore")
    kbgraph("kb", "rm", "lore", "--yes")
    assert "lore" not in kbgraph("kb", "list").stdout

    kbgraph("docs", "rm", "note.md", "--kb", "nope", code=2)


def test_settings_of_a_graph_that_is_off_and_an_unreadable_file(kbgraph, tmp_path: Path) -> None:
    kbgraph("kb", "create", "plain")
    saved = kbgraph("kb", "set", "plain", "--community", "--entity-types", "person,ship")
    assert "saved; the graph is off" in saved.stdout
    assert "graph: off" in kbgraph("kb", "list").stdout
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ok.md").write_text("The harbor opens at dawn.")
    (folder / "gone.md").symlink_to(folder / "moved-away.md")  # a link whose file is gone
    result = kbgraph("index", str(folder), "--kb", "plain", code=1)
    assert "1 indexed, 0 unchanged, 1 failed" in result.stdout and "gone.md: cannot read the file" in result.stderr
    gone = next(d for d in json.loads(kbgraph("docs", "list", "--kb", "plain", "--json").stdout) if d["name"] == "gone.md")
    assert gone["status"] == "failed" and "No such file" in gone["error"]


def test_chat_answers_and_exits_0_with_a_working_model(kbgraph, tmp_path: Path, scripted_llm) -> None:
    note = tmp_path / "note.md"
    note.write_text("Mira Castell founded the Lumen Cartographers Guild in Varrow in 790.\n")
    kbgraph("index", str(note), "--kb", "lore")
    scripted_llm.push("Mira Castell founded it [ID:0].")
    llm = {"KBGRAPH_LLM_BASE_URL": scripted_llm.base_url, "KBGRAPH_LLM_MODEL": "scripted"}
    answered = kbgraph("chat", "--kb", "lore", "-q", "Who founded the Lumen Cartographers Guild?", env=llm)
    assert "Mira Castell founded it" in answered.stdout and "note.md" in answered.stdout


def test_demo_prints_an_answer_above_the_evidence(kbgraph, scripted_llm) -> None:
    # the README's first command as a user runs it: the bundled e5 embedder (on the hash embedder,
    # whose cosines say little, the registry of other guilds stays first and fills the answer)
    shown = kbgraph("demo", env={"KBGRAPH_EMBEDDING_PROVIDER": "local", "KBGRAPH_EMBEDDING_DIM": "384"}).stdout
    answer, evidence = shown.split("\nevidence:\n")
    assert "A (sentences of the evidence" in answer
    assert "silver heron" in answer and "lumen_cartographers_guild.md" in answer  # cited
    assert "entity" in evidence and "Mira Castell (person)" in evidence
    scripted_llm.default = "The emblem is a silver heron [ID:1]."  # (the query analysis asks the model too)
    llm = {"KBGRAPH_LLM_BASE_URL": scripted_llm.base_url, "KBGRAPH_LLM_MODEL": "scripted"}
    written = kbgraph("demo", env=llm).stdout
    assert "A: The emblem is a silver heron [ID:1]." in written.split("\nevidence:\n")[0]
    assert str(SAMPLE_CORPUS_DIR) in written


def test_index_reports_tokens_by_phase_and_the_gleaning_decisions(kbgraph, tmp_path: Path, scripted_llm) -> None:
    from support.graph_model import GraphModel

    scripted_llm.responder = GraphModel()  # lists every name the detector sees: no chunk needs its round
    llm = {"KBGRAPH_LLM_BASE_URL": scripted_llm.base_url, "KBGRAPH_LLM_MODEL": "scripted",
           "KBGRAPH_GLEAN_MIN_TOKENS": "0"}
    kbgraph("kb", "create", "lore", "--graph", "general", "--gleanings", "1", env=llm)
    indexed = kbgraph("index", str(SAMPLE_CORPUS_DIR), "--kb", "lore", env=llm)
    chunks = sum(d["chunk_count"] for d in json.loads(kbgraph("docs", "list", "--kb", "lore", "--json").stdout))
    assert "tokens by phase (prompt+completion): extract " in indexed.stderr
    assert f"decisions: glean: names covered {chunks}" in indexed.stderr
    assert "glean " not in indexed.stderr.split("tokens by phase")[1].splitlines()[0]  # no gleaning call
