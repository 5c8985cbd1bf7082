"""Browser tests of the web pages: a real Celery worker (threads) on Redis, the Flask app over real
HTTP, and headless Chromium driven by Selenium through the system's chromedriver.

Screenshots of every page land in tests/artifacts/ui/ (gitignored), for people to look at."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import REDIS_URL, scratch_redis_prefix
from kbgraph.config import Settings, load_settings
from support.scripted_llm import ScriptedLLM
from support.web_host import celery_worker, web_server
from task_executor.celery_app import KBCelery

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "ui"


def chat_reply(body: dict[str, Any]) -> str:
    """The scripted model's answers: a chat answer cites the first excerpt its system prompt numbers;
    anything else (query analysis) gets a reply that carries nothing, so the graph's own extractor
    stands in."""
    system = body["messages"][0]["content"] if body.get("messages") else ""
    markers = re.findall(r"\[ID:(\d+)\]", system)
    if markers and body.get("stream"):
        return f"Mira Castell founded the Lumen Cartographers Guild in 790 [ID:{markers[0]}]."
    return "{}"


@pytest.fixture(scope="module")
def scripted_model() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(responder=chat_reply, stream_piece_chars=5) as server:
        yield server


@pytest.fixture(scope="module")
def ui_settings(tmp_path_factory: pytest.TempPathFactory, scripted_model: ScriptedLLM) -> Iterator[Settings]:
    with scratch_redis_prefix() as prefix:
        base = load_settings(data_dir=tmp_path_factory.mktemp("ui") / "data", store="sqlite", embedding_provider="hash",
                             embedding_dim=64, redis_url=REDIS_URL, redis_prefix=prefix)
        yield scripted_model.settings(base, embedding_provider="hash", embedding_model="")


UI_REFRESH_DELAY = 0.3


@pytest.fixture(scope="module")
def ui_celery(ui_settings: Settings) -> Iterator[KBCelery]:
    # short: the pages' tests go on to the graph's communities and reports once the documents are done
    # (2 s here left the graph page's community reports unwritten when that test looked for them)
    with celery_worker(ui_settings, refresh_delay=UI_REFRESH_DELAY) as app:
        yield app


@pytest.fixture(scope="module")
def base_url(ui_settings: Settings, ui_celery: KBCelery) -> Iterator[str]:
    from web.ui.assets import AssetsError, setup_assets

    try:
        setup_assets()
    except AssetsError as exc:
        pytest.fail(f"the graph view's libraries cannot be installed: {exc}")
    with web_server(ui_settings, ui_celery) as url:
        yield url


def _chromium() -> tuple[str, str]:
    binary = os.environ.get("KBGRAPH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser") \
        or shutil.which("google-chrome")
    driver = os.environ.get("KBGRAPH_CHROMEDRIVER") or shutil.which("chromedriver")
    if not binary or not driver:
        message = "headless Chromium and chromedriver are needed (apt-get install chromium chromium-driver)"
        if os.environ.get("KBGRAPH_REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return binary, driver


def new_browser(width: int = 1280, height: int = 800):  # type: ignore[no-untyped-def]
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = _chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(driver), options=options)
    browser.set_page_load_timeout(30)
    if width < 500:  # headless Chromium's windows are at least 500 px wide: emulate a phone's viewport
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True})
    return browser


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    b = new_browser()
    yield b
    b.quit()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
