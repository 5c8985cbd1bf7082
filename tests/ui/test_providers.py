"""Model providers per tenant, in headless Chromium and over the REST API: a provider added on the
settings page (its key encrypted at rest, "Test connection" listing its models), an assistant choosing
one of its models and answered by that endpoint (a second scripted server) while the server's own
model stays the default, ragflow-sdk's ``llm.model_name`` accepting ``model@provider`` and refusing an
unknown one with RAGFlow's message, and another tenant seeing none of it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select

from kbgraph.config import Settings
from support.scripted_llm import ScriptedLLM
from ui.test_pages_browser import sign_up, wait

pytestmark = pytest.mark.services

KEY = "sk-provider-secret-123456"
MODEL = "their-model"


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(responder=lambda body: "From the provider's model.", extra_models=[MODEL]) as server:
        yield server


def _api(base_url: str, key: str, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    return requests.request(method, f"{base_url}/api/v1{path}", headers={"Authorization": f"Bearer {key}"},
                            timeout=60, **kwargs).json()


def test_a_tenant_adds_a_provider_and_an_assistant_answers_with_it(browser: WebDriver, base_url: str,
                                                                   provider: ScriptedLLM, ui_settings: Settings) -> None:
    sign_up(browser, base_url, "models@example.com")
    browser.get(base_url + "/settings")
    form = browser.find_element(By.ID, "new-provider")
    form.find_element(By.NAME, "name").send_keys("acme")
    form.find_element(By.NAME, "base_url").send_keys(provider.base_url)
    form.find_element(By.NAME, "api_key").send_keys(KEY)
    browser.find_element(By.ID, "test-provider").click()
    wait(browser, lambda b: b.find_element(By.ID, "provider-status").get_attribute("data-ok"), what="the test")
    assert MODEL in browser.find_element(By.ID, "provider-status").text
    chat_models = form.find_element(By.NAME, "chat_models")
    chat_models.clear()
    chat_models.send_keys(MODEL)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, lambda b: "stored encrypted" in b.find_element(By.CSS_SELECTOR, ".flash").text, what="added")
    row = browser.find_element(By.CSS_SELECTOR, "tr[data-provider=acme]")
    assert MODEL in row.text and KEY not in browser.page_source
    row.find_element(By.CSS_SELECTOR, "[data-test-provider]").click()  # a saved one: its stored key is used
    wait(browser, lambda b: MODEL in b.find_element(By.ID, "provider-status").text, what="the saved one tested")

    # encrypted at rest: the metadata database never holds the key
    with sqlite3.connect(ui_settings.data_dir / "meta.db") as db:
        sealed = db.execute("SELECT api_key_sealed FROM model_provider WHERE name = 'acme'").fetchone()[0]
    assert sealed and KEY not in sealed and KEY.encode() not in (ui_settings.data_dir / "meta.db").read_bytes()

    browser.get(base_url + "/chat")
    new = browser.find_element(By.ID, "new-assistant")
    new.find_element(By.NAME, "name").send_keys("Outsourced")
    Select(new.find_element(By.NAME, "model")).select_by_value(f"{MODEL}@acme")
    new.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    box = wait(browser, EC.presence_of_element_located((By.ID, "question")), what="the conversation")
    asked_before = len([r for r in provider.requests if r["kind"] == "chat_stream"])
    box.send_keys("Hello there?")
    browser.find_element(By.CSS_SELECTOR, "#ask button").click()
    answer = wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, ".msg.assistant:last-child")
                  if b.find_element(By.CSS_SELECTOR, ".msg.assistant:last-child").get_attribute("data-done") else None,
                  timeout=60, what="the answer")
    assert "From the provider's model." in answer.text, answer.text
    streamed = [r for r in provider.requests if r["kind"] == "chat_stream"][asked_before:]
    assert streamed and streamed[-1]["body"]["model"] == MODEL


def test_the_rest_api_takes_model_at_provider_names(browser: WebDriver, base_url: str) -> None:
    browser.get(base_url + "/settings")
    browser.find_element(By.CSS_SELECTOR, "form[action='/settings/api-keys'] button").click()
    key = wait(browser, EC.presence_of_element_located((By.ID, "new-key")), what="the new key").text
    made = _api(base_url, key, "POST", "/chats", json={"name": "sdk chat", "llm": {"model_name": f"{MODEL}@acme"}})
    assert made["code"] == 0 and made["data"]["llm"]["model_name"] == f"{MODEL}@acme", made
    unknown = _api(base_url, key, "POST", "/chats", json={"name": "sdk chat 2", "llm": {"model_name": "nope@acme"}})
    assert unknown == {"code": 102, "message": "`model_name` nope@acme doesn't exist"}
    # another tenant has no provider "acme": the name is not theirs to use
    other = requests.Session()
    token = other.get(base_url + "/signup").text.split('name="csrf_token" value="')[1].split('"')[0]
    other.post(base_url + "/signup", data={"email": "stranger@example.com", "password": "correct horse",
                                           "confirm": "correct horse", "csrf_token": token})
    assert "acme" not in other.get(base_url + "/settings").text


def test_a_knowledge_base_extracts_with_a_providers_model(browser: WebDriver, base_url: str,
                                                         provider: ScriptedLLM, tmp_path: Any) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    from ui.test_pages_browser import doc_rows

    browser.get(base_url + "/kbs")
    form = browser.find_element(By.CSS_SELECTOR, "form[action='/kbs']")
    form.find_element(By.NAME, "name").send_keys("Extracted elsewhere")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, EC.presence_of_element_located((By.ID, "documents")), what="the documents page")
    kb_url = browser.current_url
    browser.get(kb_url + "/settings")
    settings = browser.find_element(By.ID, "kb-settings")
    if not settings.find_element(By.NAME, "graph").is_selected():
        settings.find_element(By.NAME, "graph").click()
    Select(settings.find_element(By.NAME, "method")).select_by_value("light")
    Select(settings.find_element(By.NAME, "extraction_model")).select_by_value(f"{MODEL}@acme")
    settings.find_element(By.CSS_SELECTOR, "button.primary").click()
    WebDriverWait(browser, 10).until(EC.alert_is_present(), "the confirmation").accept()
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".flash"), what="saved")
    selected = Select(browser.find_element(By.NAME, "extraction_model")).first_selected_option
    assert selected.get_attribute("value") == f"{MODEL}@acme"
    calls_before = len([r for r in provider.requests if r["kind"] == "chat"])
    doc = tmp_path / "note.txt"
    doc.write_text("Mira Castell founded the Lumen Cartographers Guild in the harbour town of Varrow.")
    browser.get(kb_url)
    browser.find_element(By.ID, "file-input").send_keys(str(doc))
    wait(browser, lambda b: [r["status"] for r in doc_rows(b)] in (["done"], ["failed"]), timeout=90, what="parsed")
    extraction = [r for r in provider.requests if r["kind"] == "chat"][calls_before:]
    assert extraction and {r["body"]["model"] for r in extraction} == {MODEL}


EMBED_KEY = "sk-vectors-secret-654321"
EMBED_MODEL = "vec-small"


@pytest.fixture(scope="module")
def vectors() -> Iterator[ScriptedLLM]:
    """A provider serving embeddings 48 wide (the server's own are 64 wide)."""
    with ScriptedLLM(embedding_dim=48, extra_models=[EMBED_MODEL]) as server:
        yield server


def _add_embedding_provider(browser: WebDriver, base_url: str, vectors: ScriptedLLM) -> None:
    browser.get(base_url + "/settings")
    form = browser.find_element(By.ID, "new-provider")
    form.find_element(By.NAME, "name").send_keys("vectors")
    form.find_element(By.NAME, "base_url").send_keys(vectors.base_url)
    form.find_element(By.NAME, "api_key").send_keys(EMBED_KEY)
    form.find_element(By.NAME, "embedding_models").send_keys(EMBED_MODEL)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, lambda b: "stored encrypted" in b.find_element(By.CSS_SELECTOR, ".flash").text, what="added")


def _embeddings(server: ScriptedLLM, since: int = 0) -> list[dict[str, Any]]:
    return [r for r in server.requests[since:] if r["kind"] == "embeddings"]


def test_a_knowledge_base_embeds_with_a_providers_model(browser: WebDriver, base_url: str, vectors: ScriptedLLM,
                                                        tmp_path: Any) -> None:
    from ui.test_pages_browser import doc_rows

    _add_embedding_provider(browser, base_url, vectors)
    browser.get(base_url + "/kbs")
    form = browser.find_element(By.CSS_SELECTOR, "form[action='/kbs']")
    form.find_element(By.NAME, "name").send_keys("Embedded elsewhere")
    Select(form.find_element(By.NAME, "embedding_model")).select_by_value(f"{EMBED_MODEL}@vectors")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, EC.presence_of_element_located((By.ID, "documents")), what="the documents page")
    kb_url = browser.current_url
    doc = tmp_path / "harbour.txt"
    doc.write_text("The lighthouse keepers of Varrow harbour trim their lamps with whale oil every dusk.")
    browser.find_element(By.ID, "file-input").send_keys(str(doc))
    wait(browser, lambda b: [r["status"] for r in doc_rows(b)] in (["done"], ["failed"]), timeout=90, what="parsed")
    assert [r["status"] for r in doc_rows(browser)] == ["done"]
    indexed = _embeddings(vectors)
    assert indexed, "the provider's endpoint embedded nothing"
    assert {r["authorization"] for r in indexed} == {f"Bearer {EMBED_KEY}"}
    assert {r["body"]["model"] for r in indexed} == {EMBED_MODEL}

    browser.get(base_url + "/kbs")
    assert f"embeds with {EMBED_MODEL}@vectors" in browser.find_element(By.TAG_NAME, "main").text

    before = len(vectors.requests)
    browser.get(kb_url + "/retrieval?mode=naive&question=lighthouse+keepers+lamps")
    assert "whale oil" in browser.find_element(By.CSS_SELECTOR, ".chunk-hit .content").text
    assert any("lighthouse" in str(r["body"]["input"]) for r in _embeddings(vectors, before))

    # with chunks, the model stays: the page shows it and will not take another
    browser.get(kb_url + "/settings")
    select = browser.find_element(By.NAME, "embedding_model")
    assert not select.is_enabled() and Select(select).first_selected_option.get_attribute("value") == \
        f"{EMBED_MODEL}@vectors"
    browser.execute_script("document.querySelector('select[name=embedding_model]').disabled = false")
    Select(browser.find_element(By.NAME, "embedding_model")).select_by_value("")
    browser.find_element(By.CSS_SELECTOR, "#kb-settings button.primary").click()
    _accept_if_asked(browser)
    refusal = f"The embedding model stays {EMBED_MODEL}@vectors while the knowledge base has chunks"
    wait(browser, lambda b: refusal in b.find_element(By.TAG_NAME, "main").text, what="the refusal")
    browser.get(kb_url + "/settings")
    kept = Select(browser.find_element(By.NAME, "embedding_model")).first_selected_option
    assert kept.get_attribute("value") == f"{EMBED_MODEL}@vectors"


def _accept_if_asked(browser: WebDriver) -> None:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        WebDriverWait(browser, 5).until(EC.alert_is_present()).accept()
    except TimeoutException:
        pass


def test_an_empty_knowledge_base_moves_to_a_providers_embedding_model(browser: WebDriver, base_url: str) -> None:
    browser.get(base_url + "/kbs")
    form = browser.find_element(By.CSS_SELECTOR, "form[action='/kbs']")
    form.find_element(By.NAME, "name").send_keys("Chosen later")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, EC.presence_of_element_located((By.ID, "documents")), what="the documents page")
    browser.get(browser.current_url + "/settings")
    select = Select(browser.find_element(By.NAME, "embedding_model"))
    assert select.first_selected_option.get_attribute("value") == ""  # the server's model
    select.select_by_value(f"{EMBED_MODEL}@vectors")
    browser.find_element(By.CSS_SELECTOR, "#kb-settings button.primary").click()
    _accept_if_asked(browser)
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".flash"), what="saved")
    chosen = Select(browser.find_element(By.NAME, "embedding_model")).first_selected_option
    assert chosen.get_attribute("value") == f"{EMBED_MODEL}@vectors"


def test_removing_the_provider_names_the_knowledge_bases_left_without_it(browser: WebDriver, base_url: str) -> None:
    browser.get(base_url + "/settings")
    row = browser.find_element(By.CSS_SELECTOR, "tr[data-provider=vectors]")
    row.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    _accept_if_asked(browser)
    flash = wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, ".flash").text if b.find_elements(
        By.CSS_SELECTOR, ".flash") else None, what="removed")
    assert "Embedded elsewhere" in flash and "Chosen later" in flash, flash
    # searching it says what is missing, not "something went wrong"
    browser.get(base_url + "/kbs")
    browser.find_element(By.LINK_TEXT, "Embedded elsewhere").click()
    wait(browser, EC.presence_of_element_located((By.ID, "documents")), what="the documents page")
    browser.get(browser.current_url + "/retrieval?mode=naive&question=lighthouse")
    text = browser.find_element(By.TAG_NAME, "main").text
    assert "no model provider named 'vectors' any more" in text, text
