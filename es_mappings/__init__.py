"""Elasticsearch index settings and mappings (JSON), shipped as package data for kbgraph.store.elastic."""

from pathlib import Path

INDEX_DEFINITION = Path(__file__).resolve().parent / "index.json"
