"""Chat over the OpenAI protocol (OpenAI, Azure-compatible gateways, DeepSeek, Qwen, Ollama, vLLM).

This is the bottom layer: one HTTP request per call, no retries (the client is built with
``max_retries=0``; RetryingChat owns retries), errors sorted into transient and permanent.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import openai
import orjson

from kbgraph.llm.base import LLMError, Reasoning
from kbgraph.llm.layers.base import ChatBase, ChatRequest, Completion, TextStream, TransientLLMError

_CLIENTS: dict[tuple[int, str, str, float], openai.OpenAI] = {}
_CLIENTS_LOCK = threading.Lock()
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only


def shared_client(base_url: str, api_key: str, timeout: float) -> openai.OpenAI:
    """One client per endpoint per process, reused by every call: the SDK's own HTTP client (httpx),
    whose connection pool keeps connections alive between calls (and its TLS and proxy handling).

    Keyed by pid too: pooled connections inherited through a fork (Celery prefork) would be
    shared with the parent."""
    key = (os.getpid(), base_url, api_key, float(timeout))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            # Local servers (Ollama, vLLM) take no key, but the client insists on one.
            client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout,
                                   max_retries=0, http_client=_sdk_http_client())
            _CLIENTS[key] = client
        return client


class _PromptAcks:
    """httpcore's own network backend, whose sockets acknowledge what they receive at once.

    A server that writes a reply's headers and its body in two sends without TCP_NODELAY (Python's
    ``http.server`` and many small shims) holds the body back under Nagle's algorithm until the
    headers are acknowledged, and Linux delays that acknowledgement by up to 40 ms: a call the
    server answers in 1 ms takes 41. TCP_QUICKACK before each read (the kernel clears it as it
    goes) removes the wait. Everything else (HTTP, pooling, TLS) stays httpx's and httpcore's.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        return _PromptAckStream(self.inner.connect_tcp(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:  # connect_unix_socket, sleep: unchanged
        return getattr(self.inner, name)


class _PromptAckStream:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sock = inner.get_extra_info("socket")

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        return self.inner.read(max_bytes, timeout)

    def start_tls(self, *args: Any, **kwargs: Any) -> Any:
        return _PromptAckStream(self.inner.start_tls(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:  # write, close, get_extra_info: unchanged
        return getattr(self.inner, name)


def _sdk_http_client() -> Any:
    """The SDK's default HTTP client (its limits, timeouts and proxy handling), with prompt ACKs on
    its direct connections where the platform has them; else None, which lets the SDK build it."""
    client = openai.DefaultHttpxClient()
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if _QUICKACK is None or backend is None:
        return None
    pool._network_backend = _PromptAcks(backend)
    return client


# ---------------------------------------------------------------------------------------------
# <think> blocks (DeepSeek-R1, Qwen3 and other reasoning models put them in the content)

_OPEN, _CLOSE = "<think>", "</think>"
_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)


def strip_think(text: str) -> str:
    """Remove reasoning from a reply: closed blocks; a leading block the server cut off (no
    close tag, e.g. max_tokens hit while thinking); and everything before an orphan close tag
    (chat templates that put the opening tag into the prompt)."""
    text = _BLOCK.sub("", text)
    if _CLOSE in text:
        text = text.rsplit(_CLOSE, 1)[1]
    if text.lstrip().startswith(_OPEN):
        return ""
    return text.strip()


class ThinkFilter:
    """Incremental ``strip_think`` for streams: feed deltas, get the visible text so far.

    Tags may arrive split across deltas, so a tail that could begin a tag is held back. Leading
    whitespace is dropped (it usually follows a removed block). An orphan close tag cannot
    retract text already sent, so in streams it is only dropped itself.
    """

    def __init__(self) -> None:
        self.buffer = ""
        self.in_think = False
        self.started = False  # something visible has been emitted
        self.thought: list[str] = []  # reasoning text fed since the last ``take_reasoning``

    def take_reasoning(self) -> str:
        """The reasoning (text inside <think> blocks) fed since the last call."""
        text, self.thought = "".join(self.thought), []
        return text

    def feed(self, delta: str) -> str:
        self.buffer += delta
        out: list[str] = []
        while self.buffer:
            tag = _CLOSE if self.in_think else _OPEN
            pos = self.buffer.find(tag)
            if not self.in_think:
                orphan = self.buffer.find(_CLOSE)
                if orphan != -1 and (pos == -1 or orphan < pos):
                    out.append(self.buffer[:orphan])
                    self.buffer = self.buffer[orphan + len(_CLOSE):]
                    continue
            if pos != -1:
                (self.thought if self.in_think else out).append(self.buffer[:pos])
                self.buffer = self.buffer[pos + len(tag):]
                self.in_think = not self.in_think
                continue
            keep = _partial_tag_len(self.buffer)
            (self.thought if self.in_think else out).append(self.buffer[:len(self.buffer) - keep])
            self.buffer = self.buffer[len(self.buffer) - keep:]
            break
        return self._visible("".join(out))

    def flush(self) -> str:
        rest = "" if self.in_think else self.buffer
        self.buffer = ""
        return self._visible(rest).rstrip()

    def _visible(self, text: str) -> str:
        if not self.started:
            text = text.lstrip()
            self.started = bool(text)
        return text


def _partial_tag_len(text: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of a tag."""
    for n in range(min(len(_CLOSE) - 1, len(text)), 0, -1):
        tail = text[-n:]
        if _OPEN.startswith(tail) or _CLOSE.startswith(tail):
            return n
    return 0


# ---------------------------------------------------------------------------------------------
# errors

def _server_message(exc: openai.APIStatusError) -> str:
    body: Any = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    text = ""
    with contextlib.suppress(Exception):  # a streamed response may not have been read
        text = exc.response.text
    return text.strip() or exc.message


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after")
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _unreachable(exc: BaseException) -> str:
    """Why nothing can answer at the endpoint (a refused connection, a host name that does not
    resolve), from the chain of causes under the SDK's connection error; "" for anything else."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused (nothing listens there)"
        if isinstance(cause, socket.gaierror):
            return f"unknown host ({cause.strerror or cause})"
        cause = cause.__cause__ or cause.__context__
    return ""


def setting_advice(setting: str) -> str:
    """What to check when nothing answers at an endpoint that the server setting ``setting`` names."""
    return f"check the setting {setting} (KBGRAPH_{setting.upper()})"


def translate_error(exc: Exception, where: str, advice: str = setting_advice("llm_base_url")) -> LLMError:
    """Map an openai exception to TransientLLMError (retry) or LLMError (give up now).

    Retries are for what passes: timeouts, 408/409/429 and 5xx, a dropped connection. A refused
    connection or an unknown host will not answer a second later: it is reported at once, naming
    the endpoint and, as ``advice``, where it was chosen (a dead endpoint cost 5 attempts and ~29 s)."""
    if isinstance(exc, openai.APITimeoutError):
        return TransientLLMError(f"{where}: timed out")
    if isinstance(exc, openai.APIConnectionError):
        reason = _unreachable(exc)
        if reason:
            return LLMError(f"{where}: {reason}; {advice}")
        return TransientLLMError(f"{where}: connection failed: {exc}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = f"{where}: HTTP {status}: {_server_message(exc)}"
        if status in (408, 409, 429) or status >= 500:
            return TransientLLMError(message, _retry_after(exc))
        return LLMError(message)
    return LLMError(f"{where}: {exc}")


def _full_url(client: openai.OpenAI, path: str) -> str:
    """``path`` under the client's base URL, as the SDK would join them. Given the full URL, the SDK
    parses it once; given a relative path, it parses the join twice more (~0.07 ms a call)."""
    base = client.base_url
    if base.query or "://" in path:  # a base URL with a query: the SDK's own join keeps it right
        return path
    return str(base) + path.lstrip("/")


def post_json(client: openai.OpenAI, path: str, body: dict[str, Any], where: str,
              advice: str = setting_advice("llm_base_url")) -> Any:
    """POST ``body`` to ``path`` through the SDK and return the decoded JSON reply.

    The body goes out as JSON bytes and the reply comes back as bytes, both (de)coded with orjson:
    the SDK's own route (a parameter dict copied and serialized, the reply parsed and walked into
    a dict) costs more CPU than the HTTP exchange, hundreds of times per document. The SDK still
    sends the request and raises its errors, translated here like every other call's.
    """
    try:
        payload = orjson.dumps(body)
    except orjson.JSONEncodeError:  # lone surrogates (text read with surrogateescape): ASCII escapes
        payload = json.dumps(body).encode("ascii")
    try:
        raw = client.post(_full_url(client, path), content=payload, cast_to=bytes)
    except openai.OpenAIError as exc:
        raise translate_error(exc, where, advice) from exc
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TransientLLMError(f"{where}: the reply is not JSON ({exc}): {bytes(raw[:200])!r}") from exc


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---------------------------------------------------------------------------------------------

class OpenAIChat(ChatBase):
    def __init__(self, base_url: str, model: str, api_key: str = "", *, timeout: float = 120.0,
                 temperature: float = 0.0, max_tokens: int | None = None,
                 advice: str = setting_advice("llm_base_url")) -> None:
        self.base_url = base_url
        self.model_name = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.client = shared_client(base_url, api_key, timeout)
        self._where = f"chat model {model!r} at {base_url}"
        self._advice = advice  # where the endpoint was chosen, for the message when nothing answers there

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model_name,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
        }
        if request.max_tokens:
            params["max_tokens"] = request.max_tokens
        return params

    def complete(self, request: ChatRequest) -> Completion:
        request.check_cancel()
        # The plain JSON reply, not the SDK's typed models: building and validating those (and
        # transforming the parameters on the way out) costs more CPU than the HTTP exchange itself.
        response = post_json(self.client, "/chat/completions", self._params(request), self._where,
                             self._advice)
        choices = response.get("choices") if isinstance(response, dict) else None
        if not choices or not isinstance(choices[0], dict):
            raise TransientLLMError(f"{self._where}: reply without choices")
        message = choices[0].get("message") or {}
        content = message.get("content") if isinstance(message, dict) else None
        usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
        return Completion(strip_think(content if isinstance(content, str) else ""),
                          _int_or_none(usage.get("prompt_tokens")), _int_or_none(usage.get("completion_tokens")))

    def open_stream(self, request: ChatRequest) -> TextStream:
        request.check_cancel()
        try:
            # The request is sent here, so HTTP errors surface (and are retried) before any
            # piece reaches the caller.
            response = self.client.chat.completions.create(
                **self._params(request), stream=True, stream_options={"include_usage": True})
        except openai.OpenAIError as exc:
            raise translate_error(exc, self._where, self._advice) from exc
        text_stream: TextStream

        def pieces() -> Iterator[str]:
            think = ThinkFilter()
            try:
                for chunk in response:
                    request.check_cancel()
                    if chunk.usage is not None:
                        text_stream.prompt_tokens = chunk.usage.prompt_tokens
                        text_stream.completion_tokens = chunk.usage.completion_tokens
                    if not chunk.choices:
                        continue
                    delta = chunk.choices[0].delta
                    visible = think.feed(delta.content or "")
                    # reasoning models behind an OpenAI-compatible server send it apart (DeepSeek,
                    # vLLM's reasoning parsers) or inline in <think> blocks
                    thought = (getattr(delta, "reasoning_content", None) or "") + think.take_reasoning()
                    if thought:
                        yield Reasoning(thought)
                    if visible:
                        yield visible
                tail = think.flush()
                if tail:
                    yield tail
            except openai.OpenAIError as exc:
                raise translate_error(exc, self._where, self._advice) from exc
            finally:
                response.close()

        text_stream = TextStream(pieces())
        return text_stream


__all__ = ["OpenAIChat", "ThinkFilter", "post_json", "setting_advice", "shared_client", "strip_think", "translate_error"]
