"""Cues for Chinese names read from jieba's own dictionary and tagger model, and rules that cut
words its dictionary joins (used by chinese_tokens.mended):

- a word its dictionary tags as a person but whose characters its tagger's model reads nearly as
  well as an ordinary word's is none (练兵, 祝福, 史实: ``reads_as_ordinary``);
- a surname's clan word (李氏, 刘家) and a two-character name it only guessed that holds a linking
  word (的国, 法及, 和凯) are none;
- a football league's abbreviation (中超, 亚冠, 德甲) is an organization however jieba cut it;
- a place's government or companies (日本政府, 美国公司) are the place and a generic word, and a
  place and a part of it before 地区 (俄罗斯远东地区) the place and the words after it;
- a word the dictionary lists with a division's end as a place (宝鸡 of 宝鸡市) is a city's or
  county's name (``division_name``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from kbgraph.graph.extract.nlp.chinese_words import COMPOUND_SURNAMES, SURNAMES

Pair = tuple[str, str]
PERSON_TAGS = frozenset("nr nrfg nrt".split())
NAME_TAGS = frozenset("nr nrfg nrt ns nz nt".split())
CJK_WORD = re.compile(r"^[\u4e00-\u9fff]+$")
# what follows a surname to say "the family / clan / surname" ("李氏", "刘家", "姜姓"): no name
_CLAN_CHARS = frozenset("氏姓家")
# generic words after a place that name no organization of their own ("日本政府", "美国公司")
_GENERIC_ORGS = frozenset("政府 公司 企业 当局 人民 军队 军方".split())
# football leagues by their abbreviation: a country's or continent's character and the league's level
_LEAGUE = re.compile("中[超甲乙]|英[超冠甲]|[西德意法荷][甲乙]|[葡俄苏土]超|[亚欧]冠")
# what may follow a league's abbreviation inside one of jieba's words ("德甲球" + "会", "中超" + "联赛")
_LEAGUE_RESTS = frozenset({"", "球", "联赛", "联", "球队", "队", "赛", "赛季"})
_LIST_JOINERS = "和与及、"
# how much better (log probability) jieba's character model must read a dictionary word as a
# person's name than as an ordinary word for its person tag to stand (reads_as_ordinary)
_NAME_MARGIN = 2.0
# the ordinary words compared: nouns, verbs, adjectives, adverbs, times, places and directions
# (not idioms or status words: 万厚良 reads as an idiom, 白光 as a status word)
_ORDINARY_TAGS = tuple("n v vn vd a ad an d t s f b ng vg".split())
# what jieba tags a one-character given name it read as a word ("乐" of 于乐)
_GIVEN_NAME_TAGS = frozenset("n ng a ag nr".split())
# particles and words that link two names: no two-character name jieba guesses holds one
_LINKING = frozenset("的之及至与")


def region_in_place(pairs: list[Pair]) -> list[Pair]:
    """"俄罗斯远东地区" -> "俄罗斯" + "远东" + "地区": a place, a part of it and the word for a region,
    which jieba's dictionary lists as one word, are the place and the words after it. A region's
    own name before 地区 stays whole ("亚太地区", "上海地区")."""
    import jieba.posseg as posseg  # loaded by the caller's cut already
    out: list[Pair] = []
    for word, flag in pairs:
        if flag in NAME_TAGS and word.endswith("地区") and len(word) >= 5 and CJK_WORD.match(word):
            head = [(p.word, p.flag) for p in posseg.cut(word[:-2])]
            if len(head) >= 2 and head[0][1] == "ns":
                out += head + [("地区", "n")]
                continue
        out.append((word, flag))
    return out


def generic_after_place(pairs: list[Pair]) -> list[Pair]:
    """"日本政府" -> "日本" + "政府", "美国公司" -> "美国" + "公司": a place's government or companies
    are the place and a generic word (the place is the entity; a firm's name has a name of its own
    before 公司, "法国宇航公司")."""
    out: list[Pair] = []
    for word, flag in pairs:
        cut = 0
        if flag in NAME_TAGS and len(word) >= 4 and CJK_WORD.match(word):
            cut = next((c for c in (3, 2) if _generic_org(word[c:]) and dictionary_tag(word[:c]) == "ns"), 0)
        if cut:
            out += [(word[:cut], "ns"), (word[cut:], "n")]
            continue
        out.append((word, flag))
    return out


def _generic_org(rest: str) -> bool:
    return rest in _GENERIC_ORGS or (rest.endswith("政府") and len(rest) <= 4)  # "联邦政府", "特区政府"


def is_league(name: str) -> bool:
    """Whether ``name`` is a football league's abbreviation (中超, 德甲, 亚冠) and nothing more."""
    return _LEAGUE.fullmatch(name) is not None


def leagues(pairs: list[Pair]) -> list[Pair]:
    """A football league's abbreviation (中超, 英超, 德甲, 亚冠: a country's or continent's character and
    the league's level) is an organization, however jieba cut it ("中" + "超", "中超和亚" + "冠",
    "德甲球" + "会"): it must start a word of jieba's and end one, or be followed by the rest of a
    word for a ball, team or league ("球", "联赛"). Tagged "nlg" (a league: an organization that no
    other rule joins to a coined name after it, "德甲" + "多特蒙德")."""
    text = "".join(w for w, _ in pairs)
    starts, at = {}, 0
    for i, (w, _) in enumerate(pairs):
        starts[at] = i
        at += len(w)
    starts[at] = len(pairs)
    cuts: dict[int, int] = {}  # where a league's name begins -> where it ends, in characters
    for m in _LEAGUE.finditer(text):
        if m.start() not in starts and not (m.start() > 0 and text[m.start() - 1] in _LIST_JOINERS
                                            and m.start() - 1 in cuts.values()):
            continue  # inside a word ("其中" + "甲方"), unless a list of leagues goes on ("中超和亚冠")
        end_word = next(k for k in sorted(starts) if k >= m.end())
        rest = text[m.end():end_word]
        if rest in _LEAGUE_RESTS or rest[:2] in _LEAGUE_RESTS or rest[:1] in _LIST_JOINERS:
            cuts[m.start()] = m.end()
    if not cuts:
        return pairs
    out: list[Pair] = []
    at = 0
    for w, f in pairs:
        lo, hi = at, at + len(w)
        at = hi
        pieces = [(a, b) for a, b in cuts.items() if lo <= a < hi or lo < b <= hi]
        if not pieces:
            out.append((w, f))
            continue
        pos = lo
        for a, b in sorted(pieces):
            if a >= lo:
                if a > pos:
                    out.append((text[pos:a], "x"))
                out.append((text[a:b], "nlg"))
            pos = max(pos, min(b, hi))
        if pos < hi:
            rest = text[pos:hi]
            out.append((rest, f if rest == w else dictionary_tag(rest) or "x"))
    return out


@lru_cache(maxsize=1)
def _tagger_model() -> tuple[dict[Any, Any], dict[Any, dict[str, float]], tuple[str, ...]]:
    """jieba's part-of-speech tagger's own character model (log probabilities): transitions between
    (position, tag) states, each state's characters, and the tags of ordinary words compared."""
    from jieba.posseg.prob_emit import P as emit
    from jieba.posseg.prob_trans import P as trans
    return trans, emit, _ORDINARY_TAGS


def _character_score(word: str, tag: str) -> float:
    trans, emit, _ = _tagger_model()
    states = [("B", tag)] + [("M", tag)] * (len(word) - 2) + [("E", tag)]
    score = 0.0
    for i, (ch, state) in enumerate(zip(word, states)):
        score += emit.get(state, {}).get(ch, -1e9)
        if i:
            score += trans.get(states[i - 1], {}).get(state, -1e9)
    return score


@lru_cache(maxsize=65536)
def reads_as_ordinary(word: str) -> bool:
    """Whether a word jieba's dictionary tags as a person reads, by its characters, nearly as well
    as an ordinary word (麻醉, 练兵, 胡椒, 龙卷风): its tagger's character model scores the word as a
    person's name less than _NAME_MARGIN above its best ordinary tag. Read by hand on 226 dictionary
    words the nlp extractor listed as persons in unlabelled zh-wiki-cmrc and PUD text: a margin under
    2 held 48 of 110 ordinary words and 2 of 116 names (金陵, 成龙); under 3, 67 and 7."""
    _, _, ordinary = _tagger_model()
    name = max(_character_score(word, tag) for tag in PERSON_TAGS)
    return name - max(_character_score(word, tag) for tag in ordinary) < _NAME_MARGIN


# the ends of an administrative division's name jieba's dictionary lists with the place ("宝鸡市")
_DIVISION_ENDS = "市县区省州"


@lru_cache(maxsize=8192)
def division_name(word: str) -> bool:
    """Whether jieba's dictionary lists ``word`` with a division's end as a place (宝鸡 of 宝鸡市,
    多伦多 of 多伦多市, 九龙 of 九龙区), however it tags the word alone (宝鸡 n, 南通 nz, 多伦多
    nrt): a city's or county's name, never a firm's or a club's coined one (申花, 谢菲联, 建业)."""
    table = _tag_table()
    return len(word) >= 2 and any(table.get(word + end) == "ns" for end in _DIVISION_ENDS)


def dictionary_tag(word: str) -> str | None:
    """The tag jieba's dictionary gives ``word``, None for a word it does not list."""
    return _tag_table().get(word)


@lru_cache(maxsize=1)
def _tag_table() -> dict[str, str]:
    import jieba.posseg as posseg  # loaded by the caller's cut already
    return posseg.dt.word_tag_tab


def clan(word: str) -> bool:
    """"李氏", "刘家", "姜姓", "赫连氏", "李氏家族": a surname and the word for its family or clan."""
    if word[0] in SURNAMES and (len(word) == 2 and word[1] in _CLAN_CHARS or word[1:2] == "氏"):
        return True  # not "国家广电总局": only 氏 begins a longer word so
    return len(word) == 3 and word[:2] in COMPOUND_SURNAMES and word[2] in _CLAN_CHARS


def linked_guess(word: str, flag: str, freq: Callable[[str], int]) -> bool:
    """A two-character name jieba only guessed (its dictionary does not list it) holding a particle
    or a word that links two names ("的国", "琉的", "河至", "法及", "许之"), or a person's starting
    with 和 ("和凯", "和欣": "and" before a given name): pieces of a sentence, not a name."""
    if len(word) != 2 or freq(word) or not CJK_WORD.match(word):
        return False
    return any(ch in _LINKING for ch in word) or (flag in PERSON_TAGS and word[0] == "和")


# jieba's dictionary lists thousands of phrases at its lowest frequencies (3 and under) with a name's
# tag, most of them ordinary (军事院校 nt, 宣布独立 nr, 日益壮大 ns, 商务会议 nt): read by hand, 138
# of 150 sampled that split into two common words (each at least _COMMON_PART) were no names; the
# rest ended in a newspaper's, publisher's or group's word (东方日报, 民族出版社, 浪潮集团)
_LOWEST_ENTRY = 3
_COMMON_PART = 100
_OWN_NAME_ENDS = ("报", "社", "局", "台", "集团", "新闻", "委员会", "公司", "银行", "大学", "交大", "会", "汽车", "航空", "战争", "中学")


def ordinary_compound(word: str, freq: Callable[[str], int]) -> bool:
    """A phrase jieba's dictionary tags as a name only at its lowest frequencies that is two common
    words neither of which is a name (军事 + 院校, 宣布 + 独立, 日益 + 壮大): no name."""
    if len(word) < 4 or not 0 < freq(word) <= _LOWEST_ENTRY or word.endswith(_OWN_NAME_ENDS) \
            or not CJK_WORD.match(word):
        return False
    table = _tag_table()
    for cut in range(2, len(word) - 1):
        head, tail = word[:cut], word[cut:]
        if freq(head) >= _COMMON_PART and freq(tail) >= _COMMON_PART and table.get(head) not in NAME_TAGS \
                and table.get(tail) not in NAME_TAGS:
            return True
    return False


def initial_surname(pairs: list[Pair]) -> list[Pair]:
    """"于" + "乐" + "出身": a sentence that begins with 于, one character and a verb begins with a
    person (于 as "at" begins a sentence only before a time or a place of its own: "于" + "北京")."""
    if len(pairs) >= 3 and pairs[0] == ("于", "p") and len(pairs[1][0]) == 1 and CJK_WORD.match(pairs[1][0]) \
            and pairs[1][1] in _GIVEN_NAME_TAGS and pairs[2][1].startswith("v"):
        return [(pairs[0][0] + pairs[1][0], "nr")] + pairs[2:]
    return pairs
