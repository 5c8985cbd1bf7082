"""The blob store contract (kbgraph/blob/base.py), run on the local folder and on a real S3 server
(SeaweedFS, started by .ci/run or tests/s3_server/s3-server.sh): put, open, delete and list;
streaming a large file with bounded memory; atomicity (a reader never sees part of an object under
its key, a failed or killed put leaves nothing there, and what a killed put leaves is cleaned up);
and the errors a person sees when the store cannot be used.
"""

from __future__ import annotations

import hashlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import S3_KEY, S3_LIMITED_KEY, S3_LIMITED_SECRET, S3_SECRET, s3_overrides
from kbgraph.blob import BlobNotFound, BlobStore, BlobUnavailable, document_key, kb_prefix, open_blob_store
from kbgraph.config import Settings, load_settings

MiB = 1 << 20


@pytest.fixture(params=["local", "s3"])
def blob_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    if request.param == "local":
        return load_settings(data_dir=tmp_path / "data")
    return load_settings(data_dir=tmp_path / "data", **s3_overrides())  # type: ignore[arg-type]


@pytest.fixture
def blobs(blob_settings: Settings) -> Iterator[BlobStore]:
    store = open_blob_store(blob_settings)
    yield store
    store.delete_prefix("")  # what the test left under its prefix (S3: the shared test bucket)
    store.clean_partial(0)
    store.close()


class Generated:
    """``size`` bytes of a repeating pattern, made as they are read; raises after ``fail_after``
    bytes, or waits at ``pause_after`` bytes until ``resume`` is set (``paused`` says it got there)."""

    def __init__(self, size: int, *, fail_after: int | None = None, pause_after: int | None = None) -> None:
        self.size, self.fail_after, self.pause_after, self.sent = size, fail_after, pause_after, 0
        self.paused, self.resume = threading.Event(), threading.Event()
        self.digest = hashlib.sha256()

    def read(self, amount: int = -1) -> bytes:
        if self.fail_after is not None and self.sent >= self.fail_after:
            raise ConnectionResetError("the client went away mid-upload")
        if self.pause_after is not None and self.sent >= self.pause_after and not self.resume.is_set():
            self.paused.set()
            self.resume.wait(60)
        # short reads, as a socket gives them; everything left when asked for all
        amount = self.size - self.sent if amount is None or amount < 0 else min(amount, 3 * MiB, self.size - self.sent)
        block = bytes((self.sent + i) % 251 for i in range(min(amount, 251))) * (amount // 251 + 1)
        block = block[:amount]
        self.sent += amount
        self.digest.update(block)
        return block


def _digest(blobs: BlobStore, key: str) -> str:
    digest = hashlib.sha256()
    with blobs.open(key) as stream:
        while block := stream.read(MiB):
            digest.update(block)
    return digest.hexdigest()


# ------------------------------------------------------------------------------ put, open, delete, list


def test_put_open_size_exists_delete(blobs: BlobStore) -> None:
    key = document_key("kb1", "doc1")
    assert not blobs.exists(key)
    assert blobs.put(key, io.BytesIO(b"The Salt War ended in 818.\n")) == 27
    assert blobs.exists(key) and blobs.size(key) == 27
    assert blobs.read(key) == b"The Salt War ended in 818.\n"
    with blobs.open(key) as stream:
        assert stream.read(4) == b"The " and stream.read() == b"Salt War ended in 818.\n"
    assert blobs.put(key, io.BytesIO(b"replaced")) == 8  # a put replaces what was there
    assert blobs.read(key) == b"replaced"
    blobs.delete(key)
    blobs.delete(key)  # deleting what is not there is no error
    assert not blobs.exists(key)
    with pytest.raises(BlobNotFound):
        blobs.open(key)
    with pytest.raises(BlobNotFound):
        blobs.size(key)
    assert blobs.put(document_key("kb1", "empty"), io.BytesIO(b"")) == 0
    assert blobs.read(document_key("kb1", "empty")) == b""


def test_list_and_delete_by_prefix(blobs: BlobStore) -> None:
    keys = ["kb1/a", "kb1/b", "kb10/a", "kb2/a", "kb2/nested/c"]
    for key in keys:
        blobs.put(key, io.BytesIO(key.encode()))
    assert sorted(i.key for i in blobs.list()) == sorted(keys)
    assert sorted(i.key for i in blobs.list(kb_prefix("kb1"))) == ["kb1/a", "kb1/b"]  # not kb10's
    assert sorted(i.key for i in blobs.list("kb2/")) == ["kb2/a", "kb2/nested/c"]
    listed = {i.key: i for i in blobs.list("kb2/")}
    assert listed["kb2/a"].size == 5 and abs(listed["kb2/a"].modified - time.time()) < 300
    assert blobs.delete_prefix(kb_prefix("kb1")) == 2
    assert sorted(i.key for i in blobs.list()) == ["kb10/a", "kb2/a", "kb2/nested/c"]
    assert blobs.delete_prefix(kb_prefix("kb1")) == 0


@pytest.mark.parametrize("key", ["../escape", "/absolute", ".hidden", "a//b", "a/../b", "a/.upload-x", "", "a b"])
def test_keys_outside_the_store_are_refused(blobs: BlobStore, key: str) -> None:
    with pytest.raises(ValueError):
        blobs.put(key, io.BytesIO(b"x"))
    with pytest.raises(ValueError):
        blobs.open(key)


# ------------------------------------------------------------------------------ streaming


@pytest.mark.slow
def test_a_large_file_streams_through_with_bounded_memory(blobs: BlobStore) -> None:
    size = 96 * MiB
    source = Generated(size)
    tracemalloc.start()
    try:
        assert blobs.put("kb/large", source) == size
        _, put_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        assert _digest(blobs, "kb/large") == source.digest.hexdigest()
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert blobs.size("kb/large") == size
    # a put or a read that held the file whole would peak above its 96 MiB; S3 keeps 4 parts of 8 MiB
    # in memory and one being read (~54 MB measured), the folder one block of 1 MiB
    assert put_peak < 64 * MiB, put_peak
    assert read_peak < 16 * MiB, read_peak


# ------------------------------------------------------------------------------ atomicity


@pytest.mark.parametrize("size", [200_000, 20 * MiB], ids=["one-request", "multipart"])
def test_a_failed_put_leaves_nothing_under_the_key(blobs: BlobStore, size: int) -> None:
    with pytest.raises(ConnectionResetError):
        blobs.put("kb/new", Generated(size, fail_after=size // 2))
    assert not blobs.exists("kb/new")
    assert [i.key for i in blobs.list()] == []
    blobs.put("kb/old", io.BytesIO(b"the earlier version"))
    with pytest.raises(ConnectionResetError):
        blobs.put("kb/old", Generated(size, fail_after=size // 2))
    assert blobs.read("kb/old") == b"the earlier version"  # a failed replacement keeps the earlier object
    assert [i.key for i in blobs.list()] == ["kb/old"]


@pytest.mark.parametrize("size", [3 * MiB, 24 * MiB], ids=["one-request", "multipart"])
def test_a_reader_never_sees_a_partial_object(blobs: BlobStore, size: int) -> None:
    blobs.put("kb/replaced", io.BytesIO(b"the earlier version"))
    new, replacing = Generated(size, pause_after=size - MiB), Generated(size, pause_after=size - MiB)
    writers = [threading.Thread(target=blobs.put, args=(key, source))
               for key, source in (("kb/new", new), ("kb/replaced", replacing))]
    for writer in writers:
        writer.start()
    try:
        assert new.paused.wait(60) and replacing.paused.wait(60)
        time.sleep(0.3)  # what was read so far has had time to reach the store
        # mid-put: nothing under the new key, the whole earlier object under the replaced one
        assert not blobs.exists("kb/new")
        with pytest.raises(BlobNotFound):
            blobs.open("kb/new")
        assert [i.key for i in blobs.list()] == ["kb/replaced"]
        assert blobs.size("kb/replaced") == len(b"the earlier version")
        assert blobs.read("kb/replaced") == b"the earlier version"
    finally:
        new.resume.set()
        replacing.resume.set()
        for writer in writers:
            writer.join(60)
    assert _digest(blobs, "kb/new") == new.digest.hexdigest()
    assert _digest(blobs, "kb/replaced") == replacing.digest.hexdigest()


_KILLED_PUT = """
import sys, time
from kbgraph.blob import open_blob_store
from kbgraph.config import load_settings

class Endless:
    sent = 0
    def read(self, amount=-1):
        if self.sent >= 20 << 20:  # past two S3 parts: a multipart upload is under way
            print("stalled", flush=True)
            time.sleep(3600)
        self.sent += 1 << 20
        return b"k" * (1 << 20)

open_blob_store(load_settings()).put("kb/killed", Endless())
"""


@pytest.mark.slow
def test_a_put_killed_midway_leaves_nothing_visible_and_its_debris_is_cleaned(blobs: BlobStore,
                                                                               blob_settings: Settings) -> None:
    from support.processes import service_env

    child = subprocess.Popen([sys.executable, "-c", _KILLED_PUT], env=service_env(blob_settings),
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "stalled"
        time.sleep(0.5)  # the parts read have reached the store
        os.killpg(child.pid, signal.SIGKILL)
    finally:
        child.wait(30)
    assert not blobs.exists("kb/killed")
    assert [i.key for i in blobs.list()] == []
    assert blobs.clean_partial(older_than=3600) == 0  # young debris may be a put still running elsewhere
    assert blobs.clean_partial(older_than=0) >= 1
    assert blobs.clean_partial(older_than=0) == 0
    blobs.put("kb/killed", io.BytesIO(b"a retry"))
    assert blobs.read("kb/killed") == b"a retry"


# ------------------------------------------------------------------------------ errors


def test_a_local_folder_that_cannot_be_made_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("in the way")
    store = open_blob_store(load_settings(data_dir=tmp_path, blob_dir=tmp_path / "file" / "uploads"))
    for attempt in (store.check, lambda: store.put("kb/doc", io.BytesIO(b"x"))):
        with pytest.raises(BlobUnavailable) as caught:
            attempt()
        assert str(tmp_path / "file") in str(caught.value) and "blob_dir" in str(caught.value)


def _s3_failure(**changes: object) -> str:
    settings = load_settings(**{**s3_overrides(), **changes})  # type: ignore[arg-type]
    messages = []
    with open_blob_store(settings) as store:
        for attempt in (store.check, lambda: store.put("kb/doc", io.BytesIO(b"x")), lambda: store.read("kb/doc")):
            with pytest.raises(BlobUnavailable) as caught:
                attempt()
            messages.append(str(caught.value))
    assert len(set(messages)) == 1, messages  # one cause, one message, whatever the call
    return messages[0]


def test_s3_unreachable_names_the_endpoint_and_the_setting() -> None:
    from support.processes import free_port

    url = f"http://127.0.0.1:{free_port()}"
    message = _s3_failure(s3_endpoint_url=url)
    assert url in message and "cannot be reached" in message and "s3_endpoint_url" in message


def test_s3_wrong_credentials_name_the_endpoint_and_the_settings() -> None:
    overrides = s3_overrides()
    message = _s3_failure(s3_secret_access_key=S3_SECRET + "-wrong")
    assert overrides["s3_endpoint_url"] in message and "s3_access_key_id" in message
    assert "s3_secret_access_key" in message and "credentials" in message


def test_s3_missing_bucket_is_refused_when_it_may_not_be_created() -> None:
    overrides = s3_overrides()
    message = _s3_failure(s3_bucket="kbgraph-nobucket", s3_create_bucket=False)
    assert "'kbgraph-nobucket' does not exist" in message and str(overrides["s3_endpoint_url"]) in message
    assert "s3_bucket" in message and "s3_create_bucket" in message


def test_s3_bucket_creation_refused_by_the_server_is_a_clear_error() -> None:
    overrides = s3_overrides()
    message = _s3_failure(s3_bucket="kbgraph-refused", s3_access_key_id=S3_LIMITED_KEY,
                          s3_secret_access_key=S3_LIMITED_SECRET)
    assert "'kbgraph-refused' does not exist" in message and "creating it was refused" in message
    assert str(overrides["s3_endpoint_url"]) in message and "s3_bucket" in message


def test_s3_missing_bucket_is_created_on_first_use() -> None:
    bucket = f"kbgraph-made-{os.getpid()}-{int(time.time())}"
    settings = load_settings(**s3_overrides(s3_bucket=bucket))  # type: ignore[arg-type]
    with open_blob_store(settings) as store:
        store.check()  # missing but creatable: ready
        store.put("kb/doc", io.BytesIO(b"made"))
        assert store.read("kb/doc") == b"made"
        store.delete_prefix("")
        import boto3

        boto3.client("s3", endpoint_url=settings.s3_endpoint_url, region_name="us-east-1", aws_access_key_id=S3_KEY,
                     aws_secret_access_key=S3_SECRET).delete_bucket(Bucket=bucket)

