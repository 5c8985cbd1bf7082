"""A scripted OpenAI-compatible server over real HTTP, for tests.

The real ``openai`` client talks to it, so tests exercise the same code paths as production:

    with ScriptedLLM(responses=["hello"]) as llm:
        settings = llm.settings(base_settings)   # llm_base_url / llm_model point here
        ...
        assert llm.counts["chat"] == 1

Chat replies come, in order, from the FIFO ``responses`` (``push`` adds more), else from
``responder(request_json)``, else ``default``, else the server answers 400 "no scripted reply".
A reply is a string or a ScriptedError (an HTTP error status, optionally after a delay: a delay
longer than the client's timeout makes it time out). Embeddings are deterministic
feature-hashing vectors (kbgraph's HashEmbedder, ``embedding_dim`` wide), as JSON floats or,
when asked (the openai client asks by default), base64 float32.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np

from kbgraph.llm.embedders import HashEmbedder
from support.loopback import LoopbackServer

MODEL = "scripted"


@dataclass
class ScriptedError:
    status: int = 500
    body: str | dict[str, Any] | None = None  # str: used as the error message
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # sent as the body verbatim (a proxy's HTML page, a cut-off reply)


Reply = str | ScriptedError
Responder = Callable[[dict[str, Any]], Reply]


class ScriptedLLM(LoopbackServer):
    owner_attribute = "llm"  # the handler reaches the model as self.llm

    def __init__(self, responses: Iterable[Reply] = (), responder: Responder | None = None, *,
                 default: str | None = None, embedding_dim: int = 64, include_usage: bool = True,
                 stream_piece_chars: int = 4, extra_models: Iterable[str] = ()) -> None:
        self.responses: deque[Reply] = deque(responses)
        self.extra_models = list(extra_models)  # more model ids GET /v1/models lists
        self.responder = responder
        self.default = default
        self.include_usage = include_usage
        self.stream_piece_chars = stream_piece_chars
        self.embedder = HashEmbedder(embedding_dim)
        self.embedding_errors: deque[ScriptedError] = deque()
        self.embedding_delay_s = 0.0  # each embeddings answer waits this long (makes overlap visible)
        self.requests: list[dict[str, Any]] = []  # {"kind", "path", "body", "content_type", "peer"}
        self.counts: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def settings(self, base: Any, **overrides: Any) -> Any:
        """``base`` (a kbgraph Settings) pointed at this server for chat and embeddings."""
        values = {"llm_base_url": self.base_url, "llm_model": MODEL, "llm_api_key": "test-key",
                  "embedding_model": "scripted-embed"}
        values.update(overrides)
        return base.replace(**values)

    # -- scripting -----------------------------------------------------------------------------

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.responses.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.counts.clear()
            self.max_in_flight = 0

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self.responses:
                return self.responses.popleft()
        if self.responder is not None:
            return self.responder(body)
        if self.default is not None:
            return self.default
        return ScriptedError(400, "scripted LLM: no scripted reply left for this request")

    def embedding_vectors(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed(texts)

    def _log(self, kind: str, path: str, body: dict[str, Any], content_type: str | None = None,
             peer: tuple[str, int] | None = None, authorization: str | None = None) -> None:
        with self._lock:
            self.requests.append({"kind": kind, "path": path, "body": body, "content_type": content_type,
                                  "peer": peer,  # the client's address: one per TCP connection
                                  "authorization": authorization})  # which key the client sent
            self.counts[kind] += 1

    def _count(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] += 1

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


class _Handler(BaseHTTPRequestHandler):
    llm: ScriptedLLM
    protocol_version = "HTTP/1.1"  # keep-alive, like a real API server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- plumbing ------------------------------------------------------------------------------

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        # the request stops counting as in flight before its reply goes out: a client may send
        # its next request (freeing a concurrency slot) as soon as the reply arrives
        self._leave_once()
        self.wfile.write(data)

    def _leave_once(self) -> None:
        if getattr(self, "_in_flight", False):
            self._in_flight = False
            self.llm._leave()

    def _send_error(self, err: ScriptedError) -> None:
        if err.delay_s:
            time.sleep(err.delay_s)
        if err.raw is not None:
            self.send_response(err.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(err.raw)))
            self.end_headers()
            self._leave_once()
            self.wfile.write(err.raw)
            return
        if isinstance(err.body, dict):
            payload: Any = err.body
        else:
            message = err.body or f"scripted error {err.status}"
            payload = {"error": {"message": message, "type": "scripted", "code": err.status}}
        self._send_json(err.status, payload, err.headers)

    def _read_body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        return json.loads(raw or b"{}")

    def _guard(self, fn: Callable[[], None]) -> None:
        self.llm._enter()
        self._in_flight = True
        try:
            fn()
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (timeout test); nothing left to answer.
            self.close_connection = True
        finally:
            self._leave_once()

    # -- routes --------------------------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self.llm._log("models", self.path, {}, authorization=self.headers.get("Authorization"))
            self._send_json(200, {"object": "list", "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "tests"}
                for name in (MODEL, "scripted-embed", *self.llm.extra_models)]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        body = self._read_body()
        path = self.path.rstrip("/")
        if path == "/v1/chat/completions":
            kind = "chat_stream" if body.get("stream") else "chat"
            self.llm._log(kind, self.path, body, self.headers.get("Content-Type"), self.client_address,
                          self.headers.get("Authorization"))
            self._guard(lambda: self._chat(body))
        elif path == "/v1/embeddings":
            self.llm._log("embeddings", self.path, body, self.headers.get("Content-Type"), self.client_address,
                          self.headers.get("Authorization"))
            self._guard(lambda: self._embeddings(body))
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def _chat(self, body: dict[str, Any]) -> None:
        reply = self.llm.next_reply(body)
        if isinstance(reply, ScriptedError):
            self.llm._count("error")
            self._send_error(reply)
            return
        prompt_tokens = sum(_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": _tokens(reply),
                 "total_tokens": prompt_tokens + _tokens(reply)}
        base = {"id": "chatcmpl-scripted", "created": int(time.time()), "model": MODEL}
        if not body.get("stream"):
            payload = {**base, "object": "chat.completion", "choices": [{
                "index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": reply}}]}
            if self.llm.include_usage:
                payload["usage"] = usage
            self._send_json(200, payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True  # no length: the end of the body is the end of the stream

        def event(choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> None:
            chunk = {**base, "object": "chat.completion.chunk", "choices": choices, **(extra or {})}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

        event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        step = max(1, self.llm.stream_piece_chars)
        for start in range(0, len(reply), step):
            event([{"index": 0, "delta": {"content": reply[start:start + step]},
                    "finish_reason": None}])
        event([{"index": 0, "delta": {}, "finish_reason": "stop"}])
        if self.llm.include_usage and (body.get("stream_options") or {}).get("include_usage"):
            event([], {"usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _embeddings(self, body: dict[str, Any]) -> None:
        if self.llm.embedding_errors:
            self.llm._count("error")
            self._send_error(self.llm.embedding_errors.popleft())
            return
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            self._send_json(400, {"error": {"message": "input must be a string or strings"}})
            return
        if any(t == "" for t in texts):
            self._send_json(400, {"error": {"message": "input cannot contain empty strings"}})
            return
        if self.llm.embedding_delay_s:
            time.sleep(self.llm.embedding_delay_s)
        vectors = self.llm.embedding_vectors(texts)
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for i, vec in enumerate(vectors):
            value: Any = (base64.b64encode(vec.astype("<f4").tobytes()).decode("ascii")
                          if as_base64 else [float(x) for x in vec])
            data.append({"object": "embedding", "index": i, "embedding": value})
        tokens = sum(_tokens(t) for t in texts)
        self._send_json(200, {"object": "list", "data": data, "model": body.get("model", ""),
                              "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


__all__ = ["MODEL", "Reply", "Responder", "ScriptedError", "ScriptedLLM"]


ScriptedLLM.handler = _Handler
