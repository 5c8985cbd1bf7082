"""The blob store the settings select (``blob_store``): the local folder, or an S3 bucket. The S3
store (and boto3 with it) is imported only when it is chosen, so the embedded default stays light."""

from __future__ import annotations

from kbgraph.blob.base import BlobStore
from kbgraph.blob.local import LocalBlobStore
from kbgraph.config import ConfigError, Settings


def open_blob_store(settings: Settings) -> BlobStore:
    """The blob store of ``settings``; nothing is contacted yet (see ``BlobStore.check``)."""
    if settings.blob_store == "local":
        return LocalBlobStore(settings.blob_path)
    if settings.blob_store == "s3":
        from kbgraph.blob.s3 import S3BlobStore

        return S3BlobStore(settings)
    raise ConfigError(f"setting 'blob_store' is {settings.blob_store!r}; choose 'local' or 's3'")


__all__ = ["open_blob_store"]
