"""An HTTP relay in front of a real server, for failures too rare to provoke: every request goes to
``upstream`` unchanged (its Host header too, so a signed S3 request still verifies), and the next
answers to the requests ``matches`` picks go through ``rewrites`` first, one each.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from support.loopback import LoopbackServer

# (status, body) of the server's answer -> (status, body) to send instead
Rewrite = Callable[[int, bytes], tuple[int, bytes]]
_HOP_BY_HOP = ("connection", "content-length", "transfer-encoding", "keep-alive")


class RelayProxy(LoopbackServer):
    owner_attribute = "proxy"  # the handler reaches the proxy as self.proxy

    def __init__(self, upstream: str, matches: Callable[[str, str], bool]) -> None:
        self.upstream = urlsplit(upstream)
        self.matches = matches  # (method, path) -> whether the request's answer is rewritten
        self.rewrites: list[Rewrite] = []
        self.rewritten = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.base_url.removesuffix("/v1")

    def rewrite_for(self, method: str, path: str) -> Rewrite | None:
        if not self.matches(method, path):
            return None
        with self._lock:
            if not self.rewrites:
                return None
            self.rewritten += 1
            return self.rewrites.pop(0)


class _Handler(BaseHTTPRequestHandler):
    proxy: RelayProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _relay(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        upstream = http.client.HTTPConnection(self.proxy.upstream.hostname, self.proxy.upstream.port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection",)}
        upstream.request(self.command, self.path, body=body if body else None, headers=headers)
        answer = upstream.getresponse()
        status, data = answer.status, answer.read()
        kept = [(k, v) for k, v in answer.getheaders() if k.lower() not in _HOP_BY_HOP]
        upstream.close()
        rewrite = self.proxy.rewrite_for(self.command, self.path)
        if rewrite is not None:
            status, data = rewrite(status, data)
        self.send_response(status)
        for name, value in kept:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _relay


RelayProxy.handler = _Handler
