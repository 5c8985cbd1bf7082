"""What the web app holds for its lifetime: engines (one per tenant over shared connections), the
Celery app it sends tasks with, and the blob store uploads are kept in."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import IO

from flask import current_app

from kbgraph.blob import BlobError, BlobStore, document_key, kb_prefix
from kbgraph.engine import Engine
from kbgraph.chat.models import ModelCatalog
from kbgraph.config import Settings
from kbgraph.meta import Document, KnowledgeBase, MetaDB
from task_executor.celery_app import KBCelery
from task_executor.engines import EnginePool
from task_executor.repair import schedule_at_start
from task_executor.submit import celery_for
from web.uploads import clean_upload_debris, store_upload

EXTENSION = "kbgraph"

log = logging.getLogger(__name__)


@dataclass
class Services:
    settings: Settings
    pool: EnginePool
    celery: KBCelery
    models: ModelCatalog = field(init=False)  # the chat models assistants may name

    def __post_init__(self) -> None:
        self.models = ModelCatalog(self.settings)

    @classmethod
    def open(cls, settings: Settings, celery: KBCelery | None = None) -> "Services":
        opened = cls(settings, EnginePool(settings), celery or celery_for(settings))
        # files of uploads a crash cut short; one silent for a request's whole time limit is dead
        try:
            clean_upload_debris(opened.blobs, opened.meta, older_than=settings.web_timeout)
        except BlobError as exc:  # the server still starts: /ready says what is wrong
            log.error("uploads left by a crash were not cleaned up: %s", exc)
        # graph phases a failure left unfinished are refreshed by the workers (kbgraph/index/repair.py)
        schedule_at_start(opened.celery, opened.meta)
        return opened

    @property
    def meta(self) -> MetaDB:
        return self.pool.meta

    def engine(self, tenant: str) -> Engine:
        return self.pool.engine(tenant)

    @property
    def blobs(self) -> BlobStore:
        return self.pool.blobs

    def store_upload(self, kb: KnowledgeBase, name: str, stream: IO[bytes], kind: str) -> Document:
        """Keep an uploaded file and register it (crash-safe; see web.uploads)."""
        return store_upload(self.settings, self.meta, self.blobs, kb, name, stream, kind)

    def delete_document_file(self, kb_id: str, doc_id: str) -> None:
        """Remove a deleted document's file; one the store cannot delete now is left to the debris
        sweep of the next start (no row points at it any more)."""
        try:
            self.blobs.delete(document_key(kb_id, doc_id))
        except BlobError as exc:
            log.warning("the file of deleted document %s stays until the next start's sweep: %s", doc_id, exc)

    def delete_kb_files(self, kb_id: str) -> None:
        """Remove a deleted knowledge base's files (left to the next start's sweep if the store fails)."""
        try:
            self.blobs.delete_prefix(kb_prefix(kb_id))
        except BlobError as exc:
            log.warning("the files of deleted knowledge base %s stay until the next start's sweep: %s", kb_id, exc)

    def close(self) -> None:
        self.pool.close()


def services() -> Services:
    return current_app.extensions[EXTENSION]
