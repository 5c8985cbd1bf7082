"""Chat model and its layers, over real HTTP against the scripted scripted_llm with the real client."""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.scripted_llm import ScriptedError, ScriptedLLM  # tests/ is on sys.path (conftest)

from kbgraph.config import Settings
from kbgraph.llm import (
    Cancelled,
    ChatModel,
    LLMError,
    LLMNotConfigured,
    Message,
    UsageLedger,
    build_chat,
    require_chat,
)
from kbgraph.llm.layers.base import ChatRequest
from kbgraph.llm.openai_chat import ThinkFilter, strip_think

USER = [Message("system", "be brief"), Message("user", "hello?")]




def make_chat(llm: ScriptedLLM, settings: Settings, ledger: UsageLedger | None = None,
              cache: bool = True, **overrides: Any) -> ChatModel:
    chat = build_chat(llm.settings(settings, **overrides), ledger, cache, backoff_base=0.01,
                      backoff_max=0.05)
    assert chat is not None
    return chat


def test_no_llm_configured(settings: Settings) -> None:
    assert build_chat(settings) is None
    with pytest.raises(LLMNotConfigured) as info:
        require_chat(settings)
    for name in ("KBGRAPH_LLM_BASE_URL", "KBGRAPH_LLM_MODEL", "KBGRAPH_LLM_API_KEY"):
        assert name in str(info.value)


def test_chat_roundtrip(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push("Hi there.")
    chat = make_chat(scripted_llm, settings)
    assert isinstance(chat, ChatModel)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. the SDK's deprecation of raw bytes passed as `body`
        assert chat.chat(USER, temperature=0.5, max_tokens=50) == "Hi there."
    assert scripted_llm.requests[0]["content_type"] == "application/json"
    body = scripted_llm.requests[0]["body"]
    assert body["model"] == "scripted"
    assert body["messages"] == [{"role": "system", "content": "be brief"},
                                {"role": "user", "content": "hello?"}]
    assert body["temperature"] == 0.5 and body["max_tokens"] == 50


@pytest.mark.parametrize("raw, visible", [
    ("<think>let me see\nmore</think>\n\nThe answer.", "The answer."),
    ("A<think>x</think>B<think>y</think>C", "ABC"),
    ("<think>never closed because max_tokens hit", ""),
    ("reasoning without an opening tag</think>Answer", "Answer"),
    ("No thinking at all.", "No thinking at all."),
])
def test_strip_think(raw: str, visible: str) -> None:
    assert strip_think(raw) == visible


@pytest.mark.parametrize("step", [1, 2, 3, 5, 100])
def test_think_filter_any_split(step: int) -> None:
    raw = "<think>plan: say hi</think>\n\nHello <b>world</b>, a < b.<think>more</think> Bye"
    f = ThinkFilter()
    out = "".join(f.feed(raw[i:i + step]) for i in range(0, len(raw), step)) + f.flush()
    assert out == "Hello <b>world</b>, a < b. Bye"


def test_think_stripped_in_chat_and_stream(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    reply = "<think>The user greets me. I should greet back.</think>\n\nHello, nice to meet you!"
    scripted_llm.push(reply, reply)
    chat = make_chat(scripted_llm, settings)
    assert chat.chat(USER) == "Hello, nice to meet you!"
    from kbgraph.llm.base import Reasoning

    streamed = list(chat.stream(USER))
    pieces = [p for p in streamed if not isinstance(p, Reasoning)]
    assert "".join(pieces) == "Hello, nice to meet you!"
    assert len(pieces) > 3  # really streamed, piece by piece
    # the reasoning comes apart from the answer, as it arrives (before the answer's first piece)
    thought = [p for p in streamed if isinstance(p, Reasoning)]
    assert "".join(thought) == "The user greets me. I should greet back." and len(thought) > 1
    assert streamed.index(thought[-1]) < streamed.index(pieces[0])
    assert scripted_llm.counts["chat_stream"] == 1


def test_stream_accounting_and_limit_slot(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push("one two three four", "five six")
    ledger = UsageLedger()
    chat = make_chat(scripted_llm, settings, ledger, llm_concurrency=1)
    stream = chat.stream(USER, phase="answer")
    next(stream)
    stream.close()  # abandoning a stream must release its slot, or the next call would hang
    assert "".join(chat.stream(USER, phase="answer")) == "five six"
    usage = ledger.phase("answer")
    assert usage.calls == 2 and usage.prompt_tokens > 0 and usage.completion_tokens == 2 + 2


def test_cache_hit_makes_no_request(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push("first answer")
    ledger = UsageLedger()
    chat = make_chat(scripted_llm, settings, ledger)
    assert chat.chat(USER, phase="extract", prompt_version="v1") == "first answer"
    before = len(scripted_llm.requests)
    # a fresh wrapper (as another task would build) still hits the same cache file
    again = make_chat(scripted_llm, settings, ledger)
    assert again.chat(USER, phase="extract", prompt_version="v1") == "first answer"
    assert len(scripted_llm.requests) == before
    usage = ledger.phase("extract")
    assert (usage.calls, usage.cached_calls) == (1, 1)


def test_cache_key_parts_miss(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.default = "answer"
    chat = make_chat(scripted_llm, settings)
    chat.chat(USER, prompt_version="v1")
    chat.chat(USER, prompt_version="v2")
    chat.chat(USER, prompt_version="v1", temperature=0.7)
    chat.chat(USER, prompt_version="v1", max_tokens=10)
    chat.chat([Message("user", "other")], prompt_version="v1")
    assert scripted_llm.counts["chat"] == 5
    chat.chat(USER, prompt_version="v2")
    assert scripted_llm.counts["chat"] == 5


def test_empty_answer_not_cached(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push("<think>only thoughts</think>", "real")
    chat = make_chat(scripted_llm, settings)
    assert chat.chat(USER) == ""
    assert chat.chat(USER) == "real"
    assert chat.chat(USER) == "real"
    assert scripted_llm.counts["chat"] == 2


def test_cache_off(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.default = "x"
    chat = make_chat(scripted_llm, settings, cache=False)
    chat.chat(USER)
    chat.chat(USER)
    assert scripted_llm.counts["chat"] == 2


def test_the_same_request_asked_twice_at_once_is_one_call(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    answered = threading.Event()

    def slow(_request: dict) -> str:
        answered.wait(5)  # held until the second caller is surely waiting
        return "one answer"

    scripted_llm.responder = slow
    ledger = UsageLedger()
    chat = make_chat(scripted_llm, settings, ledger)
    assert chat.remembers_answers
    answers: list[str] = []
    callers = [threading.Thread(target=lambda: answers.append(chat.chat(USER, phase="summarize")))
               for _ in range(2)]
    for caller in callers:
        caller.start()
    deadline = time.monotonic() + 5
    while scripted_llm.counts["chat"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the second caller reaches the cache meanwhile
    answered.set()
    for caller in callers:
        caller.join(5)
    assert answers == ["one answer", "one answer"]
    assert scripted_llm.counts["chat"] == 1
    assert (ledger.phase("summarize").calls, ledger.phase("summarize").cached_calls) == (1, 1)


def test_a_caller_waiting_for_a_failed_call_asks_itself(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    release = threading.Event()
    calls: list[int] = []

    def first_fails(_request: dict) -> str:
        calls.append(1)
        if len(calls) == 1:
            release.wait(5)
            raise ScriptedError(400, "bad request")
        return "second try"

    scripted_llm.responder = first_fails
    chat = make_chat(scripted_llm, settings, llm_max_retries=0)
    results: list[object] = []

    def ask() -> None:
        try:
            results.append(chat.chat(USER))
        except LLMError as exc:
            results.append(exc)

    callers = [threading.Thread(target=ask) for _ in range(2)]
    for caller in callers:
        caller.start()
        time.sleep(0.2)
    release.set()
    for caller in callers:
        caller.join(5)
    assert any(isinstance(r, LLMError) for r in results) and "second try" in results
    assert len(calls) == 2


def test_a_model_without_the_cache_does_not_remember(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    assert not make_chat(scripted_llm, settings, cache=False).remembers_answers


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_status_retried(scripted_llm: ScriptedLLM, settings: Settings,
                                  status: int) -> None:
    scripted_llm.push(ScriptedError(status, "busy"), ScriptedError(status, "busy"), "made it")
    ledger = UsageLedger()
    chat = make_chat(scripted_llm, settings, ledger)
    assert chat.chat(USER, phase="extract") == "made it"
    assert scripted_llm.counts["chat"] == 3
    usage = ledger.phase("extract")
    assert (usage.calls, usage.failures) == (1, 2)


def test_retry_after_header_honoured(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push(ScriptedError(429, "slow down", headers={"Retry-After": "0.3"}), "ok")
    chat = build_chat(scripted_llm.settings(settings), backoff_base=0.01, backoff_max=5)
    assert chat is not None
    start = time.monotonic()
    assert chat.chat(USER) == "ok"
    assert time.monotonic() - start >= 0.3


def test_unreadable_reply_retried(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push(ScriptedError(200, raw=b'{"choices": [{"message": {"content": "cut'), "whole")
    ledger = UsageLedger()
    chat = make_chat(scripted_llm, settings, ledger)
    assert chat.chat(USER) == "whole"
    assert ledger.phase("chat").failures == 1

    scripted_llm.responder = lambda body: ScriptedError(200, raw=b"<html>proxy error</html>")
    with pytest.raises(LLMError, match="not JSON.*proxy error"):
        make_chat(scripted_llm, settings, ledger, llm_max_retries=1).chat([Message("user", "again")])


def test_text_json_cannot_encode_plainly_still_sent(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    # a lone surrogate (undecodable bytes read with surrogateescape) is escaped, not refused
    scripted_llm.push("seen")
    chat = make_chat(scripted_llm, settings)
    assert chat.chat([Message("user", "odd \udcff byte")]) == "seen"
    assert scripted_llm.requests[-1]["body"]["messages"][0]["content"] == "odd \udcff byte"


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_fail_at_once(scripted_llm: ScriptedLLM, settings: Settings,
                                    status: int) -> None:
    scripted_llm.push(ScriptedError(status, "model 'scripted' does not support tools"), "unused")
    ledger = UsageLedger()
    chat = make_chat(scripted_llm, settings, ledger)
    with pytest.raises(LLMError) as info:
        chat.chat(USER)
    assert "model 'scripted' does not support tools" in str(info.value)
    assert str(status) in str(info.value)
    assert scripted_llm.counts["chat"] == 1
    assert ledger.phase("chat").failures == 1 and ledger.phase("chat").calls == 0


def test_retries_exhausted(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.responder = lambda body: ScriptedError(502, "bad gateway")
    chat = make_chat(scripted_llm, settings, llm_max_retries=2)
    with pytest.raises(LLMError, match="gave up after 3 attempts.*bad gateway"):
        chat.chat(USER)
    assert scripted_llm.counts["chat"] == 3


def test_timeout_retried_then_error(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push(ScriptedError(200, delay_s=1.0), "in time")
    ledger = UsageLedger()
    chat = make_chat(scripted_llm, settings, ledger, llm_timeout=0.3)
    assert chat.chat(USER) == "in time"
    assert ledger.phase("chat").failures == 1

    scripted_llm.responder = lambda body: ScriptedError(200, delay_s=1.0)
    slow = make_chat(scripted_llm, settings, ledger, llm_timeout=0.3, llm_max_retries=1)
    start = time.monotonic()
    with pytest.raises(LLMError, match="timed out"):
        slow.chat([Message("user", "slow")])
    assert time.monotonic() - start < 3
    assert ledger.phase("chat").failures == 3


def test_connection_refused_is_llm_error(settings: Settings) -> None:
    scripted_llm = ScriptedLLM().start()
    s = scripted_llm.settings(settings, llm_max_retries=1)
    scripted_llm.stop()
    chat = build_chat(s, backoff_base=0.01)
    assert chat is not None
    with pytest.raises(LLMError, match="connection"):
        chat.chat(USER)


def test_concurrency_limit(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    def slow(body: dict[str, Any]) -> str:
        time.sleep(0.2)
        return "done " + body["messages"][-1]["content"]

    scripted_llm.responder = slow
    chat = make_chat(scripted_llm, settings, llm_concurrency=2, cache=False)
    results: list[str] = []

    def worker(i: int) -> None:
        results.append(chat.chat([Message("user", f"q{i}")]))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [f"done q{i}" for i in range(6)]
    assert scripted_llm.max_in_flight == 2
    assert time.monotonic() - start >= 0.55  # three rounds of two


def test_limit_shared_between_wrappers(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.responder = lambda body: (time.sleep(0.15), "ok")[1]
    chats = [make_chat(scripted_llm, settings, llm_concurrency=1, cache=False) for _ in range(3)]
    threads = [threading.Thread(target=c.chat, args=(USER,)) for c in chats]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert scripted_llm.max_in_flight == 1


def test_a_free_slot_goes_to_the_waiting_call_that_starts_the_longest_chain(scripted_llm: ScriptedLLM,
                                                                             settings: Settings) -> None:
    """With every slot taken, the next free one goes to a person's question, then to a chunk's first
    pass, then to a gleaning, a summary, a report, whatever order they came in."""
    holding = threading.Event()
    served: list[str] = []

    def answer(body: dict[str, Any]) -> str:
        text = body["messages"][-1]["content"]
        if text == "hold":
            holding.wait(5)
        served.append(text)
        return "ok"

    scripted_llm.responder = answer
    chat = make_chat(scripted_llm, settings, llm_concurrency=1, cache=False)
    holder = threading.Thread(target=chat.chat, args=([Message("user", "hold")],), kwargs={"phase": "extract"})
    holder.start()
    deadline = time.monotonic() + 5
    while scripted_llm.counts["chat"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    waiters = []
    for phase in ("report", "summarize", "glean", "extract", "chat"):  # the reverse of their priority
        waiter = threading.Thread(target=chat.chat, args=([Message("user", phase)],), kwargs={"phase": phase})
        waiter.start()
        waiters.append(waiter)
        time.sleep(0.05)  # each is waiting before the next comes
    holding.set()
    for thread in [holder, *waiters]:
        thread.join(5)
    assert served == ["hold", "chat", "extract", "glean", "summarize", "report"]


def test_a_call_that_waited_its_patience_goes_before_any_priority() -> None:
    from kbgraph.llm.layers.slots import PrioritySlots

    slots = PrioritySlots(1, patience=0.3)
    slots.acquire(lambda: None, 0)
    served: list[str] = []

    def wait_then_note(name: str, priority: int) -> None:
        slots.acquire(lambda: None, priority)
        served.append(name)
        slots.release()

    late = threading.Thread(target=wait_then_note, args=("report", 4))
    late.start()
    time.sleep(0.4)  # past its patience
    urgent = threading.Thread(target=wait_then_note, args=("extract", 1))
    urgent.start()
    time.sleep(0.05)
    slots.release()
    late.join(5)
    urgent.join(5)
    assert served == ["report", "extract"]
    with pytest.raises(ValueError):
        slots.release()  # every slot is back: one more release is a caller's mistake


def test_a_call_cancelled_while_it_waits_for_a_slot_leaves_the_line(scripted_llm: ScriptedLLM,
                                                                  settings: Settings) -> None:
    holding = threading.Event()
    scripted_llm.responder = lambda body: (holding.wait(5) if body["messages"][-1]["content"] == "hold" else None,
                                           "ok")[1]
    chat = make_chat(scripted_llm, settings, llm_concurrency=1, cache=False)
    holder = threading.Thread(target=chat.chat, args=([Message("user", "hold")],))
    holder.start()
    while scripted_llm.counts["chat"] < 1:
        time.sleep(0.01)
    stop = threading.Event()
    outcome: list[object] = []

    def waiting_then_cancelled() -> None:
        try:
            chat.chat([Message("user", "first in line")], phase="chat", cancel=stop.is_set)
        except Cancelled as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=waiting_then_cancelled)
    waiter.start()
    later = threading.Thread(target=lambda: outcome.append(chat.chat([Message("user", "later")], phase="report")))
    time.sleep(0.1)
    later.start()
    time.sleep(0.1)
    stop.set()
    waiter.join(2)
    assert outcome and isinstance(outcome[0], Cancelled)  # it left within the wait's poll
    holding.set()
    later.join(5)
    holder.join(5)
    assert outcome[1:] == ["ok"]  # the call behind it was not stuck behind a ticket nobody holds


def test_cancel_before_call(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.default = "never"
    chat = make_chat(scripted_llm, settings)
    with pytest.raises(Cancelled):
        chat.chat(USER, cancel=lambda: True)
    with pytest.raises(Cancelled):
        list(chat.stream(USER, cancel=lambda: True))
    assert scripted_llm.requests == []


def test_cancel_between_retries(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.responder = lambda body: ScriptedError(503, "overloaded")
    flag = threading.Event()

    def responder(body: dict[str, Any]) -> ScriptedError:
        flag.set()  # cancel once the first attempt has been seen
        return ScriptedError(503, "overloaded")

    scripted_llm.responder = responder
    chat = build_chat(scripted_llm.settings(settings, llm_max_retries=10), backoff_base=0.2)
    assert chat is not None
    with pytest.raises(Cancelled):
        chat.chat(USER, cancel=flag.is_set)
    assert scripted_llm.counts["chat"] == 1


def test_accounting_by_phase(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    scripted_llm.push("alpha beta gamma", "delta", "one two")
    ledger = UsageLedger()
    chat = make_chat(scripted_llm, settings, ledger)
    chat.chat([Message("user", "extract this please")], phase="extract")
    chat.chat([Message("user", "glean more")], phase="glean")
    chat.chat([Message("user", "extract that")], phase="extract")
    extract, glean = ledger.phase("extract"), ledger.phase("glean")
    # the scripted scripted_llm counts whitespace words as tokens
    assert (extract.calls, extract.prompt_tokens, extract.completion_tokens) == (2, 3 + 2, 3 + 2)
    assert (glean.calls, glean.prompt_tokens, glean.completion_tokens) == (1, 2, 1)
    assert ledger.total.calls == 3


def test_tokens_estimated_without_usage(settings: Settings) -> None:
    with ScriptedLLM(["a reply of several words"], include_usage=False) as llm:
        ledger = UsageLedger()
        chat = make_chat(llm, settings, ledger)
        chat.chat([Message("user", "count my tokens, please")])
        usage = ledger.phase("chat")
        assert usage.calls == 1 and usage.prompt_tokens >= 5 and usage.completion_tokens >= 5


def test_models_endpoint(scripted_llm: ScriptedLLM) -> None:
    import openai

    client = openai.OpenAI(base_url=scripted_llm.base_url, api_key="k", max_retries=0)
    assert "scripted" in [m.id for m in client.models.list()]


@hsettings(max_examples=300, deadline=None)
@given(model=st.text(max_size=20), version=st.text(max_size=20),
       messages=st.lists(st.tuples(st.sampled_from(["system", "user", "assistant"]), st.text(max_size=200)),
                         min_size=1, max_size=4),
       temperature=st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(0, 2)),
       max_tokens=st.one_of(st.none(), st.integers(1, 1 << 40)))
def test_cache_key_text_is_unchanged(model: str, version: str, messages: list[tuple[str, str]],
                                     temperature: float, max_tokens: int | None) -> None:
    # answers cached by earlier releases must keep their keys: the fast writer gives the same text
    from kbgraph.llm.layers.cache import _cache_payload, _fast_cache_payload

    request = ChatRequest(tuple(Message(r, c) for r, c in messages), prompt_version=version,
                          temperature=temperature, max_tokens=max_tokens)
    try:
        fast = _fast_cache_payload(model, request)
    except orjson.JSONEncodeError:  # lone surrogates: the key falls back to the stdlib's text
        return
    assert fast == _cache_payload(model, request)


def test_one_sdk_client_per_endpoint_and_its_connections_are_reused(settings: Settings) -> None:
    """Every chat model and embedder of one endpoint shares the openai SDK's own client (httpx),
    and sequential calls go over one kept-alive connection."""
    import socket

    import openai

    from kbgraph.llm.embedders import OpenAIEmbedder
    from kbgraph.llm.openai_chat import OpenAIChat, _PromptAcks

    with ScriptedLLM(default="fine", embedding_dim=8) as llm:
        chats = [OpenAIChat(llm.base_url, "scripted", "k") for _ in range(2)]
        embedder = OpenAIEmbedder(llm.base_url, "scripted-embed", "k")
        assert chats[0].client is chats[1].client is embedder.client
        # the SDK's own HTTP client (httpx, or the fork of it a newer SDK ships), not a replacement
        assert isinstance(chats[0].client._client, openai.DefaultHttpxClient)
        if hasattr(socket, "TCP_QUICKACK"):  # Linux: reads acknowledge at once (no 40 ms delayed-ACK stall)
            assert isinstance(chats[0].client._client._transport._pool._network_backend, _PromptAcks)
        for _ in range(5):
            for chat in chats:
                assert chat.complete(ChatRequest(USER)).text == "fine"
            embedder.embed(["a", "b"])
        peers = {r["peer"] for r in llm.requests}
        assert len(llm.requests) == 15 and len(peers) == 1


def test_a_cache_another_process_keeps_locked_costs_reuse_not_the_call(scripted_llm: ScriptedLLM, settings: Settings,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from kbgraph.llm.layers.cache import SqliteCache

    monkeypatch.setattr(SqliteCache, "busy_seconds", 0.2)
    monkeypatch.setattr(SqliteCache, "_instances", {})
    scripted_llm.default = "the answer"
    chat = make_chat(scripted_llm, settings)
    other = sqlite3.connect(str(settings.cache_path), isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another process's write that outlasts the wait
    try:
        assert chat.chat(USER, phase="summarize") == "the answer"
        vectors = _cached_embedder(settings).embed(["a text to embed"])
        assert vectors.shape[0] == 1
    finally:
        other.execute("ROLLBACK")
        other.close()
    # the cache works again once the other write is over
    assert chat.chat(USER, phase="summarize") == "the answer"
    assert chat.chat(USER, phase="summarize") == "the answer"
    assert scripted_llm.counts["chat"] == 2


def _cached_embedder(settings: Settings):
    from kbgraph.llm.embedders import CachedEmbedder, HashEmbedder

    return CachedEmbedder(HashEmbedder(16), settings.cache_path)
