"""kbgraph's web service: a Flask app speaking the RAGFlow-compatible REST API subset."""

from web.app import create_app

__all__ = ["create_app"]
