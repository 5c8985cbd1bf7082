"""The `kbgraph` command (the console script `kbgraph = "kbgraph.cli:main"`).

`main` is the root group (root.py: --data-dir, --config, and how commands open the engine, fail
and exit); each command group lives in a module of its own and registers on `main` when imported,
which is why this file imports them all: kb.py, index.py, docs.py, query.py (query and chat),
graph.py, corrections.py (graph corrections and curated imports), store.py (Elasticsearch indices),
config.py, demo.py, mcp.py (the MCP server). How they print is output.py's.
"""

from kbgraph.cli import config, corrections, demo, docs, graph, index, kb, mcp, query, store  # noqa: F401  (they register their commands)
from kbgraph.cli.root import main

__all__ = ["main"]
