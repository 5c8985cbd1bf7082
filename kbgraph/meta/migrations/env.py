"""How Alembic runs kbgraph's migrations: on the connection ``kbgraph.meta.migrate`` hands over (in
its transaction, under its lock), or on ``sqlalchemy.url`` when none is given (``db revision``).

Batch mode everywhere: SQLite cannot alter most of a table in place, so a revision's
``batch_alter_table`` copies the table there and alters it in place on PostgreSQL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from kbgraph.meta.models import Base


def _run(connection: object) -> None:
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True,
                      compare_type=True)
    with context.begin_transaction():  # none of its own when the caller's transaction is open
        context.run_migrations()


def main() -> None:
    if context.is_offline_mode():
        raise SystemExit("kbgraph runs its migrations online only (kbgraph-web db upgrade)")
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "")
    try:
        with engine.connect() as connection:
            _run(connection)
            connection.commit()
    finally:
        engine.dispose()


main()
