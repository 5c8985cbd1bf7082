"""RAGFlow's response envelope and return codes (as RAGFlow v0.22.1 answers its HTTP API).

Every answer is HTTP 200 with a JSON body; errors carry a code and the exact message RAGFlow
clients compare. Views raise ``ApiError`` and let the app's error handler render it.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from flask import Response, jsonify, request
from werkzeug.exceptions import HTTPException

SUCCESS = 0
EXCEPTION_ERROR = 100
ARGUMENT_ERROR = 101
DATA_ERROR = 102
OPERATING_ERROR = 103
CONNECTION_ERROR = 105  # RAGFlow's RetCode.CONNECTION_ERROR: a service the answer needs cannot be reached
PERMISSION_ERROR = 108
AUTHENTICATION_ERROR = 109
SERVER_ERROR = 500

log = logging.getLogger("web")


class ApiError(Exception):
    """An error answer: ``{"code": code, "message": message}`` (plus ``data`` when ``with_data``)."""

    def __init__(self, code: int, message: str, *, data: Any = None, with_data: bool = False) -> None:
        super().__init__(message)
        self.code, self.message, self.data, self.with_data = code, message, data, with_data

    def response(self) -> Response:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.with_data:
            body["data"] = self.data
        return jsonify(body)


def ok(data: Any = None, **extra: Any) -> Response:
    """RAGFlow's get_result: no ``message`` on success, ``data`` only when there is some."""
    body: dict[str, Any] = {"code": SUCCESS}
    if data is not None:
        body["data"] = data
    body.update(extra)
    return jsonify(body)


NOT_FOUND = 404  # RAGFlow's RetCode.NOT_FOUND


def http_error_response(exc: HTTPException) -> Response:
    """An HTTP error under /api/v1 (no such route, a method the route lacks...) in RAGFlow's envelope,
    with the HTTP status it stands for, so a monitor probing a missing endpoint sees the failure.
    RAGFlow itself answers these with HTTP 200, code 100 and the exception's repr; no Python repr
    reaches a client here."""
    status = exc.code or 500
    if status == 404:
        body = {"code": NOT_FOUND, "message": f"Not found: the API has no {request.path}", "data": None}
    elif status == 405:
        allowed = ", ".join(sorted(m for m in (exc.valid_methods or []) if m not in ("HEAD", "OPTIONS")))  # type: ignore[attr-defined]
        body = {"code": EXCEPTION_ERROR, "data": None,
                "message": f"Method Not Allowed: {request.method} is not served at {request.path}"
                           + (f" (it answers {allowed})" if allowed else "")}
    else:
        body = {"code": EXCEPTION_ERROR, "message": f"{exc.name}: {exc.description}", "data": None}
    response = jsonify(body)
    response.status_code = status
    return response


def log_internal_error(what: str) -> str:
    """Log the exception being handled under a fresh id and return the id (for the answer)."""
    error_id = uuid.uuid4().hex[:12]
    log.exception("%s [error id %s]", what, error_id)
    return error_id


def store_failure_message(exc: BaseException) -> str:
    """The answer to a request the document store failed (called while handling it: the details,
    which name hosts and indices, are logged under the id the answer gives)."""
    from kbgraph.store.base import StoreUnavailable

    error_id = log_internal_error("the document store failed")
    if isinstance(exc, StoreUnavailable):
        return (f"The document store is unavailable: it cannot be reached or did not answer in time (error id "
                f"{error_id}). Try again once it is back; the server log has the details")
    return f"The document store could not answer this request (error id {error_id}); the server log has the details"


def _no_constants(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def json_body(*, required: bool = True) -> dict[str, Any]:
    """The request's JSON object, with RAGFlow's pre-validation messages.

    ``required=False`` treats an empty body as ``{}`` (endpoints whose every key is optional).
    """
    raw = request.get_data(cache=True)
    if not raw.strip() and not required:
        return {}
    content_type = request.mimetype or ""
    if content_type != "application/json":
        raise ApiError(ARGUMENT_ERROR, f"Unsupported content type: Expected application/json, got {request.content_type}")
    try:
        payload = json.loads(raw, parse_constant=_no_constants)  # NaN and Infinity are not JSON
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ApiError(ARGUMENT_ERROR, "Malformed JSON syntax: Missing commas/brackets or invalid encoding") from None
    if not isinstance(payload, dict):
        raise ApiError(ARGUMENT_ERROR, f"Invalid request payload: expected object, got {type(payload).__name__}")
    return payload
