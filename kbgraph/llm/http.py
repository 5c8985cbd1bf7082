"""The HTTP transport under the openai SDK for plain-HTTP endpoints: the standard library's http.client.

Plain HTTP means a model on the same machine or network (vLLM, Ollama, llama.cpp, a caching
proxy), where a call's latency can be a millisecond and the client's own work shows: the SDK's
default stack (httpcore's connection pool and the h11 parser) spends ~0.4 ms of CPU per request
here, http.client ~0.1 ms, and indexing makes hundreds of calls per document. The SDK stays in
charge of everything above the wire (request building, errors, streaming); only the transport
is replaced, through the ``http_client`` argument the SDK offers for this.

Two socket settings come with it. Requests go out in one send with TCP_NODELAY. And servers that
write a response's headers and body in two sends without TCP_NODELAY (Python's ``http.server``
and many small shims) hold the body back under Nagle's algorithm until the client acknowledges
the headers, which Linux delays by up to 40 ms; asking for an immediate ACK (TCP_QUICKACK, which
the kernel resets on its own) before each read removes that stall.

HTTPS endpoints and proxied setups keep the SDK's default client: their latency dwarfs the
client's CPU, and the SDK's TLS and proxy handling is the one to trust there.
"""

from __future__ import annotations

import http.client
import os
import select
import socket
import sys
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)
_READ_SIZE = 1 << 16
_IDLE_PER_HOST = 32
# an idle keep-alive connection the server closed fails like this on its next use
_STALE_ERRORS = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


def _httpx() -> ModuleType:
    """The httpx distribution this SDK release is built on (httpx, or a renamed fork of it)."""
    import openai

    client_class = next(c for c in openai.DefaultHttpxClient.__mro__[1:] if c.__name__ == "Client")
    return sys.modules[client_class.__module__.split(".")[0]]


def _proxied() -> bool:
    return any(os.environ.get(name) for base in ("http_proxy", "https_proxy", "all_proxy")
               for name in (base, base.upper()))


def _ack_promptly(sock: socket.socket | None) -> None:
    if _QUICKACK is not None and sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        except OSError:
            pass


def _closed_while_idle(conn: http.client.HTTPConnection) -> bool:
    """An idle keep-alive socket with something to read has been closed by the server (or sent
    data nobody asked for): either way it cannot carry the next request."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class _ConnectionPool:
    """Idle keep-alive connections per (host, port); a connection serves one request at a time."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()

    def take(self, host: str, port: int) -> http.client.HTTPConnection | None:
        with self._lock:
            idle = self._idle.get((host, port))
            while idle:
                conn = idle.pop()
                if not _closed_while_idle(conn):
                    return conn
                conn.close()
        return None

    def give_back(self, host: str, port: int, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault((host, port), [])
            if len(idle) < _IDLE_PER_HOST:
                idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            connections = [c for idle in self._idle.values() for c in idle]
            self._idle.clear()
        for conn in connections:
            conn.close()


def build_transport_class(httpx: ModuleType) -> type:
    """The transport class, built against the SDK's httpx module (so its exception and stream
    types are the ones the SDK catches)."""

    def as_httpx_error(exc: BaseException, doing: str) -> Exception:
        """The httpx exception the SDK turns into its own timeout or connection error."""
        if isinstance(exc, TimeoutError):
            return httpx.ReadTimeout(f"{doing}: {exc}")
        if isinstance(exc, http.client.HTTPException):
            return httpx.RemoteProtocolError(f"{doing}: {exc!r}")
        return httpx.ReadError(f"{doing}: {exc}")

    class ResponseBody(httpx.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, response: http.client.HTTPResponse, conn: http.client.HTTPConnection,
                     release: Any) -> None:
            self._response, self._conn, self._release = response, conn, release
            self._finished = False

        def __iter__(self) -> Iterator[bytes]:
            while not self._finished:
                _ack_promptly(self._conn.sock)
                try:
                    piece = self._response.read1(_READ_SIZE)
                except (OSError, http.client.HTTPException) as exc:
                    raise as_httpx_error(exc, "reading the response") from exc
                if not piece:
                    self._finished = True
                    break
                yield piece

        def close(self) -> None:
            # only a fully read response leaves the connection ready for the next request
            reusable = self._finished and not self._response.will_close
            self._response.close()
            self._release(self._conn, reusable)

    class StdlibTransport(httpx.BaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            self._pool = _ConnectionPool()

        def handle_request(self, request: Any) -> Any:
            url = request.url
            if url.scheme != "http":
                raise httpx.UnsupportedProtocol(f"this transport speaks plain http, not {url.scheme!r}")
            host, port = url.host, url.port or 80
            timeouts = request.extensions.get("timeout") or {}
            body = request.read()
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw
                       if k.lower() != b"transfer-encoding"]
            if body and not any(k.lower() == "content-length" for k, _ in headers):
                headers.append(("Content-Length", str(len(body))))
            target = url.raw_path.decode("ascii")

            response = None
            conn = self._pool.take(host, port)
            if conn is not None:
                try:
                    response = self._exchange(conn, request.method, target, headers, body, timeouts)
                except _STALE_ERRORS:
                    conn.close()  # closed by the server between requests: once more, on a new connection
                except BaseException:
                    conn.close()
                    raise
            if response is None:
                conn = self._connect(host, port, timeouts.get("connect"))
                try:
                    response = self._exchange(conn, request.method, target, headers, body, timeouts)
                except _STALE_ERRORS as exc:
                    conn.close()
                    raise httpx.RemoteProtocolError(f"the server closed the connection: {exc!r}") from exc
                except BaseException:
                    conn.close()
                    raise
            return httpx.Response(
                response.status, headers=response.getheaders(),
                stream=ResponseBody(response, conn, lambda c, ok: self._release(host, port, c, ok)),
                extensions={"http_version": b"HTTP/1.1", "reason_phrase": response.reason.encode("latin-1")})

        def _release(self, host: str, port: int, conn: http.client.HTTPConnection, reusable: bool) -> None:
            if reusable:
                self._pool.give_back(host, port, conn)
            else:
                conn.close()

        @staticmethod
        def _connect(host: str, port: int, timeout: float | None) -> http.client.HTTPConnection:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
            try:
                conn.connect()
            except TimeoutError as exc:
                raise httpx.ConnectTimeout(f"connecting to {host}:{port}: {exc}") from exc
            except OSError as exc:
                raise httpx.ConnectError(f"connecting to {host}:{port}: {exc}") from exc
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return conn

        @staticmethod
        def _exchange(conn: http.client.HTTPConnection, method: str, target: str,
                      headers: list[tuple[str, str]], body: bytes, timeouts: dict[str, float | None]
                      ) -> http.client.HTTPResponse:
            """Send the request and read the status line and headers; the body is read by the stream.
            Stale-connection errors pass through for the caller's one retry."""
            try:
                conn.sock.settimeout(timeouts.get("write"))
                conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
                for name, value in headers:
                    conn.putheader(name, value)
                conn.endheaders(body or None)  # headers and a bytes body leave in one send
                conn.sock.settimeout(timeouts.get("read"))
                _ack_promptly(conn.sock)
                return conn.getresponse()
            except _STALE_ERRORS:
                raise
            except (OSError, http.client.HTTPException) as exc:
                raise as_httpx_error(exc, "waiting for the response") from exc

        def close(self) -> None:
            self._pool.close()

    return StdlibTransport


_TRANSPORT_CLASS: type | None = None
_TRANSPORT_LOCK = threading.Lock()


def stdlib_transport() -> Any:
    global _TRANSPORT_CLASS
    with _TRANSPORT_LOCK:
        if _TRANSPORT_CLASS is None:
            _TRANSPORT_CLASS = build_transport_class(_httpx())
    return _TRANSPORT_CLASS()


def sdk_http_client(base_url: str, timeout: float) -> Any | None:
    """An ``http_client`` for ``openai.OpenAI`` on the stdlib transport, or None to keep the SDK's own
    (HTTPS, a proxy in the environment, or an SDK whose httpx layout is not the expected one)."""
    if urlsplit(base_url).scheme != "http" or _proxied():
        return None
    try:
        import openai

        return openai.DefaultHttpxClient(transport=stdlib_transport(), timeout=timeout)
    except Exception:  # an SDK/httpx layout we do not know: the default client still works
        return None


__all__ = ["sdk_http_client", "stdlib_transport"]
