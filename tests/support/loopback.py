"""A test server on a free loopback port, served from a daemon thread: what the scripted model and
the fault proxy share."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar, Self


class LoopbackServer:
    """Subclasses name their request handler and the attribute through which it reaches them."""

    handler: ClassVar[type[BaseHTTPRequestHandler]]
    owner_attribute: ClassVar[str]
    _server: ThreadingHTTPServer | None = None

    def start(self) -> Self:
        handler = type("Handler", (self.handler,), {self.owner_attribute: self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True  # a handler sleeping for a timeout test must not block stop
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"
