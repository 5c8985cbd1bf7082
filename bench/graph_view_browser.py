"""The graph view opened in headless Chromium on a 100k-entity knowledge base, end to end.

    python bench/graph_view_browser.py [--entities 100000] [--relations 300000] [--data-dir DIR]
    python bench/graph_view_browser.py --sample [--data-dir DIR]     # the bundled sample corpus instead

Makes a user and a knowledge base in a data dir, fills the KB's graph with the synthetic rows of
bench/graph_view_bench.py (or indexes the sample corpus with the nlp graph method), serves the web app
(Flask's threaded server) and times, in Chromium, from asking for /kbs/<kb>/graph until the page has
drawn its sample (``data-loaded``), five reloads, plus the search-and-expand of one entity. Needs the
graph view's libraries (`kbgraph-web setup-assets`), chromium and chromedriver. ``--data-dir`` keeps
everything to rerun the timings. Redis: KBGRAPH_REDIS_URL, else KBGRAPH_TEST_REDIS_URL, else the default.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait
from werkzeug.security import generate_password_hash
from werkzeug.serving import make_server

sys.path.insert(0, str(Path(__file__).parent))
import graph_view_bench as synthetic  # noqa: E402

from kbgraph.config import load_settings  # noqa: E402
from kbgraph.meta import GraphConfig, MetaDB  # noqa: E402
from kbgraph.store.base import eq  # noqa: E402
from kbgraph.store.records import Entity  # noqa: E402
from kbgraph.store.sqlite import SQLiteStore  # noqa: E402

EMAIL, PASSWORD, TENANT = "bench@example.com", "bench password", "ubench"


REDIS_URL = os.environ.get("KBGRAPH_REDIS_URL") or os.environ.get("KBGRAPH_TEST_REDIS_URL") or "redis://127.0.0.1:6379/6"


def _bench_user(data_dir: Path) -> Any:
    """The bench's settings, with its user made in the metadata database."""
    settings = load_settings(data_dir=data_dir, store="sqlite", embedding_provider="hash", embedding_dim=64,
                             redis_url=REDIS_URL, redis_prefix="kbgraph_viewbench:")
    data_dir.mkdir(parents=True, exist_ok=True)
    with MetaDB.open(settings.meta_url) as meta:
        if meta.find_user_by_email(EMAIL) is None:
            meta.create_user(EMAIL, generate_password_hash(PASSWORD), TENANT)
    return settings


def prepare_sample(data_dir: Path) -> tuple[object, str]:
    """The sample corpus indexed with the nlp graph (PageRank, communities) under the bench user."""
    from kbgraph.data import SAMPLE_CORPUS_DIR
    from kbgraph.engine import Engine

    settings = _bench_user(data_dir)
    with Engine.open(settings, tenant=TENANT) as engine:
        if engine.meta.get_kb_by_name(TENANT, "sample") is None:
            engine.create_kb("sample", graph=GraphConfig(enabled=True, method="nlp", community=True))
            engine.index_paths("sample", [SAMPLE_CORPUS_DIR])
        kb_id = engine.kb("sample").id
    return settings, kb_id


def prepare(data_dir: Path, n_ent: int, n_rel: int) -> tuple[object, str]:
    settings = _bench_user(data_dir)
    with MetaDB.open(settings.meta_url) as meta:
        kb = meta.get_kb_by_name(TENANT, "big") or meta.create_kb(
            TENANT, "big", embedding_model="hash-64", graph=GraphConfig(enabled=True, community=True))
    store = SQLiteStore(settings.sqlite_store_path)
    store.ensure_index(TENANT)
    synthetic.TENANT, synthetic.KB = TENANT, kb.id
    if not store.count(TENANT, [kb.id], [eq("knowledge_graph_kwd", Entity.KIND)]):
        synthetic.build(store, n_ent, n_rel, 2000)
        synthetic.build_reports(store, 2000)
    store.close()
    return settings, kb.id


def browser() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800",
                "--use-angle=swiftshader", "--enable-unsafe-swiftshader"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--relations", type=int, default=300_000)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--sample", action="store_true", help="the bundled sample corpus instead of a synthetic graph")
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp()) / "data"
    settings, kb_id = prepare_sample(data_dir) if args.sample else prepare(data_dir, args.entities, args.relations)
    from web import create_app

    app = create_app(settings)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    b = browser()
    try:
        b.get(base + "/login")
        b.find_element(By.NAME, "email").send_keys(EMAIL)
        b.find_element(By.NAME, "password").send_keys(PASSWORD, Keys.ENTER)
        WebDriverWait(b, 10).until(lambda d: "/kbs" in d.current_url)
        times = []
        for _ in range(5):
            started = time.perf_counter()
            b.get(f"{base}/kbs/{kb_id}/graph")
            WebDriverWait(b, 60, poll_frequency=0.02).until(
                lambda d: d.find_element(By.ID, "graph-app").get_attribute("data-loaded") == "yes")
            times.append(time.perf_counter() - started)
            print("  page timing:", b.find_element(By.ID, "graph-app").get_attribute("data-timing"))
        status = b.find_element(By.ID, "graph-status").text
        print(f"graph view drawn: median {statistics.median(times):.2f} s, max {max(times):.2f} s "
              f"(first {times[0]:.2f} s) — {status}")
        started = time.perf_counter()
        box = b.find_element(By.ID, "entity-search")
        wanted = "Mira Castell" if args.sample else "Entity 4242"
        box.send_keys(wanted.lower())
        WebDriverWait(b, 30, poll_frequency=0.02).until(
            lambda d: any(wanted in li.text for li in d.find_elements(By.CSS_SELECTOR, "#suggestions li")))
        suggest = time.perf_counter() - started
        box.send_keys(Keys.ENTER)
        WebDriverWait(b, 30, poll_frequency=0.02).until(lambda d: d.find_elements(By.ID, "expand-node"))
        print(f"suggestion shown after typing: {suggest:.2f} s; entity found, expanded and its details shown: "
              f"{time.perf_counter() - started - suggest:.2f} s")
    finally:
        b.quit()
        server.shutdown()
        app.extensions["kbgraph"].close()


if __name__ == "__main__":
    main()
