"""The socket transport under the openai SDK (kbgraph/llm/http.py), over real sockets.

A small raw-socket server stands in for a model server so the tests control what happens on the
wire: keep-alive, a connection closed between requests, a chunked reply, a reply cut short.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable

import openai
import pytest

from kbgraph.llm.base import LLMError, Message
from kbgraph.llm.http import sdk_http_client
from kbgraph.llm.layers import ChatRequest, TransientLLMError
from kbgraph.llm.openai_chat import OpenAIChat

REPLY = json.dumps({"choices": [{"message": {"role": "assistant", "content": "pong"}}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()


def _read_request(conn: socket.socket, buffer: bytearray) -> bytes | None:
    """One request (head and Content-Length body) from the connection, or None at EOF."""
    while b"\r\n\r\n" not in buffer:
        data = conn.recv(65536)
        if not data:
            return None
        buffer += data
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return None
        rest += data
    buffer[:] = rest[length:]
    return head + b"\r\n\r\n" + rest[:length]


def _plain(body: bytes = REPLY) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)) + body


class RawServer:
    """Answers each request on a connection with ``replies(n)`` (n counts requests on that
    connection); closes the connection after a reply when ``close_after(n)`` says so."""

    def __init__(self, replies: Callable[[int], bytes], close_after: Callable[[int], bool] = lambda n: False):
        self.replies, self.close_after = replies, close_after
        self.connections = 0
        self.requests: list[bytes] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer, n = bytearray(), 0
        with conn:
            while (request := _read_request(conn, buffer)) is not None:
                self.requests.append(request)
                n += 1
                conn.sendall(self.replies(n))
                if self.close_after(n):
                    return

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def serve() -> Callable[..., RawServer]:
    servers: list[RawServer] = []

    def start(*args: object, **kwargs: object) -> RawServer:
        servers.append(RawServer(*args, **kwargs))  # type: ignore[arg-type]
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _ask(chat: OpenAIChat) -> str:
    return chat.complete(ChatRequest(messages=[Message("user", "ping")], phase="test")).text


def test_plain_http_gets_the_socket_transport_and_https_keeps_the_sdks() -> None:
    plain = sdk_http_client("http://127.0.0.1:1/v1", 5.0)
    assert plain is not None and type(plain._transport).__name__ == "SocketTransport"
    assert sdk_http_client("https://api.openai.com/v1", 5.0) is None


def test_proxy_settings_keep_the_sdks_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert sdk_http_client("http://127.0.0.1:1/v1", 5.0) is None


def test_keep_alive_one_connection_for_many_calls(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda n: _plain())
    chat = OpenAIChat(server.base_url, "m", "key-1")
    assert [_ask(chat) for _ in range(5)] == ["pong"] * 5
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"authorization: bearer key-1" in first.lower()
    assert json.loads(first.partition(b"\r\n\r\n")[2])["messages"] == [{"role": "user", "content": "ping"}]
    assert b"x-stainless-os" not in first.lower()  # the SDK's platform headers stay home


def test_connection_closed_between_requests_is_replaced(serve: Callable[..., RawServer]) -> None:
    # the server drops every connection after one reply without saying so (no "Connection: close")
    server = serve(lambda n: _plain(), close_after=lambda n: True)
    chat = OpenAIChat(server.base_url, "m", "k")
    assert [_ask(chat) for _ in range(3)] == ["pong"] * 3
    assert server.connections == 3


def test_chunked_reply(serve: Callable[..., RawServer]) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    pieces = [REPLY[:10], REPLY[10:]]
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    server = serve(lambda n: head + body)
    chat = OpenAIChat(server.base_url, "m", "k")
    assert _ask(chat) == "pong" and _ask(chat) == "pong"
    assert server.connections == 1


def test_reply_cut_short_is_a_transient_error(serve: Callable[..., RawServer]) -> None:
    truncated = b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"choices\""
    server = serve(lambda n: truncated, close_after=lambda n: True)
    chat = OpenAIChat(server.base_url, "m", "k")
    with pytest.raises(TransientLLMError):
        _ask(chat)


def test_error_status_keeps_the_servers_message(serve: Callable[..., RawServer]) -> None:
    body = json.dumps({"error": {"message": "model 'm' not found"}}).encode()
    reply = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    server = serve(lambda n: reply + body)
    chat = OpenAIChat(server.base_url, "m", "k")
    with pytest.raises(LLMError, match="model 'm' not found") as info:
        _ask(chat)
    assert not isinstance(info.value, TransientLLMError)
    # the error reply was read in full, so the connection serves the next call
    server.replies = lambda n: _plain()
    assert _ask(chat) == "pong" and server.connections == 1


def test_read_timeout_is_transient(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda n: b"")  # reads the request, never answers
    chat = OpenAIChat(server.base_url, "m", "k", timeout=0.3)
    with pytest.raises(TransientLLMError, match="(?i)timed? ?out"):
        _ask(chat)


def test_sdk_streaming_through_the_transport(serve: Callable[..., RawServer]) -> None:
    events = [{"choices": [{"index": 0, "delta": {"content": piece}}]} for piece in ("po", "ng")]
    sse = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(sse), sse)
    server = serve(lambda n: head + body)
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0,
                           http_client=sdk_http_client(server.base_url, 5.0))
    stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "pong"


def test_interim_reply_is_skipped(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda n: b"HTTP/1.1 100 Continue\r\n\r\n" + _plain())
    chat = OpenAIChat(server.base_url, "m", "k")
    assert _ask(chat) == "pong" and _ask(chat) == "pong"
    assert server.connections == 1


def test_body_that_ends_with_the_connection(serve: Callable[..., RawServer]) -> None:
    # no length and no chunking: the body runs until the server closes (HTTP/1.0 style)
    reply = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + REPLY
    server = serve(lambda n: reply, close_after=lambda n: True)
    chat = OpenAIChat(server.base_url, "m", "k")
    assert _ask(chat) == "pong" and _ask(chat) == "pong"
    assert server.connections == 2


def test_connection_close_header_is_honoured(serve: Callable[..., RawServer]) -> None:
    closing = _plain().replace(b"Content-Type", b"Connection: close\r\nContent-Type", 1)
    server = serve(lambda n: closing)  # the server keeps the socket open; the client must not reuse it
    chat = OpenAIChat(server.base_url, "m", "k")
    assert _ask(chat) == "pong" and _ask(chat) == "pong"
    assert server.connections == 2


def test_bytes_after_the_reply_retire_the_connection(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda n: _plain() + b"HTTP/1.1 200 OK\r\n")
    chat = OpenAIChat(server.base_url, "m", "k")
    assert _ask(chat) == "pong" and _ask(chat) == "pong"
    assert server.connections == 2


def test_garbled_reply_is_a_transient_error(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda n: b"this is not http\r\n\r\n", close_after=lambda n: True)
    chat = OpenAIChat(server.base_url, "m", "k")
    with pytest.raises(TransientLLMError):
        _ask(chat)


def test_header_with_a_line_break_is_refused(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda n: _plain())
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0,
                           http_client=sdk_http_client(server.base_url, 5.0))
    with pytest.raises(openai.APIConnectionError):
        client.post("/chat/completions", body={}, cast_to=bytes,
                    options={"headers": {"X-Note": "a\r\nX-Injected: 1"}})
    assert not any(b"x-injected" in r.lower() for r in server.requests)


@pytest.mark.parametrize("suffix", ["/prefix/v1", "/prefix/v1/"])
def test_request_target_is_the_path_under_the_base_url(serve: Callable[..., RawServer], suffix: str) -> None:
    # post_json hands the SDK the full URL; it must name the same target as the SDK's own join
    server = serve(lambda n: _plain())
    chat = OpenAIChat(f"http://127.0.0.1:{server.port}{suffix}", "m", "k")
    assert _ask(chat) == "pong"
    assert server.requests[0].startswith(b"POST /prefix/v1/chat/completions HTTP/1.1\r\n")
