"""Files -> plain text, one reader per format.

Every failure a user can cause (wrong type, corrupt or encrypted file, binary junk, nothing to
index) surfaces as ``ParseError`` with a message naming the file, so an upload or an indexing run
can report it as is instead of a traceback.

The modules: document.py (``ParsedDocument``, ``ParseError``), formats.py (the suffixes read and
the checks every read starts with), dispatch.py (``read_document``, ``read_bytes``: the reader a
suffix chooses), paths.py (``iter_paths``, ``walk_folder``), and one module per family of formats: text.py (plain
text and Markdown, decoding), html.py, pdf.py, office.py (DOCX, XLSX, XLS), slides.py (PPTX) and
structured.py (CSV, JSON, JSONL).
"""

from kbgraph.parse.readers.dispatch import read_bytes, read_document
from kbgraph.parse.readers.document import ParsedDocument, ParseError
from kbgraph.parse.readers.formats import DEFAULT_MAX_BYTES, SUPPORTED_SUFFIXES
from kbgraph.parse.readers.paths import Unwalked, iter_paths, walk_folder

__all__ = [
    "ParseError",
    "ParsedDocument",
    "SUPPORTED_SUFFIXES",
    "DEFAULT_MAX_BYTES",
    "read_document",
    "read_bytes",
    "iter_paths",
    "walk_folder",
    "Unwalked",
]
