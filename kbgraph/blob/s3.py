"""The S3 blob store: one bucket (and an optional key prefix) on any server that speaks the S3 API
(AWS, SeaweedFS, MinIO, Ceph...), through boto3.

A put of up to ``PART_BYTES`` is one PutObject request; a larger one is a multipart upload in parts
of ``PART_BYTES``, streamed (s3transfer reads the stream a part at a time and keeps at most
``PARTS_IN_MEMORY`` parts in memory). Both are atomic on S3: an object appears under its key only
when PutObject or CompleteMultipartUpload succeeds, and s3transfer aborts the multipart upload when
a part or the stream fails. A process killed mid-upload leaves an unfinished multipart upload,
invisible under the key, which ``clean_partial`` aborts once it is old.

The bucket is checked (and created when missing, with ``s3_create_bucket``) on first use, not when
the store is made: a web server starts, and says on ``/ready`` what is wrong, while S3 is down.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import IO, Any, BinaryIO, cast

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from kbgraph.blob.base import BlobInfo, BlobStore, check_key, check_prefix
from kbgraph.blob.s3_errors import S3Place, is_missing, s3_errors
from kbgraph.config import Settings

# 8 MiB parts: s3transfer's default and above S3's 5 MiB minimum; 4 in flight and in memory bound an
# upload's memory to ~32 MiB whatever its size (tests/contract/test_blob_contract.py measures it)
PART_BYTES = 8 << 20
PARTS_IN_MEMORY = 4
_DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys


class S3BlobStore(BlobStore):
    def __init__(self, settings: Settings) -> None:
        self.bucket = settings.s3_bucket
        self.prefix = settings.s3_prefix
        self.place = S3Place(settings.s3_endpoint_url, settings.s3_region, settings.s3_bucket)
        self.create_bucket = settings.s3_create_bucket
        self.client = boto3.session.Session().client(
            "s3", endpoint_url=settings.s3_endpoint_url or None, region_name=settings.s3_region or None,
            aws_access_key_id=settings.s3_access_key_id or None,
            aws_secret_access_key=settings.s3_secret_access_key or None,
            config=Config(
                s3={"addressing_style": settings.s3_addressing_style}, signature_version="s3v4",
                # an unreachable endpoint fails within seconds, not botocore's default minute
                connect_timeout=5, read_timeout=60, retries={"mode": "standard", "max_attempts": 3},
                # checksums only where the API demands them: older S3-compatible servers refuse the
                # newer default (CRC32 trailers on every upload)
                request_checksum_calculation="when_required", response_checksum_validation="when_required",
            ))
        self.transfer = TransferConfig(multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES,
                                       max_concurrency=PARTS_IN_MEMORY, preferred_transfer_client="classic")
        self.transfer.max_in_memory_upload_chunks = PARTS_IN_MEMORY
        self._bucket_ready = False
        self._guard = threading.Lock()

    @property
    def where(self) -> str:
        return self.place.describe()

    def location(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    def _ready(self) -> None:
        """The bucket exists (created now if it was missing and that is allowed); checked once."""
        if self._bucket_ready:
            return
        with self._guard:
            if not self._bucket_ready:
                self._probe()
                self._bucket_ready = True

    def _probe(self) -> None:
        with s3_errors(self.place, "check the bucket"):
            try:
                self.client.head_bucket(Bucket=self.bucket)
                return
            except Exception as exc:
                if not is_missing(exc):
                    raise
        self._create_bucket()

    def _create_bucket(self) -> None:
        if not self.create_bucket:
            raise self.place.no_bucket()
        with s3_errors(self.place, "create the bucket", creating=True):
            args: dict[str, Any] = {"Bucket": self.bucket}
            if self.place.region and self.place.region != "us-east-1":
                args["CreateBucketConfiguration"] = {"LocationConstraint": self.place.region}
            try:
                self.client.create_bucket(**args)
            except self.client.exceptions.BucketAlreadyOwnedByYou:
                pass  # another process created it first

    def put(self, key: str, stream: IO[bytes]) -> int:
        counted = _Counted(stream)
        self._ready()
        with s3_errors(self.place, "upload", key):
            self.client.upload_fileobj(counted, self.bucket, self._key(key), Config=self.transfer)
        return counted.size

    def open(self, key: str) -> BinaryIO:
        self._ready()
        with s3_errors(self.place, "read", key):
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        return cast(BinaryIO, answer["Body"])

    def size(self, key: str) -> int:
        self._ready()
        with s3_errors(self.place, "look up", key):
            return int(self.client.head_object(Bucket=self.bucket, Key=self._key(key))["ContentLength"])

    def exists(self, key: str) -> bool:
        self._ready()
        with s3_errors(self.place, "look up", key):
            try:
                self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            except Exception as exc:
                if is_missing(exc):
                    return False
                raise
        return True

    def delete(self, key: str) -> None:
        self._ready()
        with s3_errors(self.place, "delete", key):
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def delete_prefix(self, prefix: str) -> int:
        keys = [self.prefix + info.key for info in self.list(prefix)]
        for start in range(0, len(keys), _DELETE_BATCH):
            batch = [{"Key": k} for k in keys[start:start + _DELETE_BATCH]]
            with s3_errors(self.place, "delete under", prefix):
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
        return len(keys)

    def list(self, prefix: str = "") -> Iterator[BlobInfo]:
        check_prefix(prefix)
        self._ready()
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + prefix)
        with s3_errors(self.place, "list", prefix or "/"):
            for page in pages:
                for item in page.get("Contents", []):
                    yield BlobInfo(item["Key"][len(self.prefix):], int(item["Size"]), item["LastModified"].timestamp())

    def clean_partial(self, older_than: float) -> int:
        self._ready()
        cutoff = time.time() - older_than
        removed = 0
        pages = self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=self.prefix)
        with s3_errors(self.place, "clean unfinished uploads under", self.prefix or "/"):
            for page in pages:
                for upload in page.get("Uploads", []):
                    if upload["Initiated"].timestamp() < cutoff:
                        self.client.abort_multipart_upload(Bucket=self.bucket, Key=upload["Key"],
                                                           UploadId=upload["UploadId"])
                        removed += 1
        return removed

    def check(self) -> None:
        # one round trip, every time: a readiness probe must see S3 go away (a missing bucket is
        # created now, as the first put would, so a refusal shows here too)
        self._probe()

    def close(self) -> None:
        self.client.close()


class _Counted:
    """A stream's bytes as they are read, counted (``put`` returns the size), each read as full as
    the stream allows: s3transfer takes a first read shorter than a part for the whole of a small
    file and reads the rest with one unbounded ``read()``, which a stream that returns short reads
    (a socket's) would otherwise turn into the whole file in memory."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream, self.size = stream, 0

    def read(self, amount: int | None = -1) -> bytes:
        if amount is None or amount < 0:
            block = self.stream.read()
        else:
            pieces, wanted = [], amount
            while wanted > 0 and (piece := self.stream.read(wanted)):
                pieces.append(piece)
                wanted -= len(piece)
            block = b"".join(pieces)
        self.size += len(block)
        return block


__all__ = ["PART_BYTES", "PARTS_IN_MEMORY", "S3BlobStore"]
