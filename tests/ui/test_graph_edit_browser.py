"""The graph view's edit panel in headless Chromium (real Celery worker, Flask over HTTP): a new user
uploads part of the sample corpus, then in the graph view merges "Corran" into "Isle of Corran" (offered
as a similar name), renames an entity and sets its type, is asked before a rename onto an existing
name, deletes an entity, adds a relation, sees the corrections listed, and undoes the last one; a
curated GraphML imported in the graph view of a fresh knowledge base is retrieved in kg mode and cited
as curated, and undoing the import removes it."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from kbgraph.data import SAMPLE_CORPUS_DIR
from ui.test_pages_browser import doc_rows, page_errors, shot, sign_up, wait

pytestmark = pytest.mark.services

FILES = ["salt_war.md", "mira_castell.md", "glass_tower.md", "kestrel_observatory.html",
         "brightwater_trading_company.md"]


def _status(browser: WebDriver) -> str:
    # read whether or not its box is open
    return browser.execute_script("return document.getElementById('edit-status').textContent")


def _corrections(browser: WebDriver) -> list[str]:
    return browser.execute_script("return [...document.querySelectorAll('#corrections li')].map(li => li.textContent)")


def _open(browser: WebDriver, name: str) -> None:
    """Find an entity by name and wait for its edit panel."""
    box = browser.find_element(By.ID, "entity-search")
    box.clear()
    box.send_keys(name)

    def pick(b: WebDriver) -> bool:
        # the list is drawn twice (names already shown, then the server's): click what is there now
        found = [li for li in b.find_elements(By.CSS_SELECTOR, "#suggestions li") if li.text.startswith(name)]
        if found:
            found[0].click()
        return bool(found)

    def panel_open(b: WebDriver) -> bool:
        shown = b.find_elements(By.CSS_SELECTOR, "#node-panel h2")
        return bool(shown and shown[0].text == name and b.find_elements(By.ID, "edit-panel"))

    wait(browser, pick, what=f"{name} suggested and picked")
    # a click that lands as the list is drawn again is lost, as a user's would be: who then sees the
    # suggestion still there clicks it again (CI once timed out here, no entity asked after the click)
    wait(browser, lambda b: panel_open(b) or (pick(b) and False), what=f"{name}'s edit panel")


def _shown_names(browser: WebDriver) -> set[str]:
    return set(browser.execute_script("""
        return fetch(document.getElementById('export-json').href, {credentials: 'same-origin'})
          .then(r => r.json()).then(g => g.nodes.map(n => n.name))""") or [])


def test_a_user_corrects_the_graph_in_the_browser(browser: WebDriver, base_url: str, artifacts: Path) -> None:
    sign_up(browser, base_url, "editor@example.com")
    form = browser.find_element(By.CSS_SELECTOR, "form[action='/kbs']")
    form.find_element(By.NAME, "name").send_keys("Edited")
    form.find_element(By.NAME, "graph").click()
    Select(form.find_element(By.NAME, "method")).select_by_value("nlp")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, EC.presence_of_element_located((By.ID, "documents")), what="the documents page")
    kb_url = browser.current_url
    browser.find_element(By.ID, "file-input").send_keys("\n".join(str(SAMPLE_CORPUS_DIR / f) for f in FILES))
    wait(browser, lambda b: len(doc_rows(b)) == len(FILES) and all(r["status"] == "done" for r in doc_rows(b)),
         timeout=120, what="the documents parsed")

    browser.get(kb_url + "/graph")
    wait(browser, lambda b: b.find_element(By.ID, "graph-app").get_attribute("data-loaded") == "yes",
         what="the graph drawn")
    browser.find_element(By.CSS_SELECTOR, "#corrections-box summary").click()

    # merge: the similar names are offered beside the selected entity
    _open(browser, "Isle of Corran")
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#merge-candidates input"), what="merge candidates")
    corran = browser.find_element(By.CSS_SELECTOR, "#merge-candidates input[value='corran']")
    corran.click()
    browser.find_element(By.ID, "merge-picked").click()
    wait(browser, lambda b: "merge" in _status(b), what="the merge made")
    wait(browser, lambda b: "Corran" in b.find_element(By.ID, "node-panel").text, what="Corran an alias")
    assert browser.find_element(By.CSS_SELECTOR, "#node-panel h2").text == "Isle of Corran"  # its name kept
    assert "Corran" not in _shown_names(browser)
    shot(browser, artifacts, "20-graph-merged")

    # a rename onto an existing name asks first; declined, nothing changes
    _open(browser, "Glass Tower")
    name = browser.find_element(By.ID, "edit-name")
    name.clear()
    name.send_keys("Isle of Corran")
    browser.find_element(By.ID, "save-entity").click()
    alert = WebDriverWait(browser, 10).until(EC.alert_is_present(), "the question before a merge")
    assert "exists already" in alert.text
    alert.dismiss()
    wait(browser, lambda b: "exists already" in _status(b), what="the refusal shown")

    # rename and retype
    name = browser.find_element(By.ID, "edit-name")
    name.clear()
    name.send_keys("Glass Tower of Varrow")
    kind = browser.find_element(By.ID, "edit-type")
    kind.clear()
    kind.send_keys("building")
    browser.find_element(By.ID, "save-entity").click()
    wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, "#node-panel h2").text == "Glass Tower of Varrow"
         and "building" in b.find_element(By.CSS_SELECTOR, "#node-panel .meta").text, what="renamed and retyped")

    # add a relation from it
    browser.find_element(By.CSS_SELECTOR, "#edit-panel details:nth-of-type(2) summary").click()
    browser.find_element(By.ID, "relation-target").send_keys("Isle of Corran")
    browser.find_element(By.ID, "relation-description").send_keys("the tower's lamp is seen from the isle")
    browser.find_element(By.ID, "add-relation").click()
    wait(browser, lambda b: "add relation" in _status(b), what="the relation added")

    # delete an entity (confirmed)
    _open(browser, "Caldmere")
    browser.find_element(By.ID, "delete-entity").click()
    WebDriverWait(browser, 10).until(EC.alert_is_present(), "the question before deleting").accept()
    wait(browser, lambda b: "delete entity" in _status(b), what="the entity deleted")
    assert "Caldmere" not in _shown_names(browser)

    listed = _corrections(browser)
    assert len(listed) == 5 and "delete entity" in listed[0] and "merge" in listed[-1], listed
    assert "editor@example.com" in listed[0]

    browser.find_element(By.ID, "undo-correction").click()
    wait(browser, lambda b: "Undone" in _status(b) and "undone" in _corrections(b)[0], what="the undo")
    assert "Caldmere" in _shown_names(browser)
    shot(browser, artifacts, "21-graph-corrections")

    # split the merged name out again: "Corran" is an entity of its own once more
    _open(browser, "Isle of Corran")
    browser.find_element(By.CSS_SELECTOR, "#split-form summary").click()
    browser.find_element(By.CSS_SELECTOR, "#split-names input[value='Corran']").click()
    browser.find_element(By.ID, "split-by-name").click()
    wait(browser, lambda b: "split" in _status(b), what="the name split out")
    wait(browser, lambda b: "Corran" in _shown_names(b), what="Corran drawn again")

    # delete the relation added above, from the tower's list of relations
    _open(browser, "Glass Tower of Varrow")
    browser.execute_script("document.querySelector('#entity-relations').closest('details').open = true")
    wait(browser, lambda b: any(li.text.startswith("Isle of Corran")
                                for li in b.find_elements(By.CSS_SELECTOR, "#entity-relations li")),
         what="the tower's relations listed")
    row = next(li for li in browser.find_elements(By.CSS_SELECTOR, "#entity-relations li")
               if li.text.startswith("Isle of Corran"))
    row.find_element(By.CSS_SELECTOR, "button.delete-relation").click()
    WebDriverWait(browser, 10).until(EC.alert_is_present(), "the question before deleting").accept()
    wait(browser, lambda b: "delete relation" in _status(b), what="the relation deleted")
    wait(browser, lambda b: not any(li.text.startswith("Isle of Corran")
                                    for li in b.find_elements(By.CSS_SELECTOR, "#entity-relations li")),
         what="the relation gone from the list")
    assert "split" in _corrections(browser)[1] and "delete relation" in _corrections(browser)[0]
    errors = [e for e in page_errors(browser) if "409 (CONFLICT)" not in e]  # the declined rename's answer
    assert not errors, errors


def test_a_curated_graphml_imported_in_the_graph_view_is_retrieved_and_cited(browser: WebDriver, base_url: str,
                                                                             artifacts: Path, tmp_path: Path) -> None:
    graph = nx.Graph()
    graph.add_node("lighthouse", name="Saltmere Lighthouse", type="building",
                   description="The Saltmere Lighthouse guides ships past the Teeth reef at night.")
    graph.add_node("keeper", name="Orla Finch", type="person", description="Orla Finch keeps the Saltmere Lighthouse.")
    graph.add_edge("lighthouse", "keeper", description="Orla Finch keeps the lighthouse", weight=2.0)
    path = tmp_path / "lights.graphml"
    nx.write_graphml(graph, path)

    browser.get(base_url + "/kbs")  # signed in by the first test
    form = browser.find_element(By.CSS_SELECTOR, "form[action='/kbs']")
    form.find_element(By.NAME, "name").send_keys("Atlas")
    form.find_element(By.NAME, "graph").click()
    Select(form.find_element(By.NAME, "method")).select_by_value("nlp")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, EC.presence_of_element_located((By.ID, "documents")), what="the documents page")
    kb_url = browser.current_url

    browser.get(kb_url + "/graph")
    wait(browser, lambda b: b.find_element(By.ID, "graph-app").get_attribute("data-loaded") == "yes",
         what="the empty graph drawn")
    browser.find_element(By.CSS_SELECTOR, "#import-box summary").click()
    browser.find_element(By.ID, "import-file").send_keys(str(path))
    browser.find_element(By.ID, "import-source").send_keys("lighthouse atlas")
    browser.find_element(By.ID, "import-button").click()
    wait(browser, lambda b: "import 'lighthouse atlas'" in _status(b), what="the import made")
    wait(browser, lambda b: "Showing 2 of 2 entities" in b.find_element(By.ID, "graph-status").text,
         what="the imported graph drawn")
    shot(browser, artifacts, "22-graph-imported")

    browser.get(kb_url + "/retrieval")
    browser.find_element(By.NAME, "question").send_keys("What guides ships past the Teeth reef?")
    Select(browser.find_element(By.NAME, "mode")).select_by_value("kg")
    browser.find_element(By.CSS_SELECTOR, "#retrieval-form button[type=submit]").click()
    wait(browser, EC.presence_of_element_located((By.CSS_SELECTOR, ".chunk-hit")), what="retrieval results")
    first = browser.find_element(By.CSS_SELECTOR, ".chunk-hit").text
    assert "curated: lighthouse atlas" in first and "Lighthouse" in first, first
    shot(browser, artifacts, "23-retrieval-curated")

    # the import undone from the list of corrections: the source goes as a whole
    browser.get(kb_url + "/graph")
    wait(browser, lambda b: b.find_element(By.ID, "graph-app").get_attribute("data-loaded") == "yes",
         what="the graph drawn")
    browser.find_element(By.CSS_SELECTOR, "#corrections-box summary").click()
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#corrections li[data-id='1'] .undo-one"),
         what="the import listed")
    browser.find_element(By.CSS_SELECTOR, "#corrections li[data-id='1'] .undo-one").click()
    wait(browser, lambda b: "Undone" in _status(b), what="the import undone")
    wait(browser, lambda b: "empty" in b.find_element(By.ID, "graph-status").text, what="the graph empty again")
