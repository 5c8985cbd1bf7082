"""``kbgraph-web serve`` on a brand-new PostgreSQL database starts cleanly, every time: ten starts in a
row, each on a database of its own, each answering its first request with every gunicorn worker
alive. (Before migrations, each worker created the tables itself and 2 of 3 first starts died on
``UniqueViolation ... pg_type_typname_nsp_index``.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from conftest import REDIS_URL, scratch_postgres_database, scratch_redis_prefix
from kbgraph.config import load_settings
from kbgraph.meta import SCHEMA_HEAD, database_revision
from support.processes import WebServer

pytestmark = [pytest.mark.services, pytest.mark.slow]

STARTS = 10
WORKERS = 2  # gunicorn workers racing for the fresh database (the default, which failed 2 starts in 3)


def test_ten_first_starts_on_new_postgres_databases_all_serve(tmp_path: Path) -> None:
    with scratch_redis_prefix() as prefix:
        for start in range(STARTS):
            with scratch_postgres_database() as url:
                settings = load_settings(data_dir=tmp_path / f"data{start}", store="sqlite", database_url=url,
                                         embedding_provider="hash", embedding_dim=64, redis_url=REDIS_URL,
                                         redis_prefix=prefix, web_workers=WORKERS, web_threads=2)
                log = tmp_path / f"web{start}.log"
                with WebServer(settings, log) as web:  # waits for its first answer to /health
                    answer = requests.get(web.url + "/api/v1/datasets", timeout=10)
                    assert answer.status_code == 200 and "code" in answer.json()  # the API answered
                    assert len(web.workers()) == WORKERS, web.output()
                output = log.read_text(errors="replace")
                assert "Traceback" not in output and "Worker failed to boot" not in output, output[-3000:]
                assert database_revision(url) == SCHEMA_HEAD
