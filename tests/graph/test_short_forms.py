"""Short forms and spelling variants of names that are not people (kbgraph/graph/derive/short_forms.py):
linked to the one full name of the knowledge base they stand for, never when two fit, never for a
person or a place; and linked by the refresh, so that passages naming a club by its sponsor (国安)
and by its full name (北京国安) reach the same entity. Real parts: the SQLite store (Elasticsearch
when KBGRAPH_ES_URL is set), the chunker, the nlp extractor, the hash embedder.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kbgraph.config import load_settings
from kbgraph.graph.derive.aliases import kb_name_links
from kbgraph.graph.derive.short_forms import short_form_links
from kbgraph.graph.invariants import check_graph, stored_graph
from kbgraph.index.chunks import parse_document
from kbgraph.index.context import KBContext
from kbgraph.index.corrections import record_key_correction
from kbgraph.index.extraction import extract_document
from kbgraph.index.merge import merge_document
from kbgraph.index.refresh import refresh_kb
from kbgraph.llm.embedders import HashEmbedder
from kbgraph.meta.schemas import GraphConfig
from kbgraph.parse.readers import ParsedDocument
from kbgraph.store import DocStore, open_store
from conftest import store_overrides

ORG, GEO, PERSON = "organization", "geo", "person"


def _links(named: dict[str, tuple[str, int]]) -> dict[str, str]:
    return short_form_links({k: n for k, (_, n) in named.items()}, {k: t for k, (t, _) in named.items()},
                            PERSON, GEO)


def test_a_spelling_variant_goes_to_the_form_the_knowledge_base_uses_most() -> None:
    assert _links({"st. louis": (GEO, 5), "st louis": (GEO, 1), "kim jong-un": (ORG, 1), "kim jong un": (ORG, 4),
                   "o'ahu": (ORG, 1), "oahu": (ORG, 2)}) == {"st louis": "st. louis", "kim jong-un": "kim jong un",
                                                           "o'ahu": "oahu"}
    # two forms as frequent: neither is the knowledge base's own; spaces are words apart
    assert _links({"kim jong-un": (ORG, 3), "kim jong un": (ORG, 3), "christ church": (ORG, 2),
                   "christchurch": (ORG, 5)}) == {}


def test_plurals_articles_and_legal_forms() -> None:
    assert _links({"hp designjets": (ORG, 1), "hp designjet": (ORG, 3), "beatles": (ORG, 1),
                   "the beatles": (ORG, 2), "aes": (ORG, 3), "aes corporation": (ORG, 1)}) == {
        "hp designjets": "hp designjet", "beatles": "the beatles", "aes": "aes corporation"}
    # a single word's plural names a people, not its adjective's entity; an ordinary word is no
    # company's own name; two companies a name could stand for: none
    assert _links({"normans": (ORG, 3), "norman": (ORG, 2), "future": (ORG, 2), "future plc": (ORG, 1),
                   "tino": (ORG, 3), "tino corp": (ORG, 1), "tino group": (ORG, 1)}) == {}


def test_chinese_short_forms_of_clubs_leagues_and_companies() -> None:
    named = {"中超": (ORG, 4), "中超联赛": (ORG, 2), "北京国安": (ORG, 5), "北京": (GEO, 9), "国安队": (ORG, 1),
             "北京队": (ORG, 1), "河南": (GEO, 3), "河南建业": (ORG, 4), "中国": (GEO, 5), "中国国奥队": (ORG, 1),
             "国奥队": (ORG, 2), "清华": (ORG, 2), "清华大学": (ORG, 1), "丰田": (ORG, 2), "丰田汽车有限公司": (ORG, 1)}
    assert _links(named) == {"中超": "中超联赛", "国安队": "北京国安", "国奥队": "中国国奥队", "清华": "清华大学",
                             "丰田": "丰田汽车有限公司"}
    # a longer name that adds more than the word for its kind is another thing (a school of the
    # university; a war of one country), a place is never a short form (河南 of 河南建业), nor is a
    # place's team linked to one of its clubs (a city has had several); two satellites of a series
    # leave the series name alone
    assert _links({"四川大学": (ORG, 2), "四川大学华西临床医学院": (ORG, 1), "独立战争": (ORG, 3), "土耳其": (GEO, 2),
                   "土耳其独立战争": (ORG, 1), "鑫诺": (ORG, 2), "鑫诺一号通信卫星": (ORG, 1),
                   "鑫诺二号通信卫星": (ORG, 1)}) == {}
    # a league's abbreviation takes only the word for a league: 德甲俱乐部 is any club playing in it
    assert _links({"德甲": (ORG, 3), "德甲俱乐部": (ORG, 1), "英超": (ORG, 2), "英超联赛": (ORG, 1)}) == {"英超": "英超联赛"}


def test_people_keep_their_own_rule() -> None:
    typed = {"jennifer moore": {PERSON: 2}, "jennifer": {PERSON: 3}, "国安队": {ORG: 1}, "北京国安": {GEO: 2},
             "北京": {GEO: 4}, "王": {PERSON: 2}, "王府井": {GEO: 1}}
    assert kb_name_links(typed, PERSON, GEO) == {"jennifer": "jennifer moore", "国安队": "北京国安"}
    assert _links({"jennifer": (PERSON, 3), "jennifer inc": (ORG, 1)}) == {}
    # a name read as a place or a person in a third of its mentions is one: no short form
    assert kb_name_links({"boston": {ORG: 2, GEO: 1}, "boston corporation": {ORG: 1},
                          "patti smith": {ORG: 2, PERSON: 1}, "patti smith group": {ORG: 1},
                          "microsoft": {ORG: 5, GEO: 1}, "microsoft corporation": {ORG: 2}}, PERSON, GEO) == {
        "microsoft": "microsoft corporation"}


DOCS = {
    "full": "北京国安是一家职业足球俱乐部，主场设在北京工人体育场。北京国安曾多次获得中超联赛冠军。\n",
    "short": "上赛季国安队在主场击败了对手，国安队的球迷非常高兴。国安队将在下周前往上海比赛。\n",
}


def _context(store: DocStore, tenant: str, tmp: Path) -> KBContext:
    settings = load_settings(data_dir=tmp, embedding_provider="hash", embedding_dim=32)
    return KBContext(store=store, tenant=tenant, kb_id="kb", settings=settings, embedder=HashEmbedder(dim=32),
                     graph=GraphConfig(enabled=True, method="nlp", community=True), chunk_tokens=200,
                     chunk_overlap=0)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DocStore:
    return open_store(load_settings(data_dir=tmp_path_factory.mktemp("short"), **store_overrides()))


def test_the_refresh_gives_a_clubs_short_form_to_its_full_name(store: DocStore, tmp_path: Path) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    store.ensure_index(tenant)
    ctx = _context(store, tenant, tmp_path)
    for name, text in DOCS.items():
        parse_document(ctx, name, ParsedDocument(name=name, text=text, pages=[], mime="text/plain"))
        extract_document(ctx, name)
        merge_document(ctx, name)
    before = stored_graph(store, tenant, "kb").entities
    assert "国安队" in before and "北京国安" in before, sorted(before)
    refresh_kb(ctx)
    entities = stored_graph(store, tenant, "kb").entities
    assert "国安队" not in entities
    assert set(entities["北京国安"].doc_ids) == {"full", "short"}
    assert "国安队" in entities["北京国安"].aliases
    assert "北京" in entities  # the place stays itself
    assert check_graph(store, tenant, "kb", ctx.describer()) == []

    # a link the user finds wrong is split off by its name, and stays apart through refreshes
    record_key_correction(ctx, "split", {"key": "北京国安", "names": ["国安队"]}, "tester")
    refresh_kb(ctx)
    entities = stored_graph(store, tenant, "kb").entities
    assert "short" in entities["国安队"].doc_ids and "国安队" not in entities["北京国安"].aliases
    assert check_graph(store, tenant, "kb", ctx.describer()) == []
    store.drop_index(tenant)
