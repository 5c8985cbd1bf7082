"""Each citation marker names the exact chunk it was written for, through the whole path: the
excerpts numbered in the model's prompt, the answer's ``reference`` over the REST API (``[ID:n]`` is
``chunks[n]``), and the chat page's citation buttons opening that chunk.

The scripted model quotes the first words of several excerpts, later ones first, each followed by
the excerpt's own marker: a mapping one chunk off anywhere puts a quote next to a chunk that does
not hold it."""

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
from ui.test_pages_browser import sign_up, wait

pytestmark = pytest.mark.services

# an excerpt's head: its marker and its document's file name (the rules above them show markers too)
EXCERPT = re.compile(r"^\[ID:(\d+)\] \S+\.\w+\n", re.MULTILINE)
CITED = re.compile(r"([^.\[\]]+?) \[ID:(\d+)\]")
QUOTED_WORDS = 7


def quote(text: str) -> str:
    return " ".join(re.sub(r"[^\w ]", " ", text).split()[:QUOTED_WORDS])


def quoting_reply(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"] if body.get("messages") else ""
    heads = list(EXCERPT.finditer(system))
    excerpts = [(h.group(1), system[h.end():nxt.start() if nxt else len(system)])
                for h, nxt in zip(heads, [*heads[1:], None])]
    if not (excerpts and body.get("stream") is not None):
        return "{}"  # query analysis and the like: nothing to say
    picked = list(reversed(excerpts))[:4]  # later markers first, so a shifted mapping cannot agree by chance
    return " ".join(f"{quote(text)} [ID:{n}]." for n, text in picked)


@pytest.fixture(scope="module")
def scripted_model() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(responder=quoting_reply, stream_piece_chars=7) as server:
        yield server


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w ]", " ", text).split())


def _api(base_url: str, key: str, method: str, path: str, **kwargs: Any) -> Any:
    answer = requests.request(method, f"{base_url}/api/v1{path}", headers={"Authorization": f"Bearer {key}"},
                              timeout=60, **kwargs).json()
    assert answer["code"] == 0, answer
    return answer.get("data")


def _parsed_dataset(base_url: str, key: str) -> str:
    dataset = _api(base_url, key, "POST", "/datasets", json={"name": "citations", "parser_config": {"chunk_token_num": 96}})
    names = ("mira_castell.md", "lumen_cartographers_guild.md", "salt_war.md")
    files = [("file", (n, (SAMPLE_CORPUS_DIR / n).read_bytes())) for n in names]
    docs = _api(base_url, key, "POST", f"/datasets/{dataset['id']}/documents", files=files)
    _api(base_url, key, "POST", f"/datasets/{dataset['id']}/chunks", json={"document_ids": [d["id"] for d in docs]})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rows = _api(base_url, key, "GET", f"/datasets/{dataset['id']}/documents")["docs"]
        if all(r["run"] == "DONE" for r in rows):
            return str(dataset["id"])
        assert not any(r["run"] == "FAIL" for r in rows), rows
        time.sleep(0.5)
    raise AssertionError("the documents were not parsed in time")


def _check_markers(answer: str, chunks: list[dict[str, Any]]) -> list[tuple[str, int]]:
    cited = [(words.strip(), int(n)) for words, n in CITED.findall(answer)]
    assert len(cited) >= 3, answer
    for words, n in cited:
        assert n < len(chunks), (n, len(chunks))
        assert words in _normal(chunks[n]["content"]), f"[ID:{n}] follows {words!r}, which chunk {n} does not hold"
    return cited


def test_each_marker_opens_the_chunk_it_names(browser: WebDriver, base_url: str) -> None:
    sign_up(browser, base_url, "cites@example.com")
    browser.get(base_url + "/settings")
    browser.find_element(By.CSS_SELECTOR, "form[action='/settings/api-keys'] button").click()
    key = wait(browser, EC.presence_of_element_located((By.ID, "new-key")), what="the new key").text
    dataset_id = _parsed_dataset(base_url, key)
    chat = _api(base_url, key, "POST", "/chats", json={"name": "cites", "dataset_ids": [dataset_id],
                                                         "prompt": {"top_n": 6, "similarity_threshold": 0.0}})
    session = _api(base_url, key, "POST", f"/chats/{chat['id']}/sessions", json={"name": "markers"})
    reply = _api(base_url, key, "POST", f"/chats/{chat['id']}/completions",
                 json={"question": "Who founded the Lumen Cartographers Guild and what was the Salt War?",
                       "session_id": session["id"], "stream": False})
    cited = _check_markers(reply["answer"], reply["reference"]["chunks"])

    # the chat page: each citation button opens the chunk its marker names
    browser.get(f"{base_url}/chat/{chat['id']}?session={session['id']}")
    buttons = wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".msg.assistant button.cite"),
                   what="the answer's citation buttons")
    assert len(buttons) == len(cited)
    for button, (words, _) in zip(buttons, cited):
        button.click()
        dialog = wait(browser, lambda b: b.find_element(By.ID, "citation") if b.find_element(By.ID, "citation")
                      .is_displayed() else None, what="the citation dialog")
        assert words in _normal(dialog.find_element(By.ID, "citation-text").text)
        dialog.find_element(By.CSS_SELECTOR, "form[method=dialog] button").click()
        wait(browser, lambda b: not b.find_element(By.ID, "citation").is_displayed(), what="the dialog closed")
