"""botocore's errors as ``BlobError``s a person can act on: each names the endpoint and bucket and
the setting to look at (an unreachable endpoint, refused credentials, a missing bucket)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from botocore import exceptions as boto

from kbgraph.blob.base import BlobError, BlobNotFound, BlobUnavailable

_MISSING = {"404", "NoSuchKey", "NotFound", "NoSuchBucket"}
_REFUSED = {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
            "InvalidSecurity", "AuthorizationHeaderMalformed", "AllAccessDisabled"}
_CREDENTIALS = "settings s3_access_key_id, s3_secret_access_key"


@dataclass(frozen=True)
class S3Place:
    endpoint_url: str
    region: str
    bucket: str

    @property
    def endpoint(self) -> str:
        return self.endpoint_url or f"AWS S3 (region {self.region or 'from the environment'})"

    def describe(self) -> str:
        return f"the S3 bucket {self.bucket!r} at {self.endpoint}"

    def no_bucket(self) -> BlobUnavailable:
        return BlobUnavailable(f"the bucket {self.bucket!r} does not exist at {self.endpoint} (setting s3_bucket; "
                               "s3_create_bucket = true has it created)")


def _code(exc: boto.ClientError) -> tuple[str, str]:
    error = exc.response.get("Error", {})
    return str(error.get("Code", "")), str(error.get("Message", "") or "")


def is_missing(exc: BaseException) -> bool:
    """Whether ``exc`` says the object or bucket asked for does not exist."""
    return isinstance(exc, boto.ClientError) and _code(exc)[0] in _MISSING


@contextmanager
def s3_errors(place: S3Place, action: str, key: str = "", *, creating: bool = False) -> Iterator[None]:
    """Turn what botocore raises inside into a BlobError saying what to fix."""
    what = f"{action} {key!r}" if key else action
    try:
        yield
    except BlobError:
        raise
    except boto.NoCredentialsError as exc:
        raise BlobUnavailable(f"no S3 credentials for {place.describe()}: set the {_CREDENTIALS} (or "
                              "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)") from exc
    except (boto.ConnectionError, boto.HTTPClientError) as exc:
        raise BlobUnavailable(f"the S3 endpoint {place.endpoint} cannot be reached to {what} ({exc}) "
                              "(setting s3_endpoint_url)") from exc
    except boto.ParamValidationError as exc:
        raise BlobError(f"{place.describe()}: cannot {what}: {exc} (settings s3_bucket, s3_prefix)") from exc
    except boto.ClientError as exc:
        raise _client_error(place, what, key, exc, creating) from exc


def _client_error(place: S3Place, what: str, key: str, exc: boto.ClientError, creating: bool) -> BlobError:
    code, message = _code(exc)
    detail = f"{code}: {message}" if message else code
    if creating:
        return BlobUnavailable(f"the bucket {place.bucket!r} does not exist at {place.endpoint} and creating it "
                               f"was refused ({detail}) (setting s3_bucket)")
    if code == "NoSuchBucket" or (code in _MISSING and not key):
        return place.no_bucket()
    if code in _MISSING:
        return BlobNotFound(f"no object {key!r} in {place.describe()}")
    if code in _REFUSED:
        return BlobUnavailable(f"{place.describe()} refused access to {what} ({detail}): the credentials are "
                               f"wrong or lack permission on the bucket ({_CREDENTIALS}, s3_bucket)")
    return BlobError(f"{place.describe()} could not {what} ({detail})")


__all__ = ["S3Place", "is_missing", "s3_errors"]
