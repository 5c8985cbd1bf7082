"""The chunks page in headless Chromium: a page of chunks at a time (a long document no longer
makes one huge page), search hits marked as whole words, the search and the page kept across an
edit, a citation's link opening the page that holds its chunk; whole-word highlighting in retrieval
(pages and the REST API's ``highlight``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC

from kbgraph.data import SAMPLE_CORPUS_DIR
from ui.test_pages_browser import doc_rows, shot, sign_up, wait
from web.highlight import em, mark

pytestmark = pytest.mark.services

# every <mark> is a whole word: no letter touches it on either side
_MARKS = """return [...document.querySelectorAll('.chunk .content mark')].map((m) => {
  const before = m.previousSibling ? m.previousSibling.textContent.slice(-1) : '';
  const after = m.nextSibling ? m.nextSibling.textContent.slice(0, 1) : '';
  return [before, m.textContent, after];
});"""


def test_whole_words_only() -> None:
    assert em("This is his island, IS it?", "is") == "This <em>is</em> his island, <em>IS</em> it?"
    assert str(mark("The guild's guildhall; Guild!", "guild")) == \
        "The <mark>guild</mark>&#39;s guildhall; <mark>Guild</mark>!"
    assert str(mark("北京大学的学生", "北京")) == "<mark>北京</mark>大学的学生"  # no spaces between words there


def test_chunks_are_paged_marked_and_the_search_survives_an_edit(browser: WebDriver, base_url: str,
                                                                 artifacts: Path, tmp_path: Path) -> None:
    sign_up(browser, base_url, "chunks@example.com")
    form = browser.find_element(By.CSS_SELECTOR, "form[action='/kbs']")
    form.find_element(By.NAME, "name").send_keys("Long")
    size = form.find_element(By.NAME, "chunk_tokens")
    size.clear()
    size.send_keys("48")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, EC.presence_of_element_located((By.ID, "documents")), what="the documents page")
    kb_url = browser.current_url
    long_doc = tmp_path / "everything.md"
    long_doc.write_text("\n\n".join(p.read_text(encoding="utf-8") for p in sorted(SAMPLE_CORPUS_DIR.glob("*.md"))),
                        encoding="utf-8")
    browser.find_element(By.ID, "file-input").send_keys(str(long_doc))
    wait(browser, lambda b: [r["status"] for r in doc_rows(b)] == ["done"], timeout=120, what="parsed")
    doc_id = doc_rows(browser)[0]["id"]
    total = int(doc_rows(browser)[0]["chunks"])
    assert total > 45, total

    page_url = f"{kb_url}/documents/{doc_id}"
    size = len(requests.Session().get(page_url).content)  # signed out: just the login page, for scale
    browser.get(page_url)
    html = browser.page_source
    assert len(browser.find_elements(By.CSS_SELECTOR, "li.chunk")) == 20
    assert len(html.encode()) < 200_000 and size < 200_000
    assert f"Page 1 of {-(-total // 20)}" in browser.find_element(By.CSS_SELECTOR, ".pager").text
    browser.find_element(By.CSS_SELECTOR, ".pager a[rel=next]").click()
    wait(browser, lambda b: "Page 2 of" in b.find_element(By.CSS_SELECTOR, ".pager").text, what="page 2")
    assert browser.find_element(By.CSS_SELECTOR, "ol.chunks").get_attribute("start") == "21"

    box = browser.find_element(By.NAME, "q")
    box.send_keys("guild")
    box.submit()
    wait(browser, lambda b: "q=guild" in b.current_url, what="the search")
    marks = browser.execute_script(_MARKS)
    assert marks and all(m[1].casefold() == "guild" for m in marks), marks
    assert all(not (m[0].isalnum() or m[2].isalnum()) for m in marks), [m for m in marks if m[0].isalnum() or m[2].isalnum()]
    shot(browser, artifacts, "22-chunks-search")

    first = browser.find_element(By.CSS_SELECTOR, "li.chunk")
    chunk_id = first.get_attribute("id").removeprefix("chunk-")
    first.find_element(By.CSS_SELECTOR, "details.edit summary").click()
    text = first.find_element(By.NAME, "content")
    text.send_keys(" The guild also keeps a lantern.")
    first.find_element(By.CSS_SELECTOR, "button.primary").click()
    wait(browser, lambda b: "Chunk saved" in b.find_element(By.CSS_SELECTOR, ".flash").text, what="saved")
    assert "q=guild" in browser.current_url and browser.find_element(By.NAME, "q").get_attribute("value") == "guild"
    assert browser.find_elements(By.CSS_SELECTOR, ".chunk .content mark")  # still the search's results, marked
    assert "also keeps a lantern" in browser.find_element(By.ID, f"chunk-{chunk_id}").text

    # a citation's link names the chunk only: the page that holds it opens, the chunk in focus
    last = browser.execute_script(
        "return fetch(arguments[0]).then((r) => r.text())", f"{page_url}?page={-(-total // 20)}")
    last_id = last.split('id="chunk-')[-1].split('"')[0]
    browser.get(f"{page_url}?chunk={last_id}#chunk-{last_id}")
    assert browser.find_element(By.CSS_SELECTOR, "li.chunk.focus").get_attribute("id") == f"chunk-{last_id}"


def test_retrieval_marks_whole_words(browser: WebDriver, base_url: str) -> None:
    kb_url = browser.current_url.split("/documents/")[0]
    browser.get(kb_url + "/retrieval?question=is+guild&mode=naive")
    marks = browser.execute_script("return [...document.querySelectorAll('.chunk-hit mark')].map((m) => "
                                   "[m.previousSibling ? m.previousSibling.textContent.slice(-1) : '', m.textContent,"
                                   " m.nextSibling ? m.nextSibling.textContent.slice(0, 1) : ''])")
    assert marks and all(m[1].casefold() == "guild" for m in marks), marks  # "is" is a stop word, "his" untouched
    assert all(not (m[0].isalnum() or m[2].isalnum()) for m in marks)
