"""Limits at the door: every request is checked before a route sees it, from settings, with a
message saying which limit and which setting.

- the whole request body: ``max_request_bytes`` (Flask's MAX_CONTENT_LENGTH; an upload's file is
  held to ``max_file_bytes`` while it streams, see web.uploads);
- a JSON body: valid JSON without NaN or Infinity, nested at most ``_MAX_DEPTH`` deep, no list
  longer than ``max_list_items``, no ``question`` longer than ``max_question_chars``, no
  ``page_size`` over ``max_page_size``;
- query strings: ``page_size`` as in a body.

A refused request is answered with HTTP 413 (too large) or 400 and RAGFlow's envelope, code 101.
"""

from __future__ import annotations

import json
import math
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from kbgraph.config import Settings
from web.envelope import ARGUMENT_ERROR

_MAX_DEPTH = 64


class LimitExceeded(ValueError):
    pass


def _refuse_constant(name: str) -> float:
    raise LimitExceeded(f"{name} is not a valid JSON number; send a finite number")


def _loads(raw: bytes) -> Any:
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:
        raise LimitExceeded(f"the JSON body is nested more than {_MAX_DEPTH} levels deep") from None
    except (ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, LimitExceeded):
            raise
        return None  # malformed: the route's own parser answers with RAGFlow's message


def _walk(value: Any, settings: Settings, key: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise LimitExceeded(f"the JSON body is nested more than {_MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_field(str(k), v, settings)
            _walk(v, settings, str(k), depth + 1)
    elif isinstance(value, list):
        if len(value) > settings.max_list_items:
            raise LimitExceeded(f"`{key}` has {len(value)} items; at most {settings.max_list_items} are accepted "
                                "(setting max_list_items)")
        for item in value:
            _walk(item, settings, key, depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):  # 1e999 reads as inf
        raise LimitExceeded(f"`{key}` must be a finite number")


def _check_field(key: str, value: Any, settings: Settings) -> None:
    if key == "question" and isinstance(value, str) and len(value) > settings.max_question_chars:
        raise LimitExceeded(f"`question` has {len(value)} characters; at most {settings.max_question_chars} are "
                            "accepted (setting max_question_chars)")
    if key == "page_size":
        _check_page_size(value, settings)


def _check_page_size(value: Any, settings: Settings) -> None:
    try:
        size = int(value)
    except (TypeError, ValueError, OverflowError):
        return  # not a number: the route says so in its own words
    if size > settings.max_page_size:
        raise LimitExceeded(f"`page_size` is {size}; at most {settings.max_page_size} rows are returned per page "
                            "(setting max_page_size)")


def check_request(settings: Settings) -> None:
    """Raise LimitExceeded when the current request breaks a limit."""
    if "page_size" in request.args:
        _check_page_size(request.args["page_size"], settings)
    if request.mimetype == "application/json":
        raw = request.get_data(cache=True)
        if raw.strip():
            body = _loads(raw)
            if body is not None:
                _walk(body, settings, "body", 0)


def _refusal(message: str, status: int) -> Response:
    response = jsonify({"code": ARGUMENT_ERROR, "message": message})
    response.status_code = status
    return response


def install_limits(app: Flask, settings: Settings) -> None:
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_bytes

    @app.before_request
    def _limits() -> Response | None:
        try:
            check_request(settings)
        except LimitExceeded as exc:
            return _refusal(str(exc), 400)
        return None

    @app.errorhandler(RequestEntityTooLarge)
    def _too_large(_: RequestEntityTooLarge) -> Response:
        return _refusal(f"the request is larger than the limit of {settings.max_request_bytes} bytes "
                        "(setting max_request_bytes)", 413)
