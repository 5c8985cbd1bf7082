"""The metadata database's Alembic migrations: ``env.py`` (how Alembic runs them inside kbgraph) and
``versions/`` (one module per revision, the first equal to the schema ``create_all`` made before
migrations existed). ``kbgraph.meta.migrate`` runs them."""
