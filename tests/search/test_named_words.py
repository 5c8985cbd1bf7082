"""A word of the question written in lower case that is an entity's whole name names that entity.

Chat logs and mailing lists write nicks and programs in lower case ("What did karname ask about?",
"who suggested xcin?"); the nlp analysis reads capitalized names only, so such a question anchored on
nothing and its graph part searched by words alone (bench/README.md, chat-ubuntu)."""

from __future__ import annotations

from pathlib import Path

from kbgraph.search.kg.params import KGParams
from kbgraph.search.kg.seeds import named_words, seed_entities
from kbgraph.search.query_analysis import nlp_analysis

from . import EMBEDDER, KB, TENANT, toy_kb


def test_lower_case_words_that_are_no_ordinary_words() -> None:
    words = named_words("Which player did karname's friend tomd123 recommend, Fryguy-- or xcin? See 127.0.0.1")
    # capitalized names are the analysis's; ordinary words and numbers name nothing
    assert words == ["karname", "tomd123", "xcin"]


def test_a_lower_case_name_of_the_knowledge_base_anchors_the_question(tmp_path: Path) -> None:
    store = toy_kb(tmp_path)
    question = "which guild was founded in varrow?"
    analysis = nlp_analysis(question)
    assert "Varrow" not in analysis.entities  # the analysis cannot see it
    vector = EMBEDDER.embed_query([question])[0]
    seeds = seed_entities(store, TENANT, [KB], analysis, vector, KGParams(), EMBEDDER)
    assert (KB, "varrow") in seeds.anchored
    assert seeds.scores[(KB, "varrow")] == KGParams().exact_score
    # a word that names no entity of the knowledge base anchors nothing
    other = nlp_analysis("which guild was founded in zorblax?")
    assert not seed_entities(store, TENANT, [KB], other, EMBEDDER.embed_query([other.question])[0], KGParams(),
                             EMBEDDER).anchored
