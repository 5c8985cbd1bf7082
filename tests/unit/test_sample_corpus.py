"""The bundled sample corpus: every document parses, and the question set is consistent with it."""

from __future__ import annotations

import json
import re

import pytest

from kbgraph.data import SAMPLE_CORPUS_DIR, SAMPLE_CORPUS_README, SAMPLE_QUESTIONS
from kbgraph.parse import chunk_text, iter_paths, read_document, tokenize

QUESTIONS = json.loads(SAMPLE_QUESTIONS.read_text(encoding="utf-8"))
PATHS = iter_paths([SAMPLE_CORPUS_DIR])
CJK = re.compile(r"[\u4e00-\u9fff]")

# For each two-hop question: the entity it starts from, which the second document must not name,
# so that the second document can only be reached through the bridge entity.
FIRST_ENTITY = {
    ("mira_castell.md", "lumen_cartographers_guild.md"): "Mira Castell",
    ("lumen_cartographers_guild.md", "glass_tower.md"): "Lumen Cartographers Guild",
    ("glass_tower.md", "tobias_wren.txt"): "Glass Tower",
    ("great_flood_of_varrow.md", "order_of_the_tidewardens.md"): "Great Flood",
    ("brightwater_trading_company.md", "kestrel_observatory.html"): "Brightwater",
    ("salt_war.md", "varrow_records.json"): "Salt War",
    ("tobias_wren.txt", "ashgrove_academy.txt"): "Tobias Wren",
    ("zh_nanyu_chamber.txt", "zh_qinglan_academy.txt"): "南屿商会",
    ("zh_shen_ruoxi.txt", "kestrel_observatory.html"): "沈若溪",
}


def test_corpus_has_only_documents_of_several_formats() -> None:
    names = [path.name for path in PATHS]
    assert len(names) == len(list(SAMPLE_CORPUS_DIR.iterdir()))
    suffixes = {path.suffix for path in PATHS}
    assert {".md", ".txt", ".html", ".json"} <= suffixes
    assert SAMPLE_CORPUS_README.is_file()


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_every_document_parses_and_chunks(path) -> None:
    doc = read_document(path)
    assert doc.name == path.name
    if path.name.startswith("zh_"):
        assert len(CJK.findall(doc.text)) >= 250
    else:
        assert 150 <= len(doc.text.split()) <= 400
    spans = chunk_text(doc.text, chunk_tokens=256, overlap=32)
    assert spans and all(span.token_count <= 256 for span in spans)
    assert tokenize(doc.text)


def test_language_mix() -> None:
    chinese = [p for p in PATHS if CJK.search(p.read_text(encoding="utf-8"))]
    assert len(chinese) == 3
    assert len(PATHS) - len(chinese) >= 10
    assert any("Varrow" in p.read_text(encoding="utf-8") for p in chinese)


def test_questions_are_well_formed() -> None:
    names = {path.name for path in PATHS}
    for entry in QUESTIONS:
        assert set(entry) == {"question", "answer", "supporting_docs", "hops"}
        assert entry["question"].strip() and entry["answer"].strip()
        assert set(entry["supporting_docs"]) <= names, entry["supporting_docs"]
        assert entry["hops"] == len(entry["supporting_docs"]) in (1, 2)
    assert sum(entry["hops"] == 2 for entry in QUESTIONS) >= 4
    assert sum(entry["hops"] == 1 for entry in QUESTIONS) >= 2


def test_second_hop_documents_do_not_name_the_first_entity() -> None:
    two_hop = [entry for entry in QUESTIONS if entry["hops"] == 2]
    for entry in two_hop:
        first, second = entry["supporting_docs"]
        entity = FIRST_ENTITY[(first, second)]
        assert entity in entry["question"] and entity in (SAMPLE_CORPUS_DIR / first).read_text(encoding="utf-8")
        assert entity not in (SAMPLE_CORPUS_DIR / second).read_text(encoding="utf-8"), (second, entity)
    assert len(two_hop) >= 4


def test_answers_appear_in_a_supporting_document() -> None:
    for entry in QUESTIONS:
        core = re.sub(r"^(The|A|Professor) ", "", entry["answer"].split(" (")[0])
        texts = [read_document(SAMPLE_CORPUS_DIR / name).text for name in entry["supporting_docs"]]
        assert any(core in text for text in texts), (entry["question"], core)
