"""The metadata database, run for real on SQLite (a temp file) and PostgreSQL (a throwaway database)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from conftest import scratch_postgres_database
from kbgraph.meta import DEFAULT_TENANT, AlreadyExists, GraphConfig, MetaDB, MetaError, NotFound
from kbgraph.meta import models as m

H1 = "a" * 64
H2 = "b" * 64


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this module, dropped afterwards."""
    with scratch_postgres_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetaDB]:
    if request.param == "sqlite":
        meta = MetaDB.open(f"sqlite:///{tmp_path / 'data' / 'meta.db'}")
        yield meta
        meta.close()
        return
    url = request.getfixturevalue("postgres_url")
    meta = MetaDB.open(url)
    try:
        yield meta
    finally:
        m.Base.metadata.drop_all(meta.engine)  # the next test starts from empty tables...
        with meta.engine.begin() as conn:  # ...made again by the migrations
            conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
        meta.close()


def _count(db: MetaDB, table: type[m.Base]) -> int:
    with db.engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(table)) or 0)


def test_kb_crud(db: MetaDB) -> None:
    kb = db.create_kb(
        DEFAULT_TENANT, "  Demo ", description="d", embedding_model="m", chunk_tokens=256, chunk_overlap=32
    )
    assert (kb.name, kb.description, kb.embedding_model) == ("Demo", "d", "m")
    assert (kb.chunk_tokens, kb.chunk_overlap) == (256, 32)
    assert kb.graph == GraphConfig() and kb.created == kb.updated and len(kb.id) == 32
    assert db.get_kb(DEFAULT_TENANT, kb.id) == kb
    assert db.get_kb_by_name(DEFAULT_TENANT, "DEMO") == kb
    assert db.get_kb_by_name(DEFAULT_TENANT, "other") is None

    second = db.create_kb(DEFAULT_TENANT, "second")
    assert [k.name for k in db.list_kbs(DEFAULT_TENANT)] == ["Demo", "second"]
    assert [k.name for k in db.list_kbs(DEFAULT_TENANT, offset=1, limit=5)] == ["second"]

    updated = db.update_kb(DEFAULT_TENANT, kb.id, name="demo", description="", chunk_overlap=0,
                           graph={"enabled": True, "method": "general"}, extra={"permission": "me"})
    assert (updated.name, updated.description, updated.chunk_overlap) == ("demo", "", 0)
    assert updated.graph.enabled and updated.graph.method == "general" and updated.extra == {"permission": "me"}
    assert updated.embedding_model == "m" and updated.updated >= kb.updated

    db.delete_kb(DEFAULT_TENANT, kb.id)
    with pytest.raises(NotFound):
        db.get_kb(DEFAULT_TENANT, kb.id)
    with pytest.raises(NotFound):
        db.delete_kb(DEFAULT_TENANT, kb.id)
    assert db.list_kbs(DEFAULT_TENANT) == [second]


def test_duplicate_names(db: MetaDB) -> None:
    kb = db.create_kb(DEFAULT_TENANT, "Papers")
    other = db.create_kb(DEFAULT_TENANT, "Notes")
    with pytest.raises(AlreadyExists, match="already exists"):
        db.create_kb(DEFAULT_TENANT, "papers")
    with pytest.raises(AlreadyExists):
        db.update_kb(DEFAULT_TENANT, other.id, name="PAPERS")
    assert db.update_kb(DEFAULT_TENANT, kb.id, name="PAPERS").name == "PAPERS"  # renaming itself is fine
    db.ensure_tenant("t2")
    assert db.create_kb("t2", "papers").tenant_id == "t2"

    a, _ = db.upsert_document(kb.id, "a.txt", "/a", 1, H1)
    db.upsert_document(kb.id, "b.txt", "/b", 1, H2)
    with pytest.raises(AlreadyExists):
        db.update_document(kb.id, a.id, name="b.txt")
    assert db.update_document(kb.id, a.id, name="A.txt", enabled=False).name == "A.txt"


def test_validation(db: MetaDB) -> None:
    bad_graphs = [
        {"method": "fancy"},
        {"entity_types": []},
        {"entity_types": "person,org"},
        {"entity_types": ["person", 3]},
        {"max_gleanings": -1},
        {"unknown": True},
    ]
    for graph in bad_graphs:
        with pytest.raises(MetaError, match="invalid graph settings"):
            db.create_kb(DEFAULT_TENANT, "x", graph=graph)
    for tokens, overlap in [(0, 0), (100, 100), (100, -1), (10_000, 10)]:
        with pytest.raises(MetaError, match="chunk_"):
            db.create_kb(DEFAULT_TENANT, "x", chunk_tokens=tokens, chunk_overlap=overlap)
    with pytest.raises(MetaError, match="name"):
        db.create_kb(DEFAULT_TENANT, "   ")
    with pytest.raises(NotFound, match="tenant"):
        db.create_kb("nobody", "x")
    assert db.list_kbs(DEFAULT_TENANT) == []

    kb = db.create_kb(DEFAULT_TENANT, "x", chunk_tokens=128, chunk_overlap=16)
    with pytest.raises(MetaError, match="chunk_overlap"):
        db.update_kb(DEFAULT_TENANT, kb.id, chunk_tokens=16)
    with pytest.raises(MetaError, match="sha256"):
        db.upsert_document(kb.id, "a.txt", "/a", 1, "not-a-hash")
    doc, _ = db.upsert_document(kb.id, "a.txt", "/a", 1, H1)
    with pytest.raises(MetaError, match="status"):
        db.set_document_status(doc.id, "finished")
    with pytest.raises(MetaError, match="progress"):
        db.set_document_status(doc.id, "running", progress=1.5)
    with pytest.raises(MetaError, match="kind"):
        db.create_task(kb.id, "")
    with pytest.raises(NotFound):
        db.upsert_document("no-such-kb", "a.txt", "/a", 1, H1)


def test_graph_config_round_trip(db: MetaDB) -> None:
    graph = GraphConfig(enabled=True, method="light", entity_types=["person", "org", "person"],
                        resolution=True, community=True, max_gleanings=3)
    assert graph.entity_types == ("person", "org")  # de-duplicated, order kept
    kb = db.create_kb(DEFAULT_TENANT, "g", graph=graph, extra={"parser_config": {"graphrag": {"use_graphrag": True}}})
    reopened = MetaDB.open(db.engine.url.render_as_string(hide_password=False))
    try:
        loaded = reopened.get_kb(DEFAULT_TENANT, kb.id)
    finally:
        reopened.close()
    assert loaded.graph == graph and loaded.extra == kb.extra
    assert loaded.model_dump(mode="json")["graph"] == {
        "enabled": True, "method": "light", "entity_types": ["person", "org"],
        "resolution": True, "community": True, "max_gleanings": 3,
    }


def test_unchanged_content_detection(db: MetaDB) -> None:
    kb = db.create_kb(DEFAULT_TENANT, "docs")
    doc, changed = db.upsert_document(kb.id, "a.txt", "/src/a.txt", 10, H1)
    assert changed and doc.status == "pending" and doc.content_hash == H1

    db.set_document_status(doc.id, "done", chunk_count=3, token_count=30)
    db.set_document_graph_state(doc.id, extracted=True, graph_version=4)
    same, changed = db.upsert_document(kb.id, "a.txt", "/moved/a.txt", 10, H1)
    assert not changed and same.id == doc.id
    assert (same.status, same.chunk_count, same.extracted, same.graph_version) == ("done", 3, True, 4)
    assert same.location == "/moved/a.txt"

    new, changed = db.upsert_document(kb.id, "a.txt", "/moved/a.txt", 12, H2)
    assert changed and new.id == doc.id
    assert (new.status, new.progress, new.chunk_count, new.token_count, new.extracted, new.graph_version) == (
        "pending", 0.0, 0, 0, False, 0)

    # a run that failed (or was cut short) is re-run even though the bytes are the same
    db.set_document_status(doc.id, "failed", error="boom")
    _, changed = db.upsert_document(kb.id, "a.txt", "/moved/a.txt", 12, H2)
    assert changed
    assert db.count_documents(kb.id) == 1


def test_document_status_transitions(db: MetaDB) -> None:
    kb = db.create_kb(DEFAULT_TENANT, "docs")
    doc, _ = db.upsert_document(kb.id, "a.txt", "/a", 1, H1)
    assert doc.started is None and doc.finished is None

    running = db.set_document_status(doc.id, "running", progress=0.1, message="parsing")
    assert running.started is not None and running.finished is None and running.message == "parsing"
    again = db.set_document_status(doc.id, "running", progress=0.5)
    assert again.started == running.started and again.progress == 0.5 and again.message == "parsing"

    failed = db.set_document_status(doc.id, "failed", error="LLM timed out", message="extract failed")
    assert failed.finished is not None and failed.error == "LLM timed out" and failed.progress == 0.5

    retry = db.set_document_status(doc.id, "running", progress=0.0)
    assert retry.error is None and retry.finished is None and retry.started is not None

    done = db.set_document_status(doc.id, "done", chunk_count=7, token_count=700)
    assert (done.status, done.progress, done.chunk_count, done.token_count) == ("done", 1.0, 7, 700)
    assert done.finished is not None and done.finished >= done.started  # type: ignore[operator]
    assert db.get_document(kb.id, doc.id) == done

    other, _ = db.upsert_document(kb.id, "b.txt", "/b", 1, H2)
    db.set_document_status(other.id, "done", chunk_count=2, token_count=50)
    counts = db.kb_counts(kb.id)
    assert (counts.documents, counts.chunks, counts.tokens) == (2, 9, 750)

    reset = db.set_document_status(doc.id, "pending")
    assert (reset.progress, reset.started, reset.finished) == (0.0, None, None)
    with pytest.raises(NotFound):
        db.set_document_status("missing", "running")



def test_a_stopped_document_ignores_the_workers_late_progress_until_it_is_parsed_again(db: MetaDB) -> None:
    """The user's stop shows at once; the worker notices it only at its next check."""
    from kbgraph.meta import DocumentStatus

    kb = db.create_kb(DEFAULT_TENANT, "docs")
    doc, _ = db.upsert_document(kb.id, "a.txt", "/a", 1, H1)
    other, _ = db.upsert_document(kb.id, "b.txt", "/b", 1, H2)
    for d in (doc, other):
        db.set_document_status(d.id, "running", progress=0.2, message="parse 2/10")
    db.set_document_status(doc.id, "cancelled", progress=0.0, message="cancelled by request")

    late = db.set_document_status(doc.id, "running", progress=0.4, message="parse 4/10")
    assert (late.status, late.progress, late.message) == ("cancelled", 0.0, "cancelled by request")
    written = db.set_document_statuses([DocumentStatus(doc.id, "running", progress=0.5, message="indexing"),
                                        DocumentStatus(other.id, "running", progress=0.5, message="indexing")])
    assert written == {doc.id, other.id}  # neither vanished
    assert db.get_document(kb.id, doc.id).status == "cancelled"
    assert (db.get_document(kb.id, other.id).status, db.get_document(kb.id, other.id).progress) == ("running", 0.5)

    # the worker's own end of the run and a new parse still get through
    assert db.set_document_status(doc.id, "cancelled", message="cancelled", chunk_count=0).message == "cancelled"
    db.set_document_status(doc.id, "pending")
    again = db.set_document_status(doc.id, "running", progress=0.0, message="Task is queued...")
    assert (again.status, again.message) == ("running", "Task is queued...")

def test_list_and_find_documents(db: MetaDB) -> None:
    kb = db.create_kb(DEFAULT_TENANT, "docs")
    docs = [db.upsert_document(kb.id, f"d{i}.txt", f"/d{i}", i, H1)[0] for i in range(5)]
    for d in docs[:2]:
        db.set_document_status(d.id, "done")
    listed = db.list_documents(kb.id)
    assert {d.id for d in listed} == {d.id for d in docs}
    pages = db.list_documents(kb.id, offset=0, limit=2) + db.list_documents(kb.id, offset=2, limit=2) \
        + db.list_documents(kb.id, offset=4, limit=2)
    assert [d.id for d in pages] == [d.id for d in listed]
    assert [d.id for d in db.list_documents(kb.id, newest_first=True)] == [d.id for d in reversed(listed)]
    assert {d.id for d in db.list_documents(kb.id, status="done")} == {docs[0].id, docs[1].id}
    assert db.count_documents(kb.id, status="pending") == 3

    assert db.find_document(kb.id, docs[3].id) == docs[3]
    assert db.find_document(kb.id, "d4.txt") == docs[4]
    assert db.find_document(kb.id, "nope") is None

    db.delete_document(kb.id, docs[0].id)
    assert db.find_document(kb.id, "d0.txt") is None
    with pytest.raises(NotFound):
        db.delete_document(kb.id, docs[0].id)


def test_web_sessions_end_at_sign_out_and_with_age(db: MetaDB) -> None:
    import time

    user = db.create_user("s@example.com", "hash", "t-sessions")
    day = 86_400_000
    token = db.create_web_session(user.id, day)
    assert db.user_for_web_session(token, day).id == user.id
    assert db.user_for_web_session(token + "x", day) is None
    time.sleep(0.01)
    assert db.user_for_web_session(token, 1) is None  # older than the lifetime asked for
    other = db.create_web_session(user.id, 1)  # creating one removes the ones past the lifetime
    assert db.user_for_web_session(token, day) is None and db.user_for_web_session(other, day).id == user.id
    assert db.delete_web_session(other) and db.user_for_web_session(other, day) is None
    db.create_web_session(user.id, day), db.create_web_session(user.id, day)
    assert db.delete_user_web_sessions(user.id) == 2


def test_a_document_row_belongs_to_its_newest_run(db: MetaDB) -> None:
    from kbgraph.meta import DocumentStatus

    kb = db.create_kb(DEFAULT_TENANT, "runs")
    doc, _ = db.upsert_document(kb.id, "a.txt", "/a", 1, H1)
    assert db.set_document_status(doc.id, "pending", run_id="old").run_id == "old"
    db.set_document_status(doc.id, "running", progress=0.9, message="extract 9/10", run_id="old")
    db.set_document_status(doc.id, "cancelled", message="cancelled by request")  # the user: no run named
    fresh = db.set_document_status(doc.id, "pending", run_id="new")  # parsed again
    assert (fresh.run_id, fresh.status, fresh.progress) == ("new", "pending", 0.0)
    db.set_document_status(doc.id, "running", progress=0.1, message="parse 1/3", run_id="new")
    late = db.set_document_status(doc.id, "cancelled", progress=0.9, message="cancelled", run_id="old")
    assert (late.status, late.progress, late.message) == ("running", 0.1, "parse 1/3")
    db.set_document_statuses([DocumentStatus(doc.id, "done", message="old done", chunk_count=9, run_id="old")])
    assert db.get_document(kb.id, doc.id).status == "running"
    db.set_document_statuses([DocumentStatus(doc.id, "done", message="new done", chunk_count=3, run_id="new")])
    done = db.get_document(kb.id, doc.id)
    assert (done.status, done.message, done.chunk_count) == ("done", "new done", 3)


def test_tasks_and_cancel_flags(db: MetaDB) -> None:
    kb = db.create_kb(DEFAULT_TENANT, "docs")
    doc, _ = db.upsert_document(kb.id, "a.txt", "/a", 1, H1)
    parse = db.create_task(kb.id, "parse", doc.id)
    assert (parse.status, parse.cancel_requested, parse.attempts) == ("pending", False, 0)

    running = db.update_task(parse.id, status="running", add_attempts=1, message="chunking")
    assert running.started is not None and running.attempts == 1
    step = db.update_task(parse.id, progress=0.4, add_llm_calls=2, add_prompt_tokens=100, add_completion_tokens=20)
    assert (step.status, step.progress, step.llm_calls, step.prompt_tokens, step.completion_tokens) == (
        "running", 0.4, 2, 100, 20)
    assert not db.is_cancel_requested(parse.id)

    cancelled = db.request_cancel(parse.id)
    assert cancelled.cancel_requested and cancelled.status == "running"  # the worker stops it
    assert db.is_cancel_requested(parse.id)
    stopped = db.update_task(parse.id, status="cancelled")
    assert stopped.finished is not None

    queued = db.create_task(kb.id, "extract", doc.id)
    now_cancelled = db.request_cancel(queued.id)
    assert now_cancelled.status == "cancelled" and now_cancelled.finished is not None

    merge = db.create_task(kb.id, "merge")
    db.update_task(merge.id, status="done")
    assert not db.request_cancel(merge.id).cancel_requested  # finished work is left alone
    assert db.get_task(kb.id, merge.id).status == "done"

    open_ones = [db.create_task(kb.id, "parse", doc.id), db.create_task(kb.id, "extract", doc.id)]
    db.update_task(open_ones[1].id, status="running")
    assert db.request_cancel_document(kb.id, doc.id) == 2
    assert all(db.is_cancel_requested(t.id) for t in open_ones)

    assert [t.kind for t in db.list_tasks(kb.id, doc_id=doc.id)] == ["parse", "extract", "parse", "extract"]
    assert [t.id for t in db.list_tasks(kb.id, kind="merge")] == [merge.id]
    assert db.list_tasks(kb.id, newest_first=True, limit=1)[0].id == open_ones[1].id
    assert db.is_cancel_requested("no-such-task")  # a vanished task must stop
    with pytest.raises(NotFound):
        db.create_task(kb.id, "parse", "no-such-doc")


def test_cascade_delete(db: MetaDB) -> None:
    kb = db.create_kb(DEFAULT_TENANT, "docs")
    keep = db.create_kb(DEFAULT_TENANT, "keep")
    a, _ = db.upsert_document(kb.id, "a.txt", "/a", 1, H1)
    b, _ = db.upsert_document(kb.id, "b.txt", "/b", 1, H2)
    kept, _ = db.upsert_document(keep.id, "a.txt", "/a", 1, H1)
    ta = db.create_task(kb.id, "parse", a.id)
    tb = db.create_task(kb.id, "parse", b.id)
    db.create_task(kb.id, "merge")
    db.create_task(keep.id, "parse", kept.id)

    db.delete_document(kb.id, a.id)
    assert db.is_cancel_requested(ta.id) and not db.is_cancel_requested(tb.id)
    assert len(db.list_tasks(kb.id)) == 2

    db.delete_kb(DEFAULT_TENANT, kb.id)
    assert _count(db, m.Document) == 1 and _count(db, m.Task) == 1
    assert db.is_cancel_requested(tb.id)
    assert db.list_documents(keep.id) == [db.get_document(keep.id, kept.id)]


def test_tenant_isolation(db: MetaDB) -> None:
    db.ensure_tenant("alice")
    db.ensure_tenant("bob")
    assert db.ensure_tenant("alice").id == "alice"  # idempotent
    kb = db.create_kb("alice", "private")
    doc, _ = db.upsert_document(kb.id, "a.txt", "/a", 1, H1)
    task = db.create_task(kb.id, "parse", doc.id)
    bob_kb = db.create_kb("bob", "private")  # the same name in another tenant is fine

    assert [k.id for k in db.list_kbs("bob")] == [bob_kb.id]
    assert db.get_kb_by_name("bob", "private") == bob_kb
    with pytest.raises(NotFound):
        db.get_kb("bob", kb.id)
    with pytest.raises(NotFound):
        db.update_kb("bob", kb.id, name="mine")
    with pytest.raises(NotFound):
        db.delete_kb("bob", kb.id)
    with pytest.raises(NotFound):
        db.get_document(bob_kb.id, doc.id)
    with pytest.raises(NotFound):
        db.delete_document(bob_kb.id, doc.id)
    with pytest.raises(NotFound):
        db.get_task(bob_kb.id, task.id)
    assert db.find_document(bob_kb.id, doc.id) is None
    assert db.list_tasks(bob_kb.id) == []
    with pytest.raises(NotFound):
        db.create_chat("bob", "spy", kb_ids=[kb.id])
    assert db.get_kb("alice", kb.id).name == "private"


def test_api_keys_and_chats(db: MetaDB) -> None:
    db.ensure_tenant("alice")
    key, token = db.create_api_key("alice", "ci")
    assert db.tenant_for_api_key(token) == "alice" and token not in key.token_hash
    assert db.tenant_for_api_key(token + "x") is None
    assert db.list_api_keys("alice") == [key] and db.list_api_keys(DEFAULT_TENANT) == []
    assert not db.delete_api_key(DEFAULT_TENANT, key.token_hash)
    assert db.delete_api_key("alice", key.token_hash)
    assert db.tenant_for_api_key(token) is None

    kb1 = db.create_kb("alice", "one")
    kb2 = db.create_kb("alice", "two")
    chat = db.create_chat("alice", "helper", kb_ids=[kb1.id, kb2.id], system_prompt="be brief",
                          retrieval={"mode": "mix", "top_n": 8})
    assert db.get_chat("alice", chat.id) == chat and db.list_chats(DEFAULT_TENANT) == []
    changed = db.update_chat("alice", chat.id, retrieval={"mode": "kg"})
    assert changed.retrieval == {"mode": "kg"} and changed.kb_ids == [kb1.id, kb2.id]
    db.delete_kb("alice", kb1.id)
    assert db.get_chat("alice", chat.id).kb_ids == [kb2.id]
    with pytest.raises(NotFound):
        db.get_chat(DEFAULT_TENANT, chat.id)
    db.delete_chat("alice", chat.id)
    assert db.list_chats("alice") == []


def test_pruning_keeps_the_newest_finished_refreshes_and_every_unfinished_task(db: MetaDB) -> None:
    kb, other = db.create_kb(DEFAULT_TENANT, "docs"), db.create_kb(DEFAULT_TENANT, "other")
    doc, _ = db.upsert_document(kb.id, "a.txt", "/a", 1, H1)
    finished = []
    for status in ("done", "failed", "done", "cancelled", "done"):
        task = db.create_task(kb.id, "refresh")
        db.update_task(task.id, status=status)
        finished.append(task.id)
    running = db.create_task(kb.id, "refresh")
    db.update_task(running.id, status="running")
    pending = db.create_task(kb.id, "refresh")
    parse = db.create_task(kb.id, "parse", doc.id)
    db.update_task(parse.id, status="done")
    elsewhere = db.create_task(other.id, "refresh")
    db.update_task(elsewhere.id, status="done")

    assert db.prune_finished_tasks(kb.id, "refresh", keep=2) == 3
    left = {t.id for t in db.list_tasks(kb.id)}
    assert left == {*finished[-2:], running.id, pending.id, parse.id}
    assert [t.id for t in db.list_tasks(other.id)] == [elsewhere.id]
    assert db.prune_finished_tasks(kb.id, "refresh", keep=2) == 0
    with pytest.raises(MetaError, match="keep"):
        db.prune_finished_tasks(kb.id, "refresh", keep=-1)


def test_concurrent_task_updates(db: MetaDB) -> None:
    kb = db.create_kb(DEFAULT_TENANT, "docs")
    doc, _ = db.upsert_document(kb.id, "a.txt", "/a", 1, H1)
    task = db.create_task(kb.id, "extract", doc.id)
    db.update_task(task.id, status="running")
    rounds = 40
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def worker(n: int) -> None:
        try:
            start.wait()
            for i in range(rounds):
                db.update_task(task.id, progress=i / rounds, message=f"worker {n}",
                               add_llm_calls=1, add_prompt_tokens=10, add_completion_tokens=n)
                db.set_document_status(doc.id, "running", progress=i / rounds, message=f"worker {n}")
        except BaseException as exc:  # surfaced below; a thread's exception would be lost
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    final = db.get_task(kb.id, task.id)
    assert (final.llm_calls, final.prompt_tokens, final.completion_tokens) == (2 * rounds, 20 * rounds, 3 * rounds)
    assert final.status == "running" and db.get_document(kb.id, doc.id).status == "running"


def test_assistants_and_sessions(db: MetaDB) -> None:
    for tenant in ("alice", "bob"):
        db.ensure_tenant(tenant)
    kb = db.create_kb("alice", "docs")
    helper = db.create_assistant("alice", " Helper ", kb_ids=[kb.id], llm_id="m", llm_setting={"temperature": 0.1},
                                 prompt_config={"system": "be brief {knowledge}", "prologue": "Hi"}, top_n=3)
    assert (helper.name, helper.kb_ids, helper.top_n, helper.deleted) == ("Helper", [kb.id], 3, False)
    assert db.find_assistant("alice", "HELPER") == helper and db.find_assistant("bob", "helper") is None
    with pytest.raises(NotFound):
        db.create_assistant("bob", "spy", kb_ids=[kb.id])  # another tenant's knowledge base is unknown
    with pytest.raises(MetaError, match="unknown chat setting"):
        db.create_assistant("alice", "x", owner="bob")
    changed = db.update_assistant("alice", helper.id, name="Guide", prompt_config={"system": "x", "use_kg": False})
    assert changed.name == "Guide" and changed.prompt_config == {"system": "x", "use_kg": False}
    assert changed.llm_setting == {"temperature": 0.1}

    session = db.create_session("alice", helper.id, "talk", messages=[{"role": "assistant", "content": "Hi"}])
    turn = [{"role": "user", "content": "q", "id": "m1"}, {"role": "assistant", "content": "a", "id": "m1"}]
    kept = db.append_turn("alice", helper.id, session.id, turn, {"message_id": "m1", "reference": {"total": 0}})
    assert [m["role"] for m in kept.messages] == ["assistant", "user", "assistant"]
    assert kept.references == [{"message_id": "m1", "reference": {"total": 0}}]
    assert db.get_session("alice", helper.id, session.id) == kept
    with pytest.raises(NotFound):
        db.get_session("bob", helper.id, session.id)
    assert db.rename_session("alice", helper.id, session.id, "renamed").name == "renamed"
    assert [s.id for s in db.list_sessions("alice", helper.id)] == [session.id]

    db.delete_assistant("alice", helper.id)  # soft: gone from every lookup, its row kept
    assert db.list_assistants("alice") == [] and db.find_assistant("alice", "guide") is None
    for call in (lambda: db.get_assistant("alice", helper.id), lambda: db.list_sessions("alice", helper.id),
                 lambda: db.delete_assistant("alice", helper.id)):
        with pytest.raises(NotFound):
            call()
    assert _count(db, m.Assistant) == 1 and _count(db, m.ChatSession) == 1


def test_a_server_database_without_its_driver_names_the_extra_to_install() -> None:
    # pg8000 is a PostgreSQL driver kbgraph never installs: opening fails on the driver, clearly,
    # with the password hidden, before any connection is tried
    with pytest.raises(MetaError, match=r'driver .pg8000.*pip install "kbgraph\[postgres\]"') as caught:
        MetaDB.open("postgresql+pg8000://kb:secret@127.0.0.1:1/kb")
    assert "secret" not in str(caught.value)
