"""axe-core (installed from npm into tests/ui/a11y) on every page of the web app, signed out and
signed in, with content in them (a parsed knowledge base with its graph, a conversation with an
answer, a retrieval with results, an error page): any serious or critical violation fails, and so
does any script or style the Content-Security-Policy blocks (a page the policy breaks)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC

from kbgraph.data import SAMPLE_CORPUS_DIR
from ui.test_pages_browser import doc_rows, sign_up, wait

pytestmark = pytest.mark.services

A11Y_DIR = Path(__file__).parent / "a11y"
AXE = A11Y_DIR / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = {"serious", "critical"}


@pytest.fixture(scope="module")
def axe_source() -> str:
    if not AXE.is_file():
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("npm is needed to install axe-core for the accessibility test (install Node.js with npm)")
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=A11Y_DIR,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    return AXE.read_text(encoding="utf-8")


def axe_violations(browser: WebDriver, source: str) -> list[str]:
    browser.execute_script(source)
    result = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then((r) => done(r.violations.map((v) => "
        "({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' '))}))))"
        ".catch((e) => done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]));")
    return [f"{v['impact']}: {v['id']} ({v['help']}) at {v['nodes']}" for v in result if v["impact"] in BLOCKING]


def blocked_by_policy(browser: WebDriver) -> list[str]:
    return [e["message"] for e in browser.get_log("browser") if "Content Security Policy" in e["message"]
            or "Refused to" in e["message"]]


def _check(browser: WebDriver, source: str, name: str, found: dict[str, list[str]]) -> None:
    problems = axe_violations(browser, source) + blocked_by_policy(browser)
    if problems:
        found[name] = problems


def _content(browser: WebDriver, base_url: str) -> dict[str, str]:
    """A knowledge base with parsed documents and a graph, and an assistant that answered once."""
    sign_up(browser, base_url, "axe@example.com")
    form = browser.find_element(By.CSS_SELECTOR, "form[action='/kbs']")
    form.find_element(By.NAME, "name").send_keys("Access")
    form.find_element(By.NAME, "graph").click()
    from selenium.webdriver.support.ui import Select

    Select(form.find_element(By.NAME, "method")).select_by_value("nlp")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, EC.presence_of_element_located((By.ID, "documents")), what="the documents page")
    kb_url = browser.current_url
    files = [str(SAMPLE_CORPUS_DIR / n) for n in ("mira_castell.md", "lumen_cartographers_guild.md", "salt_war.md")]
    browser.find_element(By.ID, "file-input").send_keys("\n".join(files))
    wait(browser, lambda b: len(doc_rows(b)) == 3 and all(r["status"] == "done" for r in doc_rows(b))
         and b.find_element(By.ID, "documents").get_attribute("data-busy") == "no", timeout=120, what="parsed")
    doc_id = doc_rows(browser)[0]["id"]
    browser.get(base_url + "/chat")
    new = browser.find_element(By.ID, "new-assistant")
    new.find_element(By.NAME, "name").send_keys("Guide")
    new.find_element(By.NAME, "kb_ids").click()
    new.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, EC.presence_of_element_located((By.ID, "question")), what="the conversation")
    browser.find_element(By.ID, "question").send_keys("Who founded the Lumen Cartographers Guild?")
    browser.find_element(By.CSS_SELECTOR, "#ask button").click()
    wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, ".msg.assistant:last-child").get_attribute("data-done"),
         timeout=60, what="the answer")
    return {"kb": kb_url, "doc": f"{kb_url}/documents/{doc_id}", "chat": browser.current_url}


def test_every_page_passes_axe(browser: WebDriver, base_url: str, axe_source: str) -> None:
    found: dict[str, list[str]] = {}
    for name in ("login", "signup"):
        browser.get(f"{base_url}/{name}")
        _check(browser, axe_source, name, found)
    urls = _content(browser, base_url)
    pages = {
        "kbs": base_url + "/kbs", "documents": urls["kb"], "chunks": urls["doc"] + "?q=guild",
        "kb-settings": urls["kb"] + "/settings", "kb-delete": urls["kb"] + "/delete",
        "retrieval": urls["kb"] + "/retrieval?question=Who+founded+the+guild&mode=mix",
        "graph": urls["kb"] + "/graph", "chat-list": base_url + "/chat", "chat": urls["chat"],
        "settings": base_url + "/settings", "not-found": base_url + "/no-such-page",
    }
    for name, url in pages.items():
        browser.get(url)
        if name == "graph":
            wait(browser, lambda b: b.find_element(By.ID, "graph-app").get_attribute("data-loaded") == "yes",
                 what="the graph drawn")
        if name == "documents":
            wait(browser, lambda b: len(doc_rows(b)) == 3, what="the rows")
        _check(browser, axe_source, name, found)
    # a dialog open: the citation of the answer
    browser.get(urls["chat"])
    cites = browser.find_elements(By.CSS_SELECTOR, "button.cite")
    if cites:
        cites[0].click()
        _check(browser, axe_source, "chat-citation", found)
    assert found == {}, found
