"""What the web app holds for its lifetime: engines (one per tenant over shared connections), the
Celery app it sends tasks with, and where uploads are kept."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flask import current_app

from kbgraph.app import Engine
from kbgraph.config import Settings
from kbgraph.meta import MetaDB
from task_executor.celery_app import KBCelery
from task_executor.engines import EnginePool
from task_executor.submit import celery_for

EXTENSION = "kbgraph"


@dataclass
class Services:
    settings: Settings
    pool: EnginePool
    celery: KBCelery

    @classmethod
    def open(cls, settings: Settings, celery: KBCelery | None = None) -> "Services":
        return cls(settings, EnginePool(settings), celery or celery_for(settings))

    @property
    def meta(self) -> MetaDB:
        return self.pool.meta

    def engine(self, tenant: str) -> Engine:
        return self.pool.engine(tenant)

    def upload_dir(self, kb_id: str) -> Path:
        return self.settings.data_dir / "uploads" / kb_id

    def close(self) -> None:
        self.pool.close()


def services() -> Services:
    return current_app.extensions[EXTENSION]
