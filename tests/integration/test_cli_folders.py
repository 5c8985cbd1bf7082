"""Folders kept in sync with a knowledge base, folders a walk cannot enter, and indexing stopped with
Ctrl-C or SIGTERM (issue 38, items 1 and 2): the `kbgraph` command as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from integration.test_cli import env  # noqa: F401  (KBGRAPH_* of a fresh data folder, for real processes)
from integration.test_cli_everyday import kbgraph  # noqa: F401  (the same folder, the command in-process)

from kbgraph.config import load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.engine import Engine
from kbgraph.graph.invariants import check_graph

KBGRAPH = [sys.executable, "-m", "kbgraph.cli"]


def docs_of(kbgraph, kb: str) -> dict[str, dict]:
    return {d["name"]: d for d in json.loads(kbgraph("docs", "list", "--kb", kb, "--json").stdout)}


def test_sync_removes_exactly_the_gone_files_after_a_dry_run(kbgraph, env: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    shutil.copytree(SAMPLE_CORPUS_DIR, folder)
    (folder / "sub").mkdir()
    (folder / "sub" / "tower.md").write_text("Tobias Wren built the cranes of the Glass Tower in Varrow.\n")
    elsewhere = tmp_path / "loose.md"
    elsewhere.write_text("Mira Castell sailed to Ashgrove with Tobias Wren.\n")
    kbgraph("kb", "create", "lore", "--graph", "nlp", "--community")
    kbgraph("index", str(folder), "--kb", "lore")
    kbgraph("index", str(elsewhere), "--kb", "lore")  # a file named on its own: never "gone" from the folder
    before = docs_of(kbgraph, "lore")
    assert {"mira_castell.md", "sub/tower.md", "loose.md"} <= set(before)

    (folder / "mira_castell.md").unlink()
    shutil.rmtree(folder / "sub")
    (folder / "salt_war.md").write_text((folder / "salt_war.md").read_text() + "\nThe war ended in 802.\n")
    (folder / "new_note.md").write_text("The Tidewardens guarded the harbor of Varrow.\n")

    kept = kbgraph("index", str(folder), "--kb", "lore")  # without --sync: counted, kept
    assert "2 indexed file(s) are gone from the folder(s)" in kept.stderr and "--sync" in kept.stderr
    assert {"mira_castell.md", "sub/tower.md"} <= set(docs_of(kbgraph, "lore"))
    (folder / "another.md").write_text("Ashgrove Academy stands above the harbor.\n")

    dry = kbgraph("index", str(folder), "--kb", "lore", "--sync", "--dry-run")
    lines = dry.stdout.splitlines()
    assert "remove  mira_castell.md: its file is gone" in lines and "remove  sub/tower.md: its file is gone" in lines
    assert "index   another.md: new" in lines and "skip    glass_tower.md: unchanged" in lines
    assert not any("loose.md" in line for line in lines)
    assert "dry run: nothing changed" in dry.stdout
    assert set(docs_of(kbgraph, "lore")) == set(before) | {"new_note.md"}  # nothing changed indeed

    synced = kbgraph("index", str(folder), "--kb", "lore", "--sync")
    assert "removed mira_castell.md: its file is gone" in synced.stdout
    assert "2 removed (files gone)" in synced.stdout and "1 indexed" in synced.stdout
    after = docs_of(kbgraph, "lore")
    assert set(after) == (set(before) - {"mira_castell.md", "sub/tower.md"}) | {"new_note.md", "another.md"}
    assert "loose.md" in after
    found = json.loads(kbgraph("query", "Tobias Wren built the cranes", "--kb", "lore", "--json").stdout)
    assert all(c["doc_name"] not in {"mira_castell.md", "sub/tower.md"} for c in found["chunks"])
    again = kbgraph("index", str(folder), "--kb", "lore", "--sync")
    assert "removed" not in again.stdout and "gone" not in again.stderr

    with Engine.open(load_settings(None, data_dir=Path(env["KBGRAPH_DATA_DIR"]), embedding_provider="hash",
                                   embedding_dim=64)) as engine:
        kb = engine.kb("lore")
        ctx = engine.context(kb)
        assert check_graph(engine.store, engine.tenant, kb.id, ctx.describer()) == []  # the graph followed
        cited = {d.get("doc_id") for d in engine.store.scan(engine.tenant, [kb.id], [])}
        assert before["mira_castell.md"]["id"] not in cited and before["sub/tower.md"]["id"] not in cited


def test_a_symlink_loop_and_a_second_link_are_reported_not_walked(kbgraph, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    (folder / "a" / "b").mkdir(parents=True)
    (folder / "a" / "b" / "deep.md").write_text("The Glass Tower stands in Varrow.\n")
    (folder / "top.md").write_text("Mira Castell charted the harbor.\n")
    (folder / "a" / "b" / "up").symlink_to("..", target_is_directory=True)
    (folder / "again").symlink_to("a", target_is_directory=True)
    result = kbgraph("index", str(folder), "--kb", "lore", code=1)
    assert "FAILED  a/b/up/: a symbolic link loop: it leads back to" in result.stderr
    assert "FAILED  again/: a second link to" in result.stderr
    assert "2 indexed, 0 unchanged, 0 failed, 2 folder(s) not entered" in result.stdout
    assert set(docs_of(kbgraph, "lore")) == {"a/b/deep.md", "top.md"}


def _as_nobody() -> list[str]:
    """A command prefix that drops root's right to enter any folder (root would enter a 0700 folder)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a folder root cannot enter cannot be made")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_an_unreadable_folder_is_reported_and_its_documents_are_not_gone(env: dict[str, str]) -> None:
    work = Path(tempfile.mkdtemp(prefix="kbgraph-walk-"))
    try:
        work.chmod(0o777)
        folder = work / "docs"
        (folder / "locked").mkdir(parents=True)
        (folder / "open.md").write_text("Mira Castell charted the harbor.\n")
        (folder / "locked" / "secret.md").write_text("The Salt War ended in 802.\n")
        for path in (folder, folder / "locked"):
            path.chmod(0o777)
        for path in folder.rglob("*.md"):
            path.chmod(0o666)
        user_env = {**env, "KBGRAPH_DATA_DIR": str(work / "data"), "HOME": str(work),
                    "PYTHONPATH": os.pathsep.join(sys.path)}
        prefix = _as_nobody()
        first = subprocess.run([*prefix, *KBGRAPH, "index", str(folder), "--kb", "lore"], env=user_env,
                               capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr
        (folder / "locked").chmod(0o700 if prefix else 0o000)  # its owner (root) only / nobody
        second = subprocess.run([*prefix, *KBGRAPH, "index", str(folder), "--kb", "lore", "--sync"], env=user_env,
                                capture_output=True, text=True, timeout=300)
        assert second.returncode == 1, second.stderr
        assert "FAILED  locked/: cannot enter the folder (Permission denied)" in second.stderr
        assert "1 folder(s) not entered" in second.stdout and "removed" not in second.stdout
        listed = subprocess.run([*prefix, *KBGRAPH, "docs", "list", "--kb", "lore", "--json"], env=user_env,
                                capture_output=True, text=True, timeout=300)
        assert {d["name"] for d in json.loads(listed.stdout)} == {"open.md", "locked/secret.md"}
    finally:
        (work / "docs" / "locked").chmod(0o755)
        shutil.rmtree(work, ignore_errors=True)


def _statuses(env: dict[str, str]) -> dict[str, str]:
    listed = subprocess.run([*KBGRAPH, "docs", "list", "--kb", "big", "--json"], env=env, capture_output=True,
                            text=True, timeout=120)
    return {d["name"]: d["status"] for d in json.loads(listed.stdout or "[]")} if listed.returncode == 0 else {}


def _indexing_under_way(env: dict[str, str], tmp_path: Path, total: int,
                        done: int) -> tuple[Path, subprocess.Popen[str]]:
    """`kbgraph index` of ``total`` ledgers, one document per batch, once ``done`` of them are done."""
    folder = tmp_path / "big"
    folder.mkdir()
    paragraph = ("The harbor masters of Varrow kept ledgers of every ship, its cargo, its captain and its crew. "
                 "Each ledger was copied twice and sent to the Glass Tower for safekeeping. ")
    for n in range(total):
        (folder / f"ledger_{n:03d}.txt").write_text(f"Ledger {n}. " + paragraph * 60)
    subprocess.run([*KBGRAPH, "kb", "create", "big", "--graph", "nlp", "--community", "--chunk-tokens", "128",
                    "--chunk-overlap", "16"], env=env, check=True, capture_output=True, timeout=120)
    proc = subprocess.Popen([*KBGRAPH, "index", str(folder), "--kb", "big"],
                            env={**env, "KBGRAPH_INDEX_BATCH_DOCUMENTS": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:  # once some documents are done and others are not
        time.sleep(0.2)
        if sum(s == "done" for s in _statuses(env).values()) >= done:
            break
    assert proc.poll() is None, "indexing finished before it could be stopped; make the corpus bigger"
    return folder, proc


def test_a_second_ctrl_c_stops_at_once(env: dict[str, str], tmp_path: Path, scripted_llm) -> None:
    release = threading.Event()

    def slow(body: dict) -> str:  # every extraction call outlasts the test's patience
        release.wait(60)
        return "{}"

    scripted_llm.responder = slow
    llm = {**env, "KBGRAPH_LLM_BASE_URL": scripted_llm.base_url, "KBGRAPH_LLM_MODEL": "scripted"}
    folder = tmp_path / "notes"
    shutil.copytree(SAMPLE_CORPUS_DIR, folder)
    subprocess.run([*KBGRAPH, "kb", "create", "big", "--graph", "general"], env=llm, check=True, capture_output=True,
                   timeout=120)
    proc = subprocess.Popen([*KBGRAPH, "index", str(folder), "--kb", "big"], env=llm, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    try:
        while time.time() < deadline and scripted_llm.in_flight == 0:  # model calls are in flight
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)  # the first waits for the calls in flight...
        time.sleep(1)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)  # ...the second does not
        _, err = proc.communicate(timeout=20)
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "SIGINT again: stopped at once" in err, err


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_run_leaves_nothing_running_and_the_next_finishes_the_rest(env: dict[str, str], tmp_path: Path,
                                                                             sent: signal.Signals) -> None:
    total = 120  # enough that the run cannot finish between two polls
    folder, proc = _indexing_under_way(env, tmp_path, total, done=5)
    proc.send_signal(sent)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == (130 if sent == signal.SIGINT else 143), err
    assert f"stopped by {sent.name}: what was indexed is kept" in err
    statuses = _statuses(env)
    assert "running" not in statuses.values(), statuses
    done = sum(s == "done" for s in statuses.values())
    assert 5 <= done < total

    resumed = subprocess.run([*KBGRAPH, "index", str(folder), "--kb", "big"], env=env, capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{total - done} indexed, {done} unchanged, 0 failed" in resumed.stdout
    statuses = _statuses(env)
    assert len(statuses) == total and set(statuses.values()) == {"done"}


def test_the_data_folder_is_found_from_subfolders_and_every_empty_answer_names_it(env: dict[str, str],
                                                                                 tmp_path: Path) -> None:
    if any((parent / ".kbgraph").is_dir() for parent in tmp_path.parents):
        pytest.skip("a .kbgraph folder above the test's folder would be found first")
    plain = {k: v for k, v in env.items() if k != "KBGRAPH_DATA_DIR"}
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "sub" / "deeper").mkdir(parents=True)
    elsewhere.mkdir()

    def run(cwd: Path, *args: str, code: int = 0, **extra: str) -> subprocess.CompletedProcess:
        done = subprocess.run([*KBGRAPH, *args], cwd=cwd, env={**plain, **extra}, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == code, f"kbgraph {' '.join(args)} in {cwd}: {done.returncode}\n{done.stdout}{done.stderr}"
        return done

    run(project, "kb", "create", "notes")
    assert (project / ".kbgraph").is_dir()
    assert "notes" in run(project / "sub" / "deeper", "kb", "list").stdout  # found like git finds .git
    empty = run(project / "sub", "docs", "list", "--kb", "notes").stdout
    assert f"no documents yet in 'notes' ({project / '.kbgraph'})" in empty

    unknown = run(project / "sub", "query", "who?", "--kb", "nope", code=2).stderr
    assert "no knowledge base named 'nope' (did you mean 'notes'?)" in unknown and f"in {project / '.kbgraph'}" in unknown

    nothing = run(elsewhere, "kb", "list").stdout
    assert f"no knowledge bases yet in {elsewhere / '.kbgraph'} (there is no data folder there" in nothing
    assert json.loads(run(elsewhere, "kb", "list", "--json").stdout) == []
    missing = run(elsewhere, "query", "who?", "--kb", "notes", code=2).stderr
    assert f"no knowledge base named 'notes' in {elsewhere / '.kbgraph'}: there is no data folder there" in missing
    run(elsewhere, "index", str(project / "sub"), "--kb", "notes", "--dry-run")
    assert not (elsewhere / ".kbgraph").exists()  # looking leaves no folder for the folders below to find
    assert "notes" in run(elsewhere, "kb", "list", KBGRAPH_DATA_DIR=str(project / ".kbgraph")).stdout  # overrides
    assert "notes" in run(elsewhere, "--data-dir", str(project / ".kbgraph"), "kb", "list").stdout
