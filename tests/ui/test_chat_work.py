"""Chat shows its work, in headless Chromium and over the REST API with the official ``openai``
client: the model's reasoning (``<think>``) folded above the answer and streamed apart as
``reasoning_content``; the graph context and chunks each answer was given, unfolding under it (and
still there after a reload); citations placed by similarity when the model gives none, and only then;
a new conversation named from its first question at once."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC

from kbgraph.data import SAMPLE_CORPUS_DIR
from support.scripted_llm import ScriptedLLM
from ui.test_citations import EXCERPT
from ui.test_pages_browser import sign_up, wait

pytestmark = pytest.mark.services

THOUGHT = "First I read the numbered excerpts. Then I answer from them."
OWN_ANSWER = "The guild keeps the charts of the Saltmere Sea [ID:0]."


def _excerpts(system: str) -> list[tuple[str, str]]:
    heads = list(EXCERPT.finditer(system))
    return [(h.group(1), system[h.end():nxt.start() if nxt else len(system)])
            for h, nxt in zip(heads, [*heads[1:], None])]


def first_sentence(text: str) -> str:
    flat = " ".join(line for line in text.split("\n") if line.strip() and not line.startswith("#"))
    return re.split(r"(?<=[.!?])\s", flat.strip())[0]


def reply(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    system = messages[0]["content"] if messages else ""
    question = messages[-1]["content"] if messages else ""
    excerpts = _excerpts(system)
    if not excerpts:
        return "{}"  # query analysis: nothing to say
    if "NOCITE" in question:  # a model that ignores the citation instruction: copies a chunk's sentence
        return "Here is what I found. " + first_sentence(excerpts[-1][1])
    if "THINK" in question:
        return f"<think>{THOUGHT}</think>\n\n" + OWN_ANSWER
    return OWN_ANSWER


@pytest.fixture(scope="module")
def scripted_model() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(responder=reply, stream_piece_chars=6) as server:
        yield server


def _api(base_url: str, key: str, method: str, path: str, **kwargs: Any) -> Any:
    answer = requests.request(method, f"{base_url}/api/v1{path}", headers={"Authorization": f"Bearer {key}"},
                              timeout=60, **kwargs).json()
    assert answer["code"] == 0, answer
    return answer.get("data")


@pytest.fixture(scope="module")
def setup(browser: WebDriver, base_url: str) -> dict[str, str]:
    sign_up(browser, base_url, "work@example.com")
    browser.get(base_url + "/settings")
    browser.find_element(By.CSS_SELECTOR, "form[action='/settings/api-keys'] button").click()
    key = wait(browser, EC.presence_of_element_located((By.ID, "new-key")), what="the new key").text
    dataset = _api(base_url, key, "POST", "/datasets", json={"name": "work", "parser_config": {
        "chunk_token_num": 96, "graphrag": {"use_graphrag": True, "method": "nlp", "community": False}}})
    names = ("mira_castell.md", "lumen_cartographers_guild.md", "salt_war.md")
    docs = _api(base_url, key, "POST", f"/datasets/{dataset['id']}/documents",
                files=[("file", (n, (SAMPLE_CORPUS_DIR / n).read_bytes())) for n in names])
    _api(base_url, key, "POST", f"/datasets/{dataset['id']}/chunks", json={"document_ids": [d["id"] for d in docs]})
    deadline = time.monotonic() + 120
    while not all(r["run"] == "DONE" for r in _api(base_url, key, "GET", f"/datasets/{dataset['id']}/documents")["docs"]):
        assert time.monotonic() < deadline, "not parsed in time"
        time.sleep(0.5)
    chat = _api(base_url, key, "POST", "/chats", json={"name": "work", "dataset_ids": [dataset["id"]],
                                                        "prompt": {"similarity_threshold": 0.0, "top_n": 5}})
    return {"key": key, "chat": chat["id"]}


def test_the_page_shows_reasoning_graph_context_and_the_new_name(browser: WebDriver, base_url: str,
                                                                 setup: dict[str, str]) -> None:
    browser.get(f"{base_url}/chat/{setup['chat']}")
    browser.find_element(By.CSS_SELECTOR, ".sessions form button").click()  # New conversation
    box = wait(browser, EC.presence_of_element_located((By.ID, "question")), what="the conversation")
    question = "THINK: who founded the Lumen Cartographers Guild?"
    box.send_keys(question)
    browser.find_element(By.CSS_SELECTOR, "#ask button").click()
    current = browser.find_element(By.CSS_SELECTOR, ".sessions a[aria-current]")
    wait(browser, lambda b: current.text == question, timeout=5, what="the conversation named at once")
    answer = wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, ".msg.assistant:last-child")
                  if b.find_element(By.CSS_SELECTOR, ".msg.assistant:last-child").get_attribute("data-done") else None,
                  timeout=60, what="the answer")
    assert answer.get_attribute("data-done") == "yes", answer.text
    _check_answer(browser, answer)
    browser.refresh()  # kept with the session
    answer = wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".msg.assistant")[-1], what="the reloaded answer")
    _check_answer(browser, answer)
    assert browser.find_element(By.CSS_SELECTOR, ".sessions a[aria-current]").text == question


def _check_answer(browser: WebDriver, answer: Any) -> None:
    thinking = answer.find_element(By.CSS_SELECTOR, "details.reasoning")
    assert thinking.get_attribute("open") is None  # folded
    assert "<think>" not in answer.find_element(By.CSS_SELECTOR, ":scope > .content").text
    thinking.find_element(By.TAG_NAME, "summary").click()
    assert thinking.find_element(By.CSS_SELECTOR, ".content").text == THOUGHT
    work = answer.find_element(By.CSS_SELECTOR, "details.work")
    summary = work.find_element(By.TAG_NAME, "summary").text
    assert re.search(r"\((\d+) entit", summary) and not summary.startswith("Chunks used ("), summary
    assert int(re.search(r"\((\d+) entit", summary).group(1)) > 0 and re.search(r"[1-9]\d* chunks?\)", summary), summary
    work.find_element(By.TAG_NAME, "summary").click()
    headings = [h.text for h in work.find_elements(By.TAG_NAME, "h3")]
    assert "Entities" in headings and "Chunks" in headings, headings
    assert work.find_elements(By.CSS_SELECTOR, "li strong")


def test_reasoning_streams_apart_to_the_openai_client(base_url: str, setup: dict[str, str]) -> None:
    import openai

    client = openai.OpenAI(api_key=setup["key"], base_url=f"{base_url}/api/v1/chats_openai/{setup['chat']}")
    stream = client.chat.completions.create(model="model", stream=True, messages=[
        {"role": "user", "content": "THINK: who founded the guild?"}])
    reasoning, content = [], []
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if getattr(delta, "reasoning_content", None):
            reasoning.append(delta.reasoning_content)
        if delta.content:
            content.append(delta.content)
    assert "".join(reasoning) == THOUGHT and len(reasoning) > 1  # streamed, piece by piece
    assert "".join(content) == OWN_ANSWER  # the answer alone
    whole = client.chat.completions.create(model="model", stream=False, messages=[
        {"role": "user", "content": "THINK: who founded the guild?"}])
    assert whole.choices[0].message.content == OWN_ANSWER
    assert (whole.choices[0].message.model_extra or {}).get("reasoning_content") == THOUGHT


def test_citations_by_similarity_only_when_the_model_gives_none(base_url: str, setup: dict[str, str]) -> None:
    key, chat = setup["key"], setup["chat"]
    session = _api(base_url, key, "POST", f"/chats/{chat}/sessions", json={"name": "cites"})
    uncited = _api(base_url, key, "POST", f"/chats/{chat}/completions", json={
        "question": "NOCITE: tell me about the guild", "session_id": session["id"], "stream": False})
    markers = [int(n) for n in re.findall(r"\[ID:(\d+)\]", uncited["answer"])]
    assert markers, uncited["answer"]  # the model cited nothing: placed by similarity
    assert uncited["answer"].startswith("Here is what I found.")  # a sentence no chunk holds stays bare
    cited_sentence = uncited["answer"].split("Here is what I found. ", 1)[1]
    chunk = uncited["reference"]["chunks"][markers[0]]["content"]
    words = re.sub(r"\s*\[ID:\d+\]", "", cited_sentence).rstrip(".").split()[:6]
    assert " ".join(words) in " ".join(chunk.split()), (cited_sentence, chunk)
    own = _api(base_url, key, "POST", f"/chats/{chat}/completions", json={
        "question": "what does the guild keep?", "session_id": session["id"], "stream": False})
    assert own["answer"] == OWN_ANSWER  # the model's own citation, nothing added
