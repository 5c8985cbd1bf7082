"""Uploads kept in S3 (blob_store = "s3") with a real ``kbgraph-web serve`` and a real ``kbgraph-worker``
that share no disk: each has a data directory of its own, the metadata database is PostgreSQL and
the files are in the S3 server .ci/run starts (SeaweedFS). Uploads stream into the bucket, the worker
reads them from there, deletes remove them, a refused upload leaves nothing behind, and an
unreachable S3 server is an answer naming it, not a crash."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from conftest import REDIS_URL, s3_overrides, scratch_postgres_database, scratch_redis_prefix, store_overrides
from kbgraph.blob import BlobStore, document_key, kb_prefix, open_blob_store
from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.meta import MetaDB
from support.processes import WebServer, Worker, free_port

pytestmark = [pytest.mark.services, pytest.mark.slow]

LIMIT = 12 << 20  # max_file_bytes: past one S3 part (8 MiB), so a refused upload was a multipart one


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The settings every host shares: PostgreSQL, Redis, the document store, the S3 bucket."""
    with scratch_redis_prefix() as prefix, scratch_postgres_database() as url:
        yield {"database_url": url, "redis_url": REDIS_URL, "redis_prefix": prefix, **store_overrides(),
               **s3_overrides(), "embedding_provider": "hash", "embedding_dim": 64, "max_file_bytes": LIMIT,
               "web_workers": 2, "web_threads": 4}


def _host(tmp_path_factory: pytest.TempPathFactory, name: str, shared: dict[str, Any]) -> Settings:
    return load_settings(data_dir=tmp_path_factory.mktemp(name) / "data", **shared)


@pytest.fixture(scope="module")
def web_settings(tmp_path_factory: pytest.TempPathFactory, shared: dict[str, Any]) -> Settings:
    return _host(tmp_path_factory, "web", shared)


@pytest.fixture(scope="module")
def blobs(web_settings: Settings) -> Iterator[BlobStore]:
    store = open_blob_store(web_settings)
    yield store
    store.delete_prefix("")
    store.close()


@pytest.fixture(scope="module")
def web(web_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    with WebServer(web_settings, tmp_path_factory.mktemp("weblog") / "web.log") as server:
        yield server


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, shared: dict[str, Any]) -> Iterator[Worker]:
    settings = _host(tmp_path_factory, "worker", shared)
    with Worker(settings, tmp_path_factory.mktemp("workerlog") / "worker.log", concurrency=1) as running:
        yield running


@pytest.fixture(scope="module")
def key(web: WebServer, shared: dict[str, Any]) -> str:
    with MetaDB.open(shared["database_url"]) as meta:
        meta.ensure_tenant("s3")
        return meta.create_api_key("s3")[1]


def _call(url: str, key: str, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    answer = requests.request(method, url + path, headers={"Authorization": f"Bearer {key}"}, timeout=60, **kwargs)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _ok(url: str, key: str, method: str, path: str, **kwargs: Any) -> Any:
    body = _call(url, key, method, path, **kwargs)
    assert body["code"] == 0, body
    return body.get("data")


def _dataset(web: WebServer, key: str) -> str:
    return str(_ok(web.url, key, "POST", "/api/v1/datasets", json={"name": f"s3 {uuid.uuid4().hex[:6]}"})["id"])


def _documents(web: WebServer, key: str, ds: str) -> list[dict[str, Any]]:
    return list(_ok(web.url, key, "GET", f"/api/v1/datasets/{ds}/documents")["docs"])


def _keys(blobs: BlobStore, ds: str) -> list[str]:
    return sorted(i.key for i in blobs.list(kb_prefix(ds)))


def test_an_upload_is_kept_in_s3_and_a_worker_on_another_host_parses_it(
        web: WebServer, worker: Worker, key: str, blobs: BlobStore, web_settings: Settings) -> None:
    import time

    ds = _dataset(web, key)
    data = (SAMPLE_CORPUS_DIR / "salt_war.md").read_bytes()
    doc = _ok(web.url, key, "POST", f"/api/v1/datasets/{ds}/documents", files=[("file", ("salt_war.md", data))])[0]
    assert _keys(blobs, ds) == [document_key(ds, doc["id"])] and blobs.read(document_key(ds, doc["id"])) == data
    assert not web_settings.blob_path.exists()  # nothing on the web host's disk
    _ok(web.url, key, "POST", f"/api/v1/datasets/{ds}/chunks", json={"document_ids": [doc["id"]]})
    deadline = time.monotonic() + 120
    while (row := _documents(web, key, ds)[0])["run"] not in ("DONE", "FAIL") and time.monotonic() < deadline:
        assert worker.alive(), worker.output()
        time.sleep(0.3)
    assert row["run"] == "DONE" and row["chunk_count"] > 0, (row, worker.output())
    download = requests.get(f"{web.url}/api/v1/datasets/{ds}/documents/{doc['id']}", timeout=30,
                            headers={"Authorization": f"Bearer {key}"})
    assert download.content == data
    _ok(web.url, key, "DELETE", f"/api/v1/datasets/{ds}/documents", json={"ids": [doc["id"]]})
    assert _keys(blobs, ds) == []


def test_deleting_a_dataset_deletes_its_files(web: WebServer, key: str, blobs: BlobStore) -> None:
    ds, other = _dataset(web, key), _dataset(web, key)
    for dataset in (ds, other):
        for name in ("a.txt", "b.txt"):
            _ok(web.url, key, "POST", f"/api/v1/datasets/{dataset}/documents",
                files=[("file", (name, f"{dataset} {name} about the harbor of Varrow.\n".encode()))])
    assert len(_keys(blobs, ds)) == 2 and len(_keys(blobs, other)) == 2
    _ok(web.url, key, "DELETE", "/api/v1/datasets", json={"ids": [ds]})
    assert _keys(blobs, ds) == [] and len(_keys(blobs, other)) == 2


def test_an_upload_over_the_limit_leaves_nothing_in_the_bucket(web: WebServer, key: str, blobs: BlobStore) -> None:
    ds = _dataset(web, key)
    answer = _call(web.url, key, "POST", f"/api/v1/datasets/{ds}/documents",
                   files=[("file", ("big.txt", b"x" * (LIMIT + 1)))])
    assert answer == {"code": 101, "message": f"big.txt: the file is larger than the limit of {LIMIT} bytes "
                                              "(setting max_file_bytes)"}
    assert _documents(web, key, ds) == [] and _keys(blobs, ds) == []
    assert blobs.clean_partial(0) == 0  # its multipart upload was aborted, not left behind


def test_an_unreachable_s3_server_is_an_answer_naming_it(web_settings: Settings, key: str,
                                                          tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    settings = web_settings.replace(s3_endpoint_url=endpoint, data_dir=tmp_path / "data")
    with WebServer(settings, tmp_path / "web.log") as web:  # it starts: readiness says what is missing
        ds = _dataset(web, key)
        answer = _call(web.url, key, "POST", f"/api/v1/datasets/{ds}/documents",
                       files=[("file", ("notes.txt", b"The Salt War ended in 818.\n"))])
        assert answer["code"] == 500 and endpoint in answer["message"], answer
        assert "cannot be reached" in answer["message"] and "s3_endpoint_url" in answer["message"]
        assert _documents(web, key, ds) == []
        assert "uploads left by a crash were not cleaned up" in web.output()
