"""web/uploads.py over both blob stores (the local folder and a real S3 server): a file and its row
appear together or not at all, a retried upload keeps one file, and the debris sweep a web process
runs when it starts removes exactly what crashed uploads left."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import s3_overrides
from kbgraph.blob import BlobNotFound, BlobStore, document_file, document_key, kb_prefix, open_blob_store
from kbgraph.config import Settings, load_settings
from kbgraph.meta import Document, KnowledgeBase, MetaDB, NotFound
from web.uploads import UploadTooLarge, clean_upload_debris, store_upload


@pytest.fixture(params=["local", "s3"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    extra = s3_overrides() if request.param == "s3" else {}
    return load_settings(data_dir=tmp_path / "data", max_file_bytes=100_000, **extra)  # type: ignore[arg-type]


@pytest.fixture
def meta(settings: Settings) -> Iterator[MetaDB]:
    with MetaDB.open(settings.meta_url) as db:
        db.ensure_tenant("t")
        yield db


@pytest.fixture
def blobs(settings: Settings) -> Iterator[BlobStore]:
    store = open_blob_store(settings)
    yield store
    store.delete_prefix("")
    store.close()


@pytest.fixture
def kb(meta: MetaDB) -> KnowledgeBase:
    return meta.create_kb("t", f"kb {uuid.uuid4().hex[:6]}")


def _upload(settings: Settings, meta: MetaDB, blobs: BlobStore, kb: KnowledgeBase, name: str, data: bytes) -> Document:
    return store_upload(settings, meta, blobs, kb, name, io.BytesIO(data), "doc")


def test_a_file_and_its_row_come_together(settings: Settings, meta: MetaDB, blobs: BlobStore,
                                          kb: KnowledgeBase) -> None:
    doc = _upload(settings, meta, blobs, kb, "treaty.txt", b"The Treaty of Corran.\n")
    assert blobs.read(document_key(kb.id, doc.id)) == b"The Treaty of Corran.\n"
    assert (doc.size, doc.location) == (22, blobs.location(document_key(kb.id, doc.id)))
    again = _upload(settings, meta, blobs, kb, "treaty.txt", b"The Treaty of Corran.\n")  # a retry
    assert again.id == doc.id and [i.key for i in blobs.list(kb_prefix(kb.id))] == [document_key(kb.id, doc.id)]
    other = _upload(settings, meta, blobs, kb, "treaty.txt", b"A second edition.\n")
    assert other.name == "treaty(1).txt" and blobs.read(document_key(kb.id, other.id)) == b"A second edition.\n"


def test_a_refused_upload_leaves_no_file_and_no_row(settings: Settings, meta: MetaDB, blobs: BlobStore,
                                                    kb: KnowledgeBase) -> None:
    with pytest.raises(UploadTooLarge, match="setting max_file_bytes"):
        _upload(settings, meta, blobs, kb, "big.txt", b"x" * 100_001)
    meta.delete_kb("t", kb.id)  # a dataset deleted while its upload streamed: the row cannot be made
    with pytest.raises(NotFound):
        _upload(settings, meta, blobs, kb, "late.txt", b"too late")
    assert list(blobs.list()) == [] and meta.list_documents(kb.id) == []


def test_the_debris_sweep_removes_what_crashed_uploads_left_and_nothing_else(
        settings: Settings, meta: MetaDB, blobs: BlobStore, kb: KnowledgeBase) -> None:
    kept = _upload(settings, meta, blobs, kb, "kept.txt", b"Varrow kept its harbor open.\n")
    # a crash between the file and its row; a knowledge base deleted before its files were
    orphans = [document_key(kb.id, uuid.uuid1().hex), document_key(uuid.uuid1().hex, uuid.uuid1().hex)]
    for key in orphans:
        blobs.put(key, io.BytesIO(b"nobody points at me"))
    # young files may be uploads another web process is writing right now: left alone
    assert clean_upload_debris(blobs, meta, older_than=3600) == []
    assert sorted(clean_upload_debris(blobs, meta, older_than=0)) == sorted(orphans)
    assert [i.key for i in blobs.list()] == [document_key(kb.id, kept.id)]
    assert blobs.read(document_key(kb.id, kept.id)) == b"Varrow kept its harbor open.\n"


def test_a_document_file_is_its_upload_or_the_file_it_was_registered_from(
        settings: Settings, meta: MetaDB, blobs: BlobStore, kb: KnowledgeBase, tmp_path: Path) -> None:
    uploaded = _upload(settings, meta, blobs, kb, "up.txt", b"uploaded bytes")
    found = document_file(blobs, kb.id, uploaded.id, uploaded.location)
    assert (found.size, found.read()) == (14, b"uploaded bytes")
    source = tmp_path / "on disk.txt"  # what `kbgraph index` registers: the file where it is
    source.write_bytes(b"registered from a path")
    registered, _ = meta.upsert_document(kb.id, "on disk.txt", str(source), source.stat().st_size)
    assert document_file(blobs, kb.id, registered.id, registered.location).read() == b"registered from a path"
    for location in ("", "relative/on disk.txt", str(tmp_path / "gone.txt"), "s3://kbgraph/x/y"):
        with pytest.raises(BlobNotFound):
            document_file(blobs, kb.id, registered.id, location)
