"""Gleaning only where the first pass left names out (glean_policy "missed"), against the scripted
OpenAI-compatible server and the real client stack; the decision is counted in the run's ledger."""

from __future__ import annotations

import pytest
from support.scripted_llm import ScriptedLLM

from kbgraph.config import ConfigError, Settings, load_settings
from kbgraph.graph.extract.factory import build_extractor
from kbgraph.graph.extract.glean import GleanGate, missed_names
from kbgraph.graph.keys import normalize_key
from kbgraph.llm import ChatModel, UsageLedger, build_chat

TYPES = ["organization", "person", "geo", "event", "category"]
TEXT = ("Ebenezer Scrooge ran a counting-house in London with his late partner Jacob Marley. "
        "His clerk, Bob Cratchit, earned fifteen shillings a week and lived in Camden Town.")
# lists three of the five names; Bob Cratchit and Camden Town are left out
PARTIAL = ('("entity"<|>EBENEZER SCROOGE<|>person<|>A miser.)##\n'
           '("entity"<|>Jacob Marley<|>person<|>Scrooge\'s late partner.)##\n'
           '("relationship"<|>Ebenezer Scrooge<|>London<|>His counting-house is in London.<|>6)\n<|COMPLETE|>')
MORE = ('("entity"<|>Bob Cratchit<|>person<|>Scrooge\'s clerk.)##\n'
        '("entity"<|>Camden Town<|>geo<|>Where Bob lives.)\n<|COMPLETE|>')
# every name, some by a shorter or longer form than the text's ("Scrooge", "Cratchit")
COMPLETE = ('("entity"<|>Scrooge<|>person<|>A miser.)##\n'
            '("entity"<|>London<|>geo<|>A city.)##\n'
            '("entity"<|>Jacob Marley<|>person<|>His late partner.)##\n'
            '("entity"<|>Cratchit<|>person<|>His clerk.)##\n'
            '("relationship"<|>Cratchit<|>Camden Town<|>Lives there.<|>3)\n<|COMPLETE|>')

ZH_TEXT = "张伟在北京大学读书。他的朋友李娜住在上海，在华为公司工作。"
ZH_PARTIAL = ('("entity"<|>张伟<|>person<|>北京大学的学生。)##\n'
              '("entity"<|>北京大学<|>organization<|>一所大学。)\n<|COMPLETE|>')
ZH_MORE = ('("entity"<|>李娜<|>person<|>张伟的朋友。)##\n'
           '("entity"<|>上海<|>geo<|>李娜住的城市。)\n<|COMPLETE|>')
ZH_COMPLETE = ('("entity"<|>张伟<|>person<|>学生。)##\n("entity"<|>北京大学<|>organization<|>大学。)##\n'
               '("entity"<|>李娜<|>person<|>朋友。)##\n("entity"<|>上海<|>geo<|>城市。)##\n'
               '("entity"<|>华为<|>organization<|>公司。)\n<|COMPLETE|>')


def extractor(llm: ScriptedLLM, settings: Settings, ledger: UsageLedger, policy: str = "missed",
              language: str = "English"):  # type: ignore[no-untyped-def]
    chat: ChatModel | None = build_chat(llm.settings(settings), ledger, False, backoff_base=0.01, backoff_max=0.05)
    return build_extractor("general", chat, TYPES, language=language, max_gleanings=1, glean_policy=policy,
                           glean_missed_names=2, ledger=ledger)


def keys(result) -> set[str]:  # type: ignore[no-untyped-def]
    return {normalize_key(e.name) for e in result.entities}


def test_a_first_pass_that_missed_names_is_gleaned(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    ledger = UsageLedger()
    scripted_llm.push(PARTIAL, MORE)
    out = extractor(scripted_llm, settings, ledger).extract(TEXT)
    assert out.llm_calls == 2 and scripted_llm.counts["chat"] == 2
    assert {"bob cratchit", "camden town"} <= keys(out)
    assert ledger.decisions == {"glean: missed names": 1}
    assert ledger.by_phase["glean"].calls == 1


def test_a_first_pass_that_covers_the_names_is_not_gleaned(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    ledger = UsageLedger()
    scripted_llm.push(COMPLETE)
    out = extractor(scripted_llm, settings, ledger).extract(TEXT)
    assert out.llm_calls == 1 and scripted_llm.counts["chat"] == 1
    assert ledger.decisions == {"glean: names covered": 1}
    assert "glean" not in ledger.by_phase


def test_always_gleans_even_a_complete_first_pass(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    ledger = UsageLedger()
    scripted_llm.push(COMPLETE, "<|COMPLETE|>")
    out = extractor(scripted_llm, settings, ledger, policy="always").extract(TEXT)
    assert out.llm_calls == 2 and scripted_llm.counts["chat"] == 2
    assert ledger.decisions == {"glean: always": 1}


def test_chinese_names_decide_too(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    ledger = UsageLedger()
    scripted_llm.push(ZH_PARTIAL, ZH_MORE)
    out = extractor(scripted_llm, settings, ledger, language="Chinese").extract(ZH_TEXT)
    assert out.llm_calls == 2 and {"李娜", "上海"} <= keys(out)
    scripted_llm.push(ZH_COMPLETE)
    out = extractor(scripted_llm, settings, ledger, language="Chinese").extract(ZH_TEXT)
    assert out.llm_calls == 1  # "华为" covers the detector's "华为公司"
    assert ledger.decisions == {"glean: missed names": 1, "glean: names covered": 1}


def test_one_missed_name_is_tolerated_and_short_chunks_are_never_gleaned() -> None:
    gate = GleanGate("missed", min_tokens=10, missed_names_min=2)
    listed = ["Ebenezer Scrooge", "London", "Jacob Marley", "Bob Cratchit"]
    decision = gate.decide(TEXT, 40, listed)
    assert not decision.glean and decision.missed == ("Camden Town",)
    assert gate.decide(TEXT, 40, listed[:2]).glean
    assert gate.decide(TEXT, 9, []).reason == "short"


def test_names_are_compared_as_the_detector_reads_them() -> None:
    # the model's "Scrooge3" is the detector's "Scrooge" (letters only); a shorter or longer form
    # covers the name; an unrelated name does not
    assert missed_names(["Scrooge", "Mrs. Cratchit", "Bob", "Belle"], ["Scrooge3", "Cratchit", "Bob Cratchit"]) \
        == ["Belle"]
    assert missed_names(["华为公司", "上海"], ["华为"]) == ["上海"]


def test_the_policy_is_a_checked_setting(settings: Settings) -> None:
    assert Settings().glean_policy == "missed"
    with pytest.raises(ConfigError, match="glean_policy"):
        load_settings(data_dir=settings.data_dir, glean_policy="sometimes")
    with pytest.raises(ConfigError, match="glean_missed_names"):
        load_settings(data_dir=settings.data_dir, glean_missed_names=0)
