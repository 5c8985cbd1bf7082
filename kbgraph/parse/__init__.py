"""Files -> text -> chunks, and the full-text tokenizer shared by indexing and queries."""

from kbgraph.parse.chunker import TextSpan, chunk_sections, chunk_text
from kbgraph.parse.readers import (
    SUPPORTED_SUFFIXES,
    ParsedDocument,
    ParseError,
    iter_paths,
    read_bytes,
    read_document,
)
from kbgraph.parse.token_count import count_tokens
from kbgraph.parse.tokenize import token_string, tokenize, tokenize_query

__all__ = [
    "SUPPORTED_SUFFIXES",
    "ParseError",
    "ParsedDocument",
    "TextSpan",
    "chunk_sections",
    "chunk_text",
    "count_tokens",
    "iter_paths",
    "read_bytes",
    "read_document",
    "token_string",
    "tokenize",
    "tokenize_query",
]
