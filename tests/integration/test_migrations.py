"""Schema migrations (kbgraph/meta/migrate.py), for real on SQLite and PostgreSQL: the migrated schema
equals the models, a database made by create_all is adopted with its rows, a database at the
previous revision with data in it is upgraded without losing any, a newer or foreign database is
refused, and processes upgrading one fresh database at once never race."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect, select, text

from conftest import scratch_postgres_database
from kbgraph.meta import SCHEMA_HEAD, MetaDB, MetaError
from kbgraph.meta import models as m
from kbgraph.meta.database import connect
from kbgraph.meta.migrate import INITIAL_TABLES, alembic_config, current_revision, upgrade_schema

H = "c" * 64


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'meta.db'}"
        return
    with scratch_postgres_database() as made:
        yield made


@pytest.fixture
def engine(url: str) -> Iterator[Engine]:
    made = connect(url)
    yield made
    made.dispose()


def _differences(engine: Engine) -> list[object]:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with engine.connect() as conn:
        return list(compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), m.Base.metadata))


def _revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return current_revision(conn)


def test_head_is_the_newest_revision_and_the_initial_tables_are_the_first_revisions() -> None:
    from alembic.script import ScriptDirectory

    from kbgraph.meta.migrations.versions import r0001_initial

    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_heads() == [SCHEMA_HEAD]
    assert r0001_initial.TABLES == INITIAL_TABLES


def test_the_migrated_schema_equals_the_models(engine: Engine) -> None:
    assert upgrade_schema(engine) is None  # it was empty
    assert _revision(engine) == SCHEMA_HEAD
    assert _differences(engine) == []
    assert upgrade_schema(engine) == SCHEMA_HEAD  # a second run finds it done


def _fill(meta: MetaDB) -> dict[str, str]:
    """A tenant's worth of rows in every table that has a parent: what an upgrade must keep."""
    meta.ensure_tenant("acme")
    kb = meta.create_kb("acme", "Harbor records", chunk_tokens=256, chunk_overlap=16)
    doc = meta.create_document(kb.id, "treaty.txt", "/uploads/treaty", 48, H)
    task = meta.create_task(kb.id, "index", doc_id=doc.id)
    key, _ = meta.create_api_key("acme", "ci")
    chat = meta.create_chat("acme", "ask", kb_ids=[kb.id])
    return {"kb": kb.id, "doc": doc.id, "task": task.id, "key": key.token_hash, "chat": chat.id}


def _check_filled(meta: MetaDB, ids: dict[str, str]) -> None:
    kb = meta.get_kb("acme", ids["kb"])
    assert (kb.name, kb.chunk_tokens, kb.chunk_overlap) == ("Harbor records", 256, 16)
    doc = meta.get_document(kb.id, ids["doc"])
    assert (doc.name, doc.size, doc.content_hash, doc.location) == ("treaty.txt", 48, H, "/uploads/treaty")
    assert meta.get_task(kb.id, ids["task"]).doc_id == ids["doc"]
    assert [k.token_hash for k in meta.list_api_keys("acme")] == [ids["key"]]
    assert meta.get_chat("acme", ids["chat"]).kb_ids == [ids["kb"]]


def _back_to_the_initial_schema(engine: Engine) -> None:
    """Undo what revisions after the initial one added, so that create_all's database is the one
    kbgraph made before migrations existed (the rows stay)."""
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE web_session"))  # r0002
        conn.execute(text("DROP TABLE model_provider"))
        conn.execute(text("ALTER TABLE document DROP COLUMN run_id"))


def test_a_database_made_by_create_all_is_adopted_with_its_rows(url: str, engine: Engine) -> None:
    m.Base.metadata.create_all(engine)  # what kbgraph did before migrations existed
    with MetaDB(engine) as before:
        ids = _fill(before)
    _back_to_the_initial_schema(engine)
    assert _revision(engine) is None
    with MetaDB.open(url) as meta:  # stamped, not made again
        _check_filled(meta, ids)
    assert _revision(engine) == SCHEMA_HEAD
    assert _differences(engine) == []


_NEXT_REVISION = '''
"""A test-only revision after the newest real one: a column on documents filled from their rows,
and a knowledge-base column added by copying the table (SQLite batch mode: the old table is dropped,
which must not cascade into its documents and tasks)."""

import sqlalchemy as sa
from alembic import op

revision = "test_next"
down_revision = {head!r}
branch_labels = None
depends_on = None


def _copy():  # SQLite copies a table for most changes; PostgreSQL alters it in place
    return "always" if op.get_bind().dialect.name == "sqlite" else "auto"


def upgrade():
    with op.batch_alter_table("document") as batch:
        batch.add_column(sa.Column("size_class", sa.String(8), nullable=False, server_default="small"))
    op.execute("UPDATE document SET size_class = 'large' WHERE size > 40")
    with op.batch_alter_table("knowledge_base", recreate=_copy()) as batch:
        batch.add_column(sa.Column("archived", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade():
    with op.batch_alter_table("knowledge_base", recreate=_copy()) as batch:
        batch.drop_column("archived")
    with op.batch_alter_table("document") as batch:
        batch.drop_column("size_class")
'''


def test_a_database_at_the_previous_revision_is_upgraded_with_its_data(engine: Engine, tmp_path: Path) -> None:
    upgrade_schema(engine)  # the previous schema: the real newest revision
    with MetaDB(engine) as meta:
        ids = _fill(meta)
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "test_next.py").write_text(textwrap.dedent(_NEXT_REVISION).replace("{head!r}", repr(SCHEMA_HEAD)))
    assert upgrade_schema(engine, extra_versions=[versions]) == SCHEMA_HEAD
    assert _revision(engine) == "test_next"
    with engine.connect() as conn:
        assert conn.execute(text("SELECT size_class FROM document")).scalars().all() == ["large"]
        assert conn.execute(text("SELECT archived FROM knowledge_base")).scalars().all() == [False]
        assert "archived" in {c["name"] for c in inspect(conn).get_columns("knowledge_base")}
    with MetaDB(engine) as meta:  # every row survived the copy of its parent table
        _check_filled(meta, ids)
        meta.delete_kb("acme", ids["kb"])  # and the foreign keys still cascade
    with engine.connect() as conn:
        assert conn.execute(select(m.Document.id)).all() == [] and conn.execute(select(m.Task.id)).all() == []


def test_a_database_from_a_newer_kbgraph_is_refused(url: str, engine: Engine) -> None:
    upgrade_schema(engine)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'zz_newer'"))
    with pytest.raises(MetaError, match="'zz_newer', which this kbgraph does not know.*newer kbgraph"):
        MetaDB.open(url)


def test_a_database_with_only_some_of_the_tables_is_refused(url: str, engine: Engine) -> None:
    m.Base.metadata.tables["tenant"].create(engine)
    with pytest.raises(MetaError, match="cannot be adopted"):
        MetaDB.open(url)


_UPGRADE = """
import sys
import alembic.command, alembic.runtime.migration, alembic.script  # loaded before the start: no head start
from kbgraph.meta import upgrade_database
sys.stdin.readline()  # every process connects at the same moment
upgrade_database(sys.argv[1])
print("ok")
"""


@pytest.mark.parametrize("rounds", [3])
def test_processes_upgrading_one_fresh_database_at_once_never_race(url: str, rounds: int) -> None:
    for attempt in range(rounds):
        if attempt:  # a fresh database again
            _drop_everything(url)
        children = [subprocess.Popen([sys.executable, "-c", _UPGRADE, url], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
        for child in children:  # they have imported kbgraph by now or very soon: release them together
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        answers = [child.communicate(timeout=120) for child in children]
        assert [(child.returncode, out.strip()) for child, (out, _) in zip(children, answers)] == [(0, "ok")] * 6, \
            [err[-2000:] for _, err in answers]
        with MetaDB.open(url) as meta:
            assert meta.list_kbs("default") == []


def _drop_everything(url: str) -> None:
    engine = connect(url)
    try:
        m.Base.metadata.drop_all(engine)
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
    finally:
        engine.dispose()
