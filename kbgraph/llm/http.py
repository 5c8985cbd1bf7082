"""The HTTP client under the openai SDK: its default, plus prompt TCP acknowledgements on Linux.

Servers that write a response's headers and body in two sends without TCP_NODELAY (Python's
``http.server``, and so many small OpenAI-compatible shims and proxies) hold the body back under
Nagle's algorithm until the client acknowledges the headers, and Linux delays that
acknowledgement by up to 40 ms. Every model call then costs ~40 ms of idle waiting, which at
hundreds of calls per document dominates indexing with a fast model. Asking the kernel for an
immediate ACK (TCP_QUICKACK, which it resets on its own) before each read removes the stall and
costs one setsockopt call per read. Anything unexpected in the SDK's HTTP stack leaves its
default client in place.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)
_COALESCE_LIMIT = 1 << 20


class _QuickAckStream:
    """Quick ACKs before each read; and a request's pieces (h11 hands over the headers and the
    body separately) go out in one send when the response is first read, not one send each:
    a send on loopback costs a few hundred microseconds of kernel time here."""

    def __init__(self, inner: Any, sock: socket.socket) -> None:
        self._inner = inner
        self._sock = sock
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._write_timeout: float | None = None

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        self._pending.append(bytes(buffer))
        self._pending_size += len(buffer)
        self._write_timeout = timeout
        if self._pending_size >= _COALESCE_LIMIT:  # big uploads are not held in memory
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending, self._pending_size = [], 0
            self._inner.write(data, self._write_timeout)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._flush()
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        except OSError:
            pass
        return self._inner.read(max_bytes, timeout)

    def close(self) -> None:
        self._pending, self._pending_size = [], 0
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _QuickAckBackend:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        stream = self._inner.connect_tcp(*args, **kwargs)
        sock = stream.get_extra_info("socket")
        return _QuickAckStream(stream, sock) if isinstance(sock, socket.socket) else stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _proxied() -> bool:
    # an explicit transport makes httpx ignore the proxy variables; the SDK's client honours them
    return any(os.environ.get(name) for base in ("http_proxy", "https_proxy", "all_proxy")
               for name in (base, base.upper()))


def sdk_http_client(timeout: float) -> Any | None:
    """An ``http_client`` for ``openai.OpenAI`` with quick ACKs, or None to keep the SDK's own."""
    if _QUICKACK is None or _proxied():
        return None
    try:
        import openai

        base = openai.DefaultHttpxClient
        # the httpx distribution this SDK release is built on (httpx or a renamed fork)
        httpx = sys.modules[next(c for c in base.__mro__[1:] if c.__name__ == "Client").__module__.split(".")[0]]
        transport = httpx.HTTPTransport(limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100))
        pool = transport._pool
        backend = getattr(pool, "_network_backend", None)
        if backend is None or not hasattr(backend, "connect_tcp"):
            return None
        pool._network_backend = _QuickAckBackend(backend)
        return base(transport=transport, timeout=timeout)
    except Exception:  # an SDK/httpx layout we do not know: the default client still works
        return None


__all__ = ["sdk_http_client"]
