"""What the web app holds for its lifetime: engines (one per tenant over shared connections), the
Celery app it sends tasks with, and where uploads are kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from flask import current_app

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
        clean_upload_debris(settings.data_dir / "uploads", opened.meta, older_than=settings.web_timeout)
        # graph phases a failure left unfinished are refreshed by the workers (kbgraph/index/repair.py)
        schedule_at_start(opened.celery, opened.meta)
        return opened

    @property
    def meta(self) -> MetaDB:
        return self.pool.meta

    def engine(self, tenant: str) -> Engine:
        return self.pool.engine(tenant)

    def upload_dir(self, kb_id: str) -> Path:
        return self.settings.data_dir / "uploads" / kb_id

    def store_upload(self, kb: KnowledgeBase, name: str, stream: IO[bytes], kind: str) -> Document:
        """Keep an uploaded file and register it (crash-safe; see web.uploads)."""
        return store_upload(self.settings, self.meta, kb, self.upload_dir(kb.id), name, stream, kind)

    def close(self) -> None:
        self.pool.close()


def services() -> Services:
    return current_app.extensions[EXTENSION]
