"""What every answer of the app carries for the browser's protection, and what every request must
not carry.

- Behind ``web_proxy_hops`` trusted proxies, werkzeug's ProxyFix makes the client's address, scheme
  and host the request's own (so a request that came over HTTPS is ``request.is_secure``).
- The session cookie is ``Secure`` whenever the request came over HTTPS (a cookie set over plain HTTP
  cannot be ``Secure``: the browser would drop it, and a local ``http://`` install could not sign in).
- Headers: a Content-Security-Policy allowing this site's own scripts and styles only and no framing
  (``frame-ancestors 'none'``, and ``X-Frame-Options: DENY`` for older browsers), ``nosniff``, a
  same-origin referrer.
- Text that no database stores (NUL characters, unpaired surrogates) anywhere in the path, the query,
  a form or a JSON body is refused as bad input before a route sees it: RAGFlow's envelope (code
  101) under /api/v1, a page elsewhere.
"""

from __future__ import annotations

import json
import re
from typing import Any

from flask import Flask, Request, Response, jsonify, render_template, request
from flask.sessions import SecureCookieSessionInterface
from werkzeug.middleware.proxy_fix import ProxyFix

from kbgraph.config import Settings
from web.envelope import ARGUMENT_ERROR

# sigma draws with WebGL and exports PNGs as data: and blob: URLs; styles set from scripts go through
# the CSSOM, which style-src does not govern, so no 'unsafe-inline' is needed
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
                           "connect-src 'self'; font-src 'self'; worker-src 'self' blob:; object-src 'none'; "
                           "base-uri 'self'; form-action 'self'; frame-ancestors 'none'")
# a character no text column takes: PostgreSQL refuses NUL in text, and no encoder writes a lone
# surrogate (JSON's "\ud800" decodes to one)
_INVALID = re.compile("[\x00\ud800-\udfff]")
# JSON escapes that decode to such a character: only a body holding one is parsed to be sure
_ESCAPED = re.compile(rb"\\u(0000|d[89a-f][0-9a-f]{2})", re.IGNORECASE)


class InvalidText(ValueError):
    pass


class _HttpsAwareSessions(SecureCookieSessionInterface):
    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config.get("SESSION_COOKIE_SECURE")) or request.is_secure


def _check(where: str, value: str) -> None:
    if _INVALID.search(value):
        raise InvalidText(f"{where} holds a character that is not valid text (a NUL or an unpaired surrogate); "
                          "remove it and send the request again")


def _walk_json(value: Any, where: str) -> None:
    if isinstance(value, str):
        _check(where, value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check(f"a key of {where}", str(key))
            _walk_json(item, f"`{key}`")
    elif isinstance(value, list):
        for item in value:
            _walk_json(item, where)


def check_request_text(req: Request) -> None:
    """Raise InvalidText when any text the request carries cannot be stored."""
    _check("the path", req.path)
    for key, value in req.args.items(multi=True):
        _check(f"the query parameter `{key}`", key + value)
    if req.mimetype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        for key, value in req.form.items(multi=True):
            _check(f"the form field `{key}`", key + value)
        for key, upload in req.files.items(multi=True):
            _check(f"the name of the uploaded file `{key}`", upload.filename or "")
    raw = req.get_data(cache=True) if req.mimetype == "application/json" else b""
    if raw and (b"\x00" in raw or _ESCAPED.search(raw)):
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            return  # malformed: the route answers with its own message
        _walk_json(body, "the JSON body")


def _refuse(message: str) -> Response | tuple[Any, int]:
    if request.path.startswith("/api/v1/") or request.path == "/api/v1":
        response = jsonify({"code": ARGUMENT_ERROR, "message": message})
        response.status_code = 400
        return response
    if request.path.startswith("/ui/api/"):
        return jsonify({"error": message}), 400
    return render_template("error.html", message=message, status=400), 400


def install_security(app: Flask, settings: Settings) -> None:
    if settings.web_proxy_hops > 0:
        hops = settings.web_proxy_hops
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops, x_port=hops)  # type: ignore[method-assign]
    app.session_interface = _HttpsAwareSessions()

    @app.before_request
    def _valid_text() -> Response | tuple[Any, int] | None:
        try:
            check_request_text(request)
        except InvalidText as exc:
            return _refuse(str(exc))
        return None

    @app.after_request
    def _headers(response: Response) -> Response:
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response
