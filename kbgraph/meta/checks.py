"""The argument checks of the metadata calls: names, e-mail addresses, chunking, statuses, counts.

Each raises ``MetaError`` with a message written for users (the web app shows it as it is). They
need no session, so every group of tables (tenants, knowledge bases, documents, tasks, chats) runs
them before it opens a transaction; checks that read rows live with the rows they read.
"""

from __future__ import annotations

import re
from typing import Any

from kbgraph.meta.schemas import STATUSES, MetaError

MAX_CHUNK_TOKENS = 8192
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
_KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")

_ASSISTANT_FIELDS = frozenset({
    "description", "icon", "language", "kb_ids", "llm_id", "llm_setting", "prompt_config", "similarity_threshold",
    "vector_similarity_weight", "top_n", "top_k", "rerank_id", "do_refer"})


def check_name(name: Any, what: str, limit: int) -> str:
    if not isinstance(name, str) or not name.strip():
        raise MetaError(f"{what} name must be a non-empty string")
    name = name.strip()
    if len(name) > limit:
        raise MetaError(f"{what} name is {len(name)} characters long; the limit is {limit}")
    return name


def check_email(email: Any) -> str:
    if not isinstance(email, str) or not _EMAIL_RE.match(email.strip()) or len(email.strip()) > 254:
        raise MetaError("enter an e-mail address such as name@example.com")
    return email.strip().lower()


def check_chunking(chunk_tokens: int, chunk_overlap: int) -> None:
    if not isinstance(chunk_tokens, int) or not 1 <= chunk_tokens <= MAX_CHUNK_TOKENS:
        raise MetaError(f"chunk_tokens must be an integer from 1 to {MAX_CHUNK_TOKENS}, not {chunk_tokens!r}")
    if not isinstance(chunk_overlap, int) or not 0 <= chunk_overlap < chunk_tokens:
        raise MetaError(
            f"chunk_overlap must be an integer from 0 to chunk_tokens - 1 ({chunk_tokens - 1}), not {chunk_overlap!r}"
        )


def check_status(status: str) -> None:
    if status not in STATUSES:
        raise MetaError(f"status {status!r} is not one of {list(STATUSES)}")


def check_progress(progress: float | None) -> None:
    if progress is not None and not 0.0 <= progress <= 1.0:
        raise MetaError(f"progress must lie between 0 and 1, not {progress!r}")


def check_count(name: str, value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or value < 0):
        raise MetaError(f"{name} must be a non-negative integer, not {value!r}")


def check_step(status: str, progress: float | None, chunk_count: int | None, token_count: int | None) -> None:
    """The fields of one step of a document's run (``set_document_status``, ``set_document_statuses``)."""
    check_status(status)
    check_progress(progress)
    check_count("chunk_count", chunk_count)
    check_count("token_count", token_count)


def check_content_hash(content_hash: str) -> None:
    """An empty hash means "not known"; any other must be a sha256 in lower-case hex."""
    if content_hash and not _HASH_RE.match(content_hash):
        raise MetaError("content_hash must be the lower-case hex sha256 of the file's bytes")


def check_task_kind(kind: Any) -> None:
    if not isinstance(kind, str) or not _KIND_RE.match(kind):
        raise MetaError(f"task kind {kind!r} must be a short lower-case word such as 'parse' or 'extract'")


def check_assistant_fields(fields: dict[str, Any]) -> None:
    unknown = sorted(set(fields) - _ASSISTANT_FIELDS)
    if unknown:
        raise MetaError(f"unknown chat setting(s): {', '.join(unknown)}")
