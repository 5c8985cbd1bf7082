"""The revisions of the metadata schema, oldest first (``r0001_initial.py``); each names the one it
follows (``down_revision``). A new one: ``kbgraph-web db revision -m "what changes"`` after editing
``kbgraph/meta/models.py``, then read what it wrote against the models."""
