"""Entity types of the no-LLM extractor in the cases the demo showed wrong ("Mira Castell (geo)")."""

from __future__ import annotations

from kbgraph.graph.extract.nlp.extractor import NLPExtractor


def types(text: str) -> dict[str, str]:
    return {e.name: e.type for e in NLPExtractor().extract(text).entities}


def test_a_preposition_before_a_year_does_not_make_the_next_name_a_place() -> None:
    found = types("In 790 Mira Castell founded the Lumen Cartographers Guild in Varrow.")
    assert found["Mira Castell"] != "geo" and found["Varrow"] == "geo"


def test_who_is_born_or_dies_is_a_person() -> None:
    found = types("Mira Castell was a mapmaker of the Saltmere Sea. In 790 Mira Castell founded a guild. "
                  "Mira Castell died in 823 in Varrow.")
    assert found["Mira Castell"] == "person"
    assert types("Odile Marchetti was born in a glassblower's house.")["Odile Marchetti"] == "person"
