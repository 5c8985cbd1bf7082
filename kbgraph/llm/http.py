"""The HTTP transport under the openai SDK for plain-HTTP endpoints: a socket and httptools' parser.

Plain HTTP means a model on the same machine or network (vLLM, Ollama, llama.cpp, a caching
proxy), where a call's latency can be a millisecond and the client's own work shows: indexing
makes hundreds of calls per document. The SDK's default stack (httpcore's connection pool and the
h11 parser) spends ~0.4 ms of CPU per exchange here; the standard library's http.client, ~0.2 ms
more than this transport (most of it parsing the reply's headers with the email package). Here
the request goes out in one send and the reply is parsed by httptools (llhttp, the parser of
Node.js), ~0.01 ms. The SDK stays in
charge of everything above the wire (request building, errors, streaming); only the transport is
replaced, through the ``http_client`` argument the SDK offers for this.

Two socket settings come with it. Requests go out in one send with TCP_NODELAY. And servers that
write a response's headers and body in two sends without TCP_NODELAY (Python's ``http.server``
and many small shims) hold the body back under Nagle's algorithm until the client acknowledges
the headers, which Linux delays by up to 40 ms; asking for an immediate ACK (TCP_QUICKACK, which
the kernel resets on its own) before each read removes that stall.

HTTPS endpoints and proxied setups keep the SDK's default client: their latency dwarfs the
client's CPU, and the SDK's TLS and proxy handling is the one to trust there.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import httptools

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)
_READ_SIZE = 1 << 16
_IDLE_PER_HOST = 32


class _Stale(Exception):
    """The server closed a kept-alive connection before answering: the request never reached it
    (or was dropped unanswered), so it may go again on a new connection."""


def _httpx() -> ModuleType:
    """The httpx distribution this SDK release is built on (httpx, or a renamed fork of it)."""
    import openai

    client_class = next(c for c in openai.DefaultHttpxClient.__mro__[1:] if c.__name__ == "Client")
    return sys.modules[client_class.__module__.split(".")[0]]


def _proxied() -> bool:
    return any(os.environ.get(name) for base in ("http_proxy", "https_proxy", "all_proxy")
               for name in (base, base.upper()))


def _ack_promptly(sock: socket.socket) -> None:
    if _QUICKACK is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        except OSError:
            pass


def _closed_while_idle(sock: socket.socket) -> bool:
    """An idle keep-alive socket with something to read has been closed by the server (or sent
    data nobody asked for): either way it cannot carry the next request."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class _Reply:
    """httptools' callbacks for one exchange: the final status, its headers and the body pieces
    as they arrive. Interim replies (100 Continue, 103 Early Hints) are skipped."""

    __slots__ = ("parser", "status", "reason", "headers", "pieces", "head_done", "done", "keep_alive", "messages",
                 "interim")

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.pieces: list[bytes] = []
        self.head_done = self.done = self.keep_alive = False
        self.messages = self.interim = 0

    def on_message_begin(self) -> None:
        self.messages += 1

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self.interim += 1
            self.reason, self.headers = b"", []
            return
        self.status, self.head_done = status, True

    def on_body(self, piece: bytes) -> None:
        self.pieces.append(piece)

    def on_message_complete(self) -> None:
        if self.head_done and not self.done:
            # asked here: once the parser moves on, it answers for the next message
            self.done, self.keep_alive = True, bool(self.parser.should_keep_alive())

    def extra(self) -> bool:
        """Whether the server sent more than this reply (nobody asked for a second one)."""
        return self.messages > self.interim + 1


_PARSE_ERRORS = (httptools.HttpParserError, httptools.HttpParserUpgrade)


class _Exchange:
    """One request and its reply on one connection."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reply = _Reply()
        self.received = 0
        self.eof = False
        self.broken = False  # bytes after the reply, or an unparseable tail: the connection is done

    def read(self) -> None:
        """Feed the parser what the socket has next (blocking); EOF sets ``eof``."""
        _ack_promptly(self.sock)
        data = self.sock.recv(_READ_SIZE)
        if not data:
            self.eof = True
            return
        self.received += len(data)
        reply = self.reply
        try:
            reply.parser.feed_data(data)
        except _PARSE_ERRORS:
            if not reply.done:
                raise
            self.broken = True  # garbage after a complete reply
        if reply.extra():
            self.broken = True

    def read_head(self) -> None:
        """Read until the final status and its headers are in."""
        while not self.reply.head_done:
            self.read()
            if self.eof:
                if self.received == 0:
                    raise _Stale("the server closed the connection without answering")
                raise httptools.HttpParserError("the connection closed inside the reply's headers")

    def body_ends_at_close(self) -> bool:
        names = {name.lower() for name, _ in self.reply.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names


def build_transport_class(httpx: ModuleType) -> type:
    """The transport class, built against the SDK's httpx module (so its exception and stream
    types are the ones the SDK catches)."""

    def as_httpx_error(exc: BaseException, doing: str) -> Exception:
        """The httpx exception the SDK turns into its own timeout or connection error."""
        if isinstance(exc, TimeoutError):
            return httpx.ReadTimeout(f"{doing}: {exc}")
        if isinstance(exc, _PARSE_ERRORS):
            return httpx.RemoteProtocolError(f"{doing}: {exc!r}")
        return httpx.ReadError(f"{doing}: {exc}")

    class ResponseBody(httpx.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, exchange: _Exchange, release: Any, head_only: bool) -> None:
            self._exchange, self._release = exchange, release
            # llhttp itself ends 204 and 304 replies at their headers; a HEAD reply it cannot know
            self._finished = head_only or exchange.reply.done

        def __iter__(self) -> Iterator[bytes]:
            exchange = self._exchange
            reply = exchange.reply
            while True:
                if reply.pieces:
                    pieces, reply.pieces = reply.pieces, []
                    yield from pieces
                if self._finished:
                    return
                try:
                    exchange.read()
                except (OSError, *_PARSE_ERRORS) as exc:
                    raise as_httpx_error(exc, "reading the response") from exc
                if reply.done:
                    self._finished = True
                elif exchange.eof:
                    if not exchange.body_ends_at_close():
                        raise httpx.RemoteProtocolError("the server closed the connection inside the reply")
                    exchange.broken = self._finished = True  # a body that ends with the connection

        def close(self) -> None:
            exchange = self._exchange
            # only a fully read reply on a connection the server keeps open can carry the next request
            reusable = (self._finished and exchange.reply.done and not exchange.broken and not exchange.eof
                        and exchange.reply.keep_alive)
            self._release(exchange.sock, reusable)

    class SocketTransport(httpx.BaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            self._idle: dict[tuple[str, int], list[socket.socket]] = {}
            self._lock = threading.Lock()

        def handle_request(self, request: Any) -> Any:
            url = request.url
            if url.scheme != "http":
                raise httpx.UnsupportedProtocol(f"this transport speaks plain http, not {url.scheme!r}")
            host, port = url.host, url.port or 80
            timeouts = request.extensions.get("timeout") or {}
            message = self._message(request)

            exchange = None
            sock = self._take(host, port)
            if sock is not None:
                try:
                    exchange = self._exchange(sock, message, timeouts)
                except (_Stale, ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
                    sock.close()  # closed by the server between requests: once more, on a new connection
                except BaseException:
                    sock.close()
                    raise
            if exchange is None:
                sock = self._connect(host, port, timeouts.get("connect"))
                try:
                    exchange = self._exchange(sock, message, timeouts)
                except (_Stale, ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as exc:
                    sock.close()
                    raise httpx.RemoteProtocolError(f"the server closed the connection: {exc!r}") from exc
                except BaseException:
                    sock.close()
                    raise
            reply = exchange.reply
            return httpx.Response(
                reply.status, headers=reply.headers,
                stream=ResponseBody(exchange, lambda s, ok: self._release(host, port, s, ok),
                                    head_only=request.method == "HEAD"),
                extensions={"http_version": b"HTTP/1.1", "reason_phrase": reply.reason})

        @staticmethod
        def _message(request: Any) -> bytes:
            """The request as it goes on the wire: request line, headers and body, in one piece."""
            body = request.read()
            lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
            has_length = False
            for name, value in request.headers.raw:
                if b"\r" in name or b"\n" in name or b"\r" in value or b"\n" in value:
                    raise httpx.LocalProtocolError(f"line break in the request header {name!r}")
                lowered = name.lower()
                if lowered == b"transfer-encoding":
                    continue  # the body is sent whole, with its length
                has_length = has_length or lowered == b"content-length"
                lines.append(name + b": " + value)
            if body and not has_length:
                lines.append(b"Content-Length: %d" % len(body))
            return b"\r\n".join(lines) + b"\r\n\r\n" + body

        @staticmethod
        def _exchange(sock: socket.socket, message: bytes, timeouts: dict[str, float | None]) -> _Exchange:
            """Send the request and read the reply's status and headers; the body is read by the
            stream. Stale-connection errors pass through for the caller's one retry."""
            exchange = _Exchange(sock)
            try:
                sock.settimeout(timeouts.get("write"))
                sock.sendall(message)
                sock.settimeout(timeouts.get("read"))
                exchange.read_head()
            except _Stale:
                raise
            except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
                if exchange.received:
                    raise httpx.ReadError("the server reset the connection inside the reply") from None
                raise
            except (OSError, *_PARSE_ERRORS) as exc:
                raise as_httpx_error(exc, "waiting for the response") from exc
            return exchange

        @staticmethod
        def _connect(host: str, port: int, timeout: float | None) -> socket.socket:
            try:
                sock = socket.create_connection((host, port), timeout=timeout)
            except TimeoutError as exc:
                raise httpx.ConnectTimeout(f"connecting to {host}:{port}: {exc}") from exc
            except OSError as exc:
                raise httpx.ConnectError(f"connecting to {host}:{port}: {exc}") from exc
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock

        def _take(self, host: str, port: int) -> socket.socket | None:
            with self._lock:
                idle = self._idle.get((host, port))
                while idle:
                    sock = idle.pop()
                    if not _closed_while_idle(sock):
                        return sock
                    sock.close()
            return None

        def _release(self, host: str, port: int, sock: socket.socket, reusable: bool) -> None:
            if reusable:
                with self._lock:
                    idle = self._idle.setdefault((host, port), [])
                    if len(idle) < _IDLE_PER_HOST:
                        idle.append(sock)
                        return
            sock.close()

        def close(self) -> None:
            with self._lock:
                sockets = [s for idle in self._idle.values() for s in idle]
                self._idle.clear()
            for sock in sockets:
                sock.close()

    return SocketTransport


_TRANSPORT_CLASS: type | None = None
_TRANSPORT_LOCK = threading.Lock()


def socket_transport() -> Any:
    global _TRANSPORT_CLASS
    with _TRANSPORT_LOCK:
        if _TRANSPORT_CLASS is None:
            _TRANSPORT_CLASS = build_transport_class(_httpx())
    return _TRANSPORT_CLASS()


def sdk_http_client(base_url: str, timeout: float) -> Any | None:
    """An ``http_client`` for ``openai.OpenAI`` on the socket transport, or None to keep the SDK's own
    (HTTPS, a proxy in the environment, or an SDK whose httpx layout is not the expected one)."""
    if urlsplit(base_url).scheme != "http" or _proxied():
        return None
    try:
        import openai

        return openai.DefaultHttpxClient(transport=socket_transport(), timeout=timeout)
    except Exception:  # an SDK/httpx layout we do not know: the default client still works
        return None


__all__ = ["sdk_http_client", "socket_transport"]
