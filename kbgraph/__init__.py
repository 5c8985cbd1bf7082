"""kbgraph: a knowledge-graph (GraphRAG) plugin for knowledge bases."""

__version__ = "0.1.0"
