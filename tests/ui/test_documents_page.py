"""The documents page in headless Chromium, with a real Celery worker: every phase of the work (the
graph's refresh included) shows as it happens, rows are updated in place (keyboard focus and the
scroll position survive the refreshes, Re-parse keeps the focus as it turns into Cancel), pages and
a name search (kept in the address), the row buttons in view at 1440 px, and a phone's 390 px
showing each document's status without sideways scrolling."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select

from kbgraph.data import SAMPLE_CORPUS_DIR
from ui.conftest import new_browser
from ui.test_pages_browser import doc_rows, shot, sign_up, wait

pytestmark = pytest.mark.services

STATE: dict[str, str] = {}

# every text the rows' phase lines and the graph's state line show, as the page draws them
_WATCH = """
window.__seen = new Set();
const note = () => {
  document.querySelectorAll('#documents .phase').forEach((p) => window.__seen.add('row:' + p.textContent));
  window.__seen.add('graph:' + document.getElementById('graph-state').textContent);
};
new MutationObserver(note).observe(document.getElementById('main'), {subtree: true, childList: true, characterData: true});
note();
"""


def _refreshes(browser: WebDriver) -> int:
    return int(browser.find_element(By.ID, "documents").get_attribute("data-refreshes") or 0)


def _idle(browser: WebDriver) -> bool:
    rows = doc_rows(browser)
    return bool(rows) and all(r["status"] in ("done", "failed") for r in rows) and \
        browser.find_element(By.ID, "documents").get_attribute("data-busy") == "no"


def _long_document(folder: Path) -> Path:
    """The sample's texts forty times over, each copy under its own heading: its parse and extraction
    last several of the page's one-second polls, where a sample file's whole task can fall between two
    polls (CI saw only "queued" and "done" once)."""
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(SAMPLE_CORPUS_DIR.iterdir()) if p.is_file()]
    body = "\n\n".join(f"# Volume {n}\n\n{text}" for n in range(40) for text in texts)
    path = folder / "collected_volumes.md"
    path.write_text(body, encoding="utf-8")
    return path


def _uploads() -> int:
    return len(list(SAMPLE_CORPUS_DIR.iterdir())) + 1  # the sample and the long document


def test_every_phase_shows_as_it_happens(browser: WebDriver, base_url: str, artifacts: Path,
                                         tmp_path: Path) -> None:
    sign_up(browser, base_url, "phases@example.com")
    form = browser.find_element(By.CSS_SELECTOR, "form[action='/kbs']")
    form.find_element(By.NAME, "name").send_keys("Phases")
    form.find_element(By.NAME, "graph").click()
    Select(form.find_element(By.NAME, "method")).select_by_value("nlp")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, EC.presence_of_element_located((By.ID, "documents")), what="the documents page")
    STATE["kb_url"] = browser.current_url
    browser.execute_script(_WATCH)
    files = sorted(str(p) for p in SAMPLE_CORPUS_DIR.iterdir() if p.is_file()) + [str(_long_document(tmp_path))]
    browser.find_element(By.ID, "file-input").send_keys("\n".join(files))
    wait(browser, lambda b: len(doc_rows(b)) == len(files), what="every file listed")
    wait(browser, _idle, timeout=180, what="everything parsed and the graph refreshed")
    seen = browser.execute_script("return [...window.__seen]")
    phases = {text.split(" ")[0].split(":")[1] for text in seen if text.startswith("row:") and " " in text}
    assert {"parse", "extract", "merge"} & phases and len(phases) >= 2, sorted(seen)
    graph_lines = [t for t in seen if t.startswith("graph:")]
    # queued, waiting or running; a refresh quicker than the page's one-second poll shows as done
    assert any("refresh" in t.lower() for t in graph_lines), graph_lines
    final = browser.find_element(By.ID, "graph-state").text
    assert "Graph refreshed at" in final and "entities" in final, final  # the last refresh, once idle
    shot(browser, artifacts, "20-documents-phases")


def test_rows_update_in_place_and_keep_focus(browser: WebDriver) -> None:
    browser.get(STATE["kb_url"])
    wait(browser, _idle, timeout=60, what="the list loaded and idle")
    browser.set_window_size(1280, 500)  # short: the page scrolls
    browser.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    scrolled = browser.execute_script("return window.scrollY")
    assert scrolled > 0
    row_id = doc_rows(browser)[-1]["id"]
    button = browser.find_element(By.CSS_SELECTOR, f"tr[data-id='{row_id}'] .rowactions button")
    assert button.text == "Re-parse"
    browser.execute_script("arguments[0].focus({preventScroll: true})", button)
    top = browser.execute_script("return arguments[0].getBoundingClientRect().top", button)
    button.send_keys(Keys.ENTER)  # by keyboard: the parse is queued and the button turns into Cancel
    start = _refreshes(browser)
    wait(browser, lambda b: _refreshes(b) >= start + 3, timeout=30, what="three refreshes of the list")
    focused = browser.execute_script("return document.activeElement")
    assert focused == button, "the focus left the row's button"
    # the page did not jump: the row stays where the reader had it (growing text above it is
    # compensated by the browser's scroll anchoring, a redrawn table would not be)
    assert browser.execute_script("return window.scrollY") > 0
    assert abs(browser.execute_script("return arguments[0].getBoundingClientRect().top", button) - top) < 30
    wait(browser, _idle, timeout=60, what="the re-parse done")
    assert browser.execute_script("return document.activeElement") == button and button.text == "Re-parse"
    browser.set_window_size(1280, 800)


def test_pages_and_name_search(browser: WebDriver) -> None:
    count = _uploads()
    assert 10 < count <= 20
    browser.get(STATE["kb_url"])
    wait(browser, lambda b: len(doc_rows(b)) == count, what="the list")
    Select(browser.find_element(By.ID, "doc-size")).select_by_value("10")
    wait(browser, lambda b: len(doc_rows(b)) == 10, what="ten per page")
    assert "Page 1 of 2" in browser.find_element(By.ID, "page-info").text
    browser.find_element(By.ID, "page-next").click()
    wait(browser, lambda b: len(doc_rows(b)) == count - 10, what="the second page")
    assert browser.find_element(By.ID, "page-next").get_attribute("disabled") is not None
    box = browser.find_element(By.ID, "doc-q")
    box.send_keys("GUILD")
    wait(browser, lambda b: sorted(r["text"].split("md")[0] for r in doc_rows(b)) ==
         ["guild_registry.", "lumen_cartographers_guild."], what="the names holding 'guild'")
    assert f"2 of {count} documents match" in browser.find_element(By.ID, "page-info").text
    assert "q=GUILD" in browser.current_url
    browser.refresh()  # the search is in the address: a reload keeps it
    wait(browser, lambda b: len(doc_rows(b)) == 2, what="the search after a reload")
    assert browser.find_element(By.ID, "doc-q").get_attribute("value") == "GUILD"
    box = browser.find_element(By.ID, "doc-q")
    box.clear()
    box.send_keys("no such name")
    wait(browser, lambda b: "No document's name holds" in b.find_element(By.ID, "documents").text, what="no match")


def test_row_buttons_in_view_wide_and_status_on_a_phone(base_url: str, artifacts: Path) -> None:
    for width, height in ((1440, 900), (390, 844)):
        b = new_browser(width, height)
        try:
            b.get(base_url + "/login")
            b.find_element(By.NAME, "email").send_keys("phases@example.com")
            b.find_element(By.NAME, "password").send_keys("correct horse")
            b.find_element(By.CSS_SELECTOR, "button[type=submit].primary").click()
            wait(b, EC.url_contains("/kbs"), what="signed in")
            b.get(STATE["kb_url"])
            wait(b, lambda x: len(doc_rows(x)) == _uploads(), what="the list")
            shot(b, artifacts, f"21-documents-{width}")
            assert b.execute_script("return document.documentElement.scrollWidth") <= width
            clipped = b.execute_script("""
                const wrap = document.querySelector('.tablewrap').getBoundingClientRect();
                const out = [];
                document.querySelectorAll('#documents tr[data-id]').forEach((tr) => {
                  for (const sel of ['.badge', '.rowactions button.danger', 'progress']) {
                    const r = tr.querySelector(sel).getBoundingClientRect();
                    if (r.right > Math.min(wrap.right, window.innerWidth) + 0.5 || r.left < 0) out.push(sel);
                  }
                });
                return out;""")
            assert clipped == [], f"cut off at {width} px: {clipped}"
        finally:
            b.quit()
