"""A fault-injecting HTTP proxy for an OpenAI-compatible server, for drills.

Each chat request is, with probability ``rate`` (seeded), answered with a fault instead of being
passed on, the kinds taking turns: HTTP 500, HTTP 429 with Retry-After, the connection dropped
without an answer, a reply cut off mid-JSON, a well-formed reply whose text is garbage. Every
other request is forwarded to ``upstream`` and its answer relayed unchanged.
"""

from __future__ import annotations

import json
import random
import threading
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.loopback import LoopbackServer

FAULTS = ("http_500", "http_429", "dropped", "truncated", "garbage")
GARBAGE = "\ufffd\ufffd <<<%%% 0x00 0x1f \ufffd"


class FaultProxy(LoopbackServer):
    owner_attribute = "proxy"  # the handler reaches the proxy as self.proxy

    def __init__(self, upstream: str, rate: float = 0.3, seed: int = 23) -> None:
        self.upstream = upstream.rstrip("/")  # e.g. http://127.0.0.1:1234/v1
        self.rate = rate
        self.injected: Counter[str] = Counter()
        self.forwarded = 0
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def pick(self, path: str) -> str | None:
        """The fault for this request, or None to forward it."""
        if not path.endswith("/chat/completions"):
            return None
        with self._lock:
            if self._random.random() >= self.rate:
                self.forwarded += 1
                return None
            # the kinds take turns, so every kind shows up once five faults have happened
            fault = FAULTS[sum(self.injected.values()) % len(FAULTS)]
            self.injected[fault] += 1
            return fault


class _Handler(BaseHTTPRequestHandler):
    proxy: FaultProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fault = self.proxy.pick(self.path)
        if fault == "dropped":
            self.close_connection = True
            self.connection.close()
            return
        if fault == "http_500":
            self._send(500, json.dumps({"error": {"message": "injected fault", "type": "server_error"}}).encode())
            return
        if fault == "http_429":
            self._send(429, json.dumps({"error": {"message": "slow down", "type": "rate_limit"}}).encode(),
                       {"Retry-After": "0"})
            return
        upstream = urllib.request.Request(self.proxy.upstream + self.path.removeprefix("/v1"), data=raw,
                                          headers={"Content-Type": "application/json",
                                                   "Authorization": self.headers.get("Authorization", "")})
        with urllib.request.urlopen(upstream, timeout=60) as answer:
            status, body = answer.status, answer.read()
        if fault == "truncated":
            self._send(200, body[: len(body) // 2])
        elif fault == "garbage":
            reply = json.loads(body)
            reply["choices"][0]["message"]["content"] = GARBAGE
            self._send(200, json.dumps(reply).encode())
        else:
            self._send(status, body)


FaultProxy.handler = _Handler
