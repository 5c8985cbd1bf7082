"""The web pages in headless Chromium, as a new user goes through them: sign up, create a knowledge
base with the graph on, upload the sample corpus, watch it parse, test retrieval in kg mode, open
the graph view, search an entity and expand it. Another user never sees the first one's data."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from kbgraph.data import SAMPLE_CORPUS_DIR
from ui.conftest import new_browser

pytestmark = pytest.mark.services

STATE: dict[str, str] = {}


def wait(browser: WebDriver, check: Callable[[WebDriver], Any], timeout: float = 30, what: str = "") -> Any:
    return WebDriverWait(browser, timeout, poll_frequency=0.2).until(check, what)


def shot(browser: WebDriver, artifacts: Path, name: str) -> None:
    browser.save_screenshot(str(artifacts / f"{name}.png"))


def page_errors(browser: WebDriver) -> list[str]:
    return [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"] \
        if hasattr(browser, "get_log") else []


_ROWS_JS = """return [...document.querySelectorAll('#documents tr[data-id]')].map(tr => ({
    id: tr.dataset.id, status: tr.dataset.status, chunks: tr.cells[4].textContent, text: tr.textContent}))"""


def doc_rows(browser: WebDriver) -> list[dict[str, str]]:
    return browser.execute_script(_ROWS_JS)  # the table is redrawn every second: read it in one go


def sign_up(browser: WebDriver, base_url: str, email: str) -> None:
    browser.get(base_url + "/")
    browser.find_element(By.LINK_TEXT, "Sign up").click()
    browser.find_element(By.NAME, "email").send_keys(email)
    browser.find_element(By.NAME, "password").send_keys("correct horse")
    browser.find_element(By.NAME, "confirm").send_keys("correct horse")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit].primary").click()
    wait(browser, EC.url_contains("/kbs"), what="the knowledge base list after signing up")


def test_new_user_goes_through_every_page(browser: WebDriver, base_url: str, artifacts: Path) -> None:
    sign_up(browser, base_url, "alice@example.com")
    shot(browser, artifacts, "01-kbs-empty")

    form = browser.find_element(By.CSS_SELECTOR, "form[action='/kbs']")
    form.find_element(By.NAME, "name").send_keys("Varrow")
    chunk = form.find_element(By.NAME, "chunk_tokens")
    chunk.clear()
    chunk.send_keys("200")
    form.find_element(By.NAME, "graph").click()  # the knowledge graph switch
    Select(form.find_element(By.NAME, "method")).select_by_value("nlp")
    form.find_element(By.NAME, "community").click()
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, EC.presence_of_element_located((By.ID, "documents")), what="the documents page")
    STATE["kb_url"] = browser.current_url
    assert "graph on" in browser.find_element(By.CSS_SELECTOR, ".kbhead h1").text

    files = sorted(str(p) for p in SAMPLE_CORPUS_DIR.iterdir() if p.is_file())
    browser.find_element(By.ID, "file-input").send_keys("\n".join(files))
    wait(browser, lambda b: len(doc_rows(b)) == len(files), what="every uploaded file listed")
    shot(browser, artifacts, "02-documents-parsing")
    statuses: set[str] = set()

    def all_done(b: WebDriver) -> bool:
        rows = doc_rows(b)
        statuses.update(r["status"] for r in rows)
        return bool(rows) and all(r["status"] == "done" for r in rows) \
            and b.find_element(By.ID, "documents").get_attribute("data-busy") == "no"

    wait(browser, all_done, timeout=120, what="every document done and the graph refreshed")
    shot(browser, artifacts, "03-documents-done")
    assert statuses & {"running", "pending"}, "progress was never seen moving"
    rows = doc_rows(browser)
    assert all(int(r["chunks"]) > 0 for r in rows), rows
    state = browser.find_element(By.ID, "graph-state").text
    assert "entities" in state and not state.startswith("0 entities"), state

    # a document's chunks
    browser.get(f"{STATE['kb_url']}/documents/{rows[0]['id']}")
    wait(browser, EC.presence_of_element_located((By.CSS_SELECTOR, ".chunk .content")), what="the chunks page")
    shot(browser, artifacts, "04-chunks")

    # retrieval test in kg mode
    browser.get(STATE["kb_url"] + "/retrieval")
    browser.find_element(By.NAME, "question").send_keys("Who founded the Lumen Cartographers Guild?")
    Select(browser.find_element(By.NAME, "mode")).select_by_value("kg")
    browser.find_element(By.CSS_SELECTOR, "#retrieval-form button[type=submit]").click()
    wait(browser, EC.presence_of_element_located((By.CSS_SELECTOR, ".chunk-hit")), what="retrieval results")
    entities = browser.find_elements(By.CSS_SELECTOR, ".kg-entities tbody tr")
    assert entities, "kg mode found no entity"
    assert browser.find_elements(By.CSS_SELECTOR, ".chunk-hit mark"), "question words are not highlighted"
    assert "graph" in browser.find_element(By.CSS_SELECTOR, ".chunk-hit .scores").text
    shot(browser, artifacts, "05-retrieval-kg")

    # chat: an assistant over the knowledge base, an answer streamed in pieces, a citation that opens
    browser.get(base_url + "/chat")
    form = browser.find_element(By.ID, "new-assistant")
    form.find_element(By.NAME, "name").send_keys("Guide")
    form.find_element(By.CSS_SELECTOR, "input[name=kb_ids]").click()
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    question = wait(browser, EC.presence_of_element_located((By.ID, "question")), what="the chat page")
    shot(browser, artifacts, "06-chat-new")
    question.send_keys("Who founded the Lumen Cartographers Guild?")
    question.send_keys(Keys.ENTER)
    answer = wait(browser, EC.presence_of_element_located((By.CSS_SELECTOR, ".msg.assistant[data-done]")),
                  what="the streamed answer")
    assert answer.get_attribute("data-done") == "yes", answer.text
    assert int(answer.get_attribute("data-deltas")) > 3, "the answer did not arrive in pieces"
    assert "Mira Castell founded" in answer.text
    shot(browser, artifacts, "07-chat-answer")
    answer.find_element(By.CSS_SELECTOR, "button.cite").click()
    cited = wait(browser, EC.visibility_of_element_located((By.ID, "citation")), what="the cited chunk")
    assert cited.find_element(By.ID, "citation-text").text.strip()
    shot(browser, artifacts, "08-chat-citation")
    cited.find_element(By.CSS_SELECTOR, "#citation-doc a").click()
    wait(browser, EC.presence_of_element_located((By.CSS_SELECTOR, ".chunk.focus")), what="the cited chunk in its document")
    browser.back()
    wait(browser, EC.presence_of_element_located((By.CSS_SELECTOR, ".msg.assistant button.cite")),
         what="the conversation kept in its session")

    # graph view: loads, search with suggestions, select, expand
    browser.get(STATE["kb_url"] + "/graph")
    try:
        wait(browser, lambda b: b.find_element(By.ID, "graph-app").get_attribute("data-loaded") == "yes",
             what="the graph sample drawn")
    except Exception:
        shot(browser, artifacts, "09-graph-failed")
        raise AssertionError(f"the graph view did not load: {page_errors(browser)}") from None
    status = browser.find_element(By.ID, "graph-status").text
    assert status.startswith("Showing"), status
    shot(browser, artifacts, "09-graph")
    search = browser.find_element(By.ID, "entity-search")
    search.send_keys("Mira")
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#suggestions li"), what="name suggestions")
    assert any("Mira" in li.text for li in browser.find_elements(By.CSS_SELECTOR, "#suggestions li"))
    search.send_keys(Keys.ENTER)
    wait(browser, lambda b: b.find_elements(By.ID, "expand-node"), what="the entity's details")
    panel = browser.find_element(By.ID, "node-panel").text
    assert "Mira" in panel and "Source chunks" in panel, panel
    browser.find_element(By.ID, "expand-node").click()
    wait(browser, lambda b: b.find_element(By.ID, "expand-node").get_attribute("disabled") and
         "neighbour" in b.find_element(By.ID, "expand-node").text, what="the neighbours expanded")
    shot(browser, artifacts, "10-graph-expanded")
    Select(browser.find_element(By.ID, "colour-by")).select_by_value("community")
    assert browser.find_elements(By.CSS_SELECTOR, "#legend span")
    shot(browser, artifacts, "11-graph-communities")

    # settings: an API key shown once, then only its hash
    browser.get(base_url + "/settings")
    browser.find_element(By.CSS_SELECTOR, "form[action='/settings/api-keys'] button").click()
    key = browser.find_element(By.ID, "new-key").text
    assert key.startswith("kbgraph-")
    shot(browser, artifacts, "12-settings-key")
    listed = requests.get(base_url + "/api/v1/datasets", headers={"Authorization": f"Bearer {key}"}, timeout=10).json()
    assert [d["name"] for d in listed["data"]] == ["Varrow"]
    browser.refresh()
    assert not browser.find_elements(By.ID, "new-key")
    browser.find_element(By.CSS_SELECTOR, "form[data-confirm] button").click()
    browser.switch_to.alert.accept()
    wait(browser, lambda b: "revoked" in b.find_element(By.TAG_NAME, "main").text, what="the key revoked")
    refused = requests.get(base_url + "/api/v1/datasets", headers={"Authorization": f"Bearer {key}"}, timeout=10).json()
    assert refused["code"] != 0

    # the knowledge base's settings page: switching the graph off says what it removes
    browser.get(STATE["kb_url"] + "/settings")
    shot(browser, artifacts, "13-kb-settings")


def test_another_user_sees_none_of_it(base_url: str, artifacts: Path) -> None:
    assert STATE.get("kb_url"), "runs after the first test"
    other = new_browser()
    try:
        sign_up(other, base_url, "bob@example.com")
        assert "Varrow" not in other.find_element(By.TAG_NAME, "main").text
        for suffix in ("", "/retrieval?question=Mira&mode=kg", "/graph", "/settings", "/delete"):
            other.get(STATE["kb_url"] + suffix)
            assert "Not found" in other.find_element(By.TAG_NAME, "h1").text, suffix
        other.get(STATE["kb_url"].replace("/kbs/", "/ui/api/kbs/") + "/documents")
        assert "Not found" in other.page_source
        shot(other, artifacts, "14-other-tenant")
    finally:
        other.quit()


def test_narrow_screen(base_url: str, artifacts: Path) -> None:
    narrow = new_browser(390, 844)
    try:
        sign_up(narrow, base_url, "carol@example.com")
        shot(narrow, artifacts, "15-narrow-kbs")
        width = narrow.execute_script("return document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways ({width}px)"
    finally:
        narrow.quit()
