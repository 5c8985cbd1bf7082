"""Where uploaded files live: a blob store behind one interface (``BlobStore``), a local folder or an
S3 bucket, chosen by the ``blob_store`` setting (``open_blob_store``). See ``kbgraph.blob.base``."""

from kbgraph.blob.base import (
    BlobError,
    BlobInfo,
    BlobNotFound,
    BlobStore,
    BlobUnavailable,
    document_key,
    kb_prefix,
)
from kbgraph.blob.documents import DocumentFile, document_file
from kbgraph.blob.factory import open_blob_store

__all__ = ["BlobError", "BlobInfo", "BlobNotFound", "BlobStore", "BlobUnavailable", "DocumentFile", "document_file",
           "document_key", "kb_prefix", "open_blob_store"]
