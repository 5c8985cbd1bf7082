"""``Engine``: the operations users run, composed of one class per concern (each a file of this
package) over the core's connections (kbgraph/engine/core.py)."""

from __future__ import annotations

from kbgraph.engine.chunks import Chunks
from kbgraph.engine.corrections import GraphCorrections
from kbgraph.engine.documents import Documents
from kbgraph.engine.files import Indexing
from kbgraph.engine.graph import GraphSettings
from kbgraph.engine.kbs import KnowledgeBases
from kbgraph.engine.queries import Queries


class Engine(KnowledgeBases, GraphSettings, GraphCorrections, Indexing, Documents, Chunks, Queries):
    """The embedded engine: metadata DB + document store + models, and the operations users run
    (knowledge bases, graph settings, indexing, documents, chunks, queries and dialogs).

    The CLI, the Celery tasks and the web app all drive kbgraph through this class, so that a
    knowledge base behaves the same whichever way it is used. It holds no state of its own beyond
    open connections and lazily built models.
    """
