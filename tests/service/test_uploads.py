"""Upload drills against a real ``kbgraph-web serve`` (gunicorn) over HTTP: concurrent uploads of one
name, a retried upload, the size limit at the door, and ``kill -9`` of the web server mid-upload
(no row without its file, no file left behind after the restart)."""

from __future__ import annotations

import io
import os
import socket
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from conftest import REDIS_URL, scratch_redis_prefix
from kbgraph.blob.base import document_key
from kbgraph.config import Settings, load_settings
from kbgraph.meta import MetaDB
from support.processes import WebServer

pytestmark = [pytest.mark.services, pytest.mark.slow]

LIMIT = 200_000  # max_file_bytes of these servers


@pytest.fixture(scope="module")
def web_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with scratch_redis_prefix() as prefix:
        yield load_settings(data_dir=tmp_path_factory.mktemp("uploads") / "data", store="sqlite", embedding_provider="hash",
                            embedding_dim=64, redis_url=REDIS_URL, redis_prefix=prefix, web_workers=2, web_threads=4,
                            max_file_bytes=LIMIT)


@pytest.fixture(scope="module")
def key(web_settings: Settings) -> str:
    web_settings.data_dir.mkdir(parents=True, exist_ok=True)
    with MetaDB.open(web_settings.meta_url) as meta:
        meta.ensure_tenant("up")
        return meta.create_api_key("up")[1]


@pytest.fixture(scope="module")
def server(web_settings: Settings, key: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    with WebServer(web_settings, tmp_path_factory.mktemp("weblog") / "web.log") as web:
        yield web


def _call(server: WebServer, key: str, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    r = requests.request(method, server.url + path, headers={"Authorization": f"Bearer {key}"}, timeout=30, **kwargs)
    assert r.status_code == 200, r.text
    return r.json()


def _dataset(server: WebServer, key: str) -> str:
    body = _call(server, key, "POST", "/api/v1/datasets", json={"name": f"ds {uuid.uuid4().hex[:6]}"})
    assert body["code"] == 0, body
    return str(body["data"]["id"])


def _upload(server: WebServer, key: str, ds: str, name: str, data: bytes) -> dict[str, Any]:
    return _call(server, key, "POST", f"/api/v1/datasets/{ds}/documents", files=[("file", (name, data))])


def _download(server: WebServer, key: str, ds: str, doc_id: str) -> bytes:
    r = requests.get(f"{server.url}/api/v1/datasets/{ds}/documents/{doc_id}", timeout=30,
                     headers={"Authorization": f"Bearer {key}"})
    return r.content


def test_concurrent_uploads_of_one_name_each_keep_their_content(server: WebServer, key: str) -> None:
    ds = _dataset(server, key)
    contents = [f"client {i} wrote this about the Salt War.\n".encode() * (i + 1) for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda data: _upload(server, key, ds, "same.txt", data), contents))
    assert all(a["code"] == 0 for a in answers), answers
    rows = [a["data"][0] for a in answers]
    assert len({r["id"] for r in rows}) == 8
    assert sorted(r["name"] for r in rows) == sorted(["same.txt"] + [f"same({n}).txt" for n in range(1, 8)])
    for row, data in zip(rows, contents):
        assert _download(server, key, ds, row["id"]) == data  # nobody's content was replaced


def test_a_retried_upload_is_recognised(server: WebServer, key: str) -> None:
    ds = _dataset(server, key)
    data = b"The Treaty of Corran ended the Salt War in 818.\n"
    with ThreadPoolExecutor(4) as pool:  # a client retrying while its first attempt still runs
        answers = list(pool.map(lambda _: _upload(server, key, ds, "treaty.txt", data), range(4)))
    ids = {a["data"][0]["id"] for a in answers}
    assert len(ids) == 1
    assert _upload(server, key, ds, "treaty.txt", data)["data"][0]["id"] in ids
    other = _upload(server, key, ds, "treaty.txt", data + b"A second edition.\n")["data"][0]
    assert other["id"] not in ids and other["name"] == "treaty(1).txt"
    listed = _call(server, key, "GET", f"/api/v1/datasets/{ds}/documents")["data"]
    assert listed["total"] == 2


def test_an_upload_over_the_limit_is_refused_at_the_door(server: WebServer, key: str,
                                                          web_settings: Settings) -> None:
    ds = _dataset(server, key)
    answer = _upload(server, key, ds, "big.txt", b"x" * (LIMIT + 1))
    assert answer == {"code": 101, "message": f"big.txt: the file is larger than the limit of {LIMIT} bytes "
                                              "(setting max_file_bytes)"}
    assert _call(server, key, "GET", f"/api/v1/datasets/{ds}/documents")["data"]["total"] == 0
    folder = web_settings.data_dir / "uploads" / ds
    assert not folder.exists() or not list(folder.iterdir())  # the partial file went with the refusal


def test_a_curated_graph_over_the_limit_is_refused_with_the_same_message(server: WebServer, key: str) -> None:
    ds = _dataset(server, key)
    _call(server, key, "PUT", f"/api/v1/datasets/{ds}", json={"parser_config": {"graphrag": {"use_graphrag": True}}})
    big = b"name,type,description\n" + b"Saltmere Lighthouse,building," + b"x" * LIMIT + b"\n"
    answer = _call(server, key, "POST", f"/api/v1/datasets/{ds}/knowledge_graph/import",
                   files={"file": ("lights.csv", big)})
    assert answer == {"code": 101, "message": f"lights.csv: the file is larger than the limit of {LIMIT} bytes "
                                              "(setting max_file_bytes)"}
    small = b"name,type,description\nSaltmere Lighthouse,building,It guides ships past the reef.\n"
    assert _call(server, key, "POST", f"/api/v1/datasets/{ds}/knowledge_graph/import",
                 files={"file": ("lights.csv", small)})["code"] == 0


def _start_upload(server: WebServer, key: str, ds: str, name: str, head: bytes, total: int) -> socket.socket:
    """Send the headers and the first part of a multipart upload of ``total`` declared bytes, then
    stall: the web server holds a half-written temporary file."""
    boundary = "drillboundary"
    opening = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
               f"Content-Type: text/plain\r\n\r\n").encode()
    closing = f"\r\n--{boundary}--\r\n".encode()
    length = len(opening) + total + len(closing)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall((f"POST /api/v1/datasets/{ds}/documents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  f"Authorization: Bearer {key}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
                  f"Content-Length: {length}\r\n\r\n").encode() + opening + head)
    return sock


def test_web_killed_mid_upload_leaves_no_row_and_no_debris(web_settings: Settings, key: str, tmp_path: Path,
                                                           server: WebServer) -> None:
    ds = _dataset(server, key)
    kept = _upload(server, key, ds, "kept.txt", b"Varrow kept its harbor open.\n")["data"][0]
    folder = web_settings.data_dir / "uploads" / ds
    with WebServer(web_settings, tmp_path / "victim.log") as victim:
        sock = _start_upload(victim, key, ds, "cut.txt", b"y" * 150_000, 190_000)
        assert requests.get(victim.url + "/health", timeout=10).status_code == 200  # it is serving
        victim.kill9()  # every process of that server, mid-upload
        sock.close()
    # what a crash between the temporary file and the row leaves: a partial temporary file, or a
    # file already renamed to its document id whose row was never written
    debris = [folder / f".upload-{uuid.uuid4().hex}", folder / uuid.uuid1().hex]
    # the restarted server removes only what no upload can still be writing (silent for a
    # request's whole time limit); the drill ages the files instead of waiting web_timeout seconds
    stale = time.time() - web_settings.web_timeout - 5
    for path in debris:
        path.write_bytes(b"y" * 1000)
        os.utime(path, (stale, stale))
    fresh = folder / f".upload-{uuid.uuid4().hex}"  # an upload another process writes right now
    fresh.write_bytes(b"in flight")
    with WebServer(web_settings, tmp_path / "restarted.log") as restarted:
        docs = _call(restarted, key, "GET", f"/api/v1/datasets/{ds}/documents")["data"]["docs"]
        assert [d["name"] for d in docs] == ["kept.txt"]  # no row for the cut upload
        assert _download(restarted, key, ds, kept["id"]) == b"Varrow kept its harbor open.\n"
    assert sorted(p.name for p in folder.iterdir()) == sorted([kept["id"], fresh.name])


class _WatchedUpload(io.RawIOBase):
    """An upload's body that, between the blocks it hands over, looks at the upload folder as any
    reader might (and records every file under a final name with its size), and can fail midway as a
    client that goes away or a process that dies does."""

    def __init__(self, folder: Path, total: int, fail_at: int | None = None) -> None:
        self.folder, self.left, self.fail_at, self.sent = folder, total, fail_at, 0
        self.seen: list[tuple[str, int]] = []

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.folder.exists():
            self.seen += [(p.name, p.stat().st_size) for p in self.folder.iterdir() if not p.name.startswith(".upload-")]
        if self.fail_at is not None and self.sent >= self.fail_at:
            raise ConnectionResetError("the client went away mid-upload")
        n = min(len(buffer), self.left, 64 * 1024)
        buffer[:n] = b"z" * n
        self.left -= n
        self.sent += n
        return n


def test_an_upload_is_never_seen_partly_written(web_settings: Settings, key: str) -> None:
    """Every file a reader finds under a final name (a document's id) is complete, while an upload
    is being written and after one failed midway: the bytes in flight live only under a temporary name."""
    from kbgraph.blob.factory import open_blob_store
    from web.uploads import store_upload

    total = 150_000
    blobs = open_blob_store(web_settings)
    with MetaDB.open(web_settings.meta_url) as meta:
        kb = meta.create_kb("up", f"atomic {uuid.uuid4().hex[:6]}")
        folder = Path(blobs.location(document_key(kb.id, "x"))).parent
        whole = _WatchedUpload(folder, total)
        doc = store_upload(web_settings, meta, blobs, kb, "whole.txt", io.BufferedReader(whole), "doc")
        assert all(size == total for _, size in whole.seen), whole.seen  # never a part of it
        assert (folder / doc.id).stat().st_size == total

        cut = _WatchedUpload(folder, total, fail_at=total // 2)
        with pytest.raises(ConnectionResetError):
            store_upload(web_settings, meta, blobs, kb, "cut.txt", io.BufferedReader(cut), "doc")
        assert all(size == total for _, size in cut.seen), cut.seen
        finals = {p.name: p.stat().st_size for p in folder.iterdir() if not p.name.startswith(".upload-")}
        assert finals == {doc.id: total}  # the failed upload left nothing under a final name
        assert [d.id for d in meta.list_documents(kb.id)] == [doc.id]
