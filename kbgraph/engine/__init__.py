"""The engine: metadata DB + document store + models, and the operations users run, shared by the
CLI, the workers and the web app. One module per concern:

- ``core``: connections, tenant, per-knowledge-base lock, knowledge bases by name, the indexing context
- ``models``: the embedder and chat models a knowledge base runs with
- ``kbs``: knowledge bases created, re-embedded, deleted
- ``graph``: graph settings (``GraphChange``), the graph built, rebuilt, dropped, refreshed
- ``files``: files and folders indexed (``IndexReport``), one document's bytes, the cost estimate
- ``documents``: documents listed, deleted, reset, disabled, renamed
- ``chunks``: chunks listed and edited by hand
- ``queries``: retrieval and dialogs
- ``errors``: ``KBGraphError`` and ``did_you_mean``

``Engine`` (``engine``) composes them. None imports the indexing pipeline (kbgraph.index) but in
the methods that index, so that a query never loads it.
"""

from kbgraph.engine.engine import Engine
from kbgraph.engine.errors import KBGraphError, did_you_mean
from kbgraph.engine.files import IndexReport
from kbgraph.engine.graph import GraphChange

__all__ = ["Engine", "GraphChange", "IndexReport", "KBGraphError", "did_you_mean"]
