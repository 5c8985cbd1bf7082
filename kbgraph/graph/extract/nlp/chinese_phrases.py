"""Chinese names of several words put together from jieba's mended (word, tag) pairs (after
chinese_tokens.mended), by general rules:

- an item of an enumeration (between 、, and 和/及/与 before the last) made of a name and generic
  nouns is one name ("中国" + "教育网", "国家" + "气象局", "佛山" + "车务段"): the list says where
  each name ends; it ends at a noun (no verb noun, distinguishing word or stray character after it),
  a state word ("国家") begins an agency's name only, and an organization then a place are two names;
- a rare noun listed among places is a place ("佛山、三水、肇庆");
- a name, up to three nouns and an organization or agency word are one organization ("美国" + "消费"
  + "科技" + "协会", "三茂铁路" + "股份" + "有限公司", "俄国" + "联邦" + "安全局");
- places alone (a place in a place, "广东省" + "广州市"), a person with a role ("元朗区议会主席"),
  and spans of time ("香港日治时期") are never joined;
- a word jieba tags as an organization after a measure word ("一所" + "武术学校") is a description.
"""

from __future__ import annotations

from collections.abc import Callable

from kbgraph.graph.extract.nlp.chinese_tokens import (
    _CJK_WORD,
    _COINED_NOUN,
    _GEO_TAILS,
    _INFRA_SUFFIXES,
    _NAME_TAGS,
    _PERSON_TAGS,
    _PLACE_ENDINGS,
    Pair,
)
from kbgraph.graph.extract.nlp.chinese_words import ORDINARY, SURNAMES

# tags of the words a name of several words is made of (nouns, names, abbreviations, place words)
_NOMINAL = frozenset("n nz ns nt nr nrfg nrt j s vn nl ng".split())
# words that begin an institution's name without being names ("国家" + "气象局")
_STATE_HEADS = frozenset("国家 中央 全国 国际 皇家 联邦 国立 省立 市立".split())
# words that end an organization's name after a name and nouns ("美国消费科技协会")
_LONG_ORG_SUFFIXES = frozenset("""
协会 学会 俱乐部 足球俱乐部 委员会 联合会 基金会 研究院 研究所 有限公司 股份有限公司 总公司 集团 公司 银行 大学
学院 商会 理事会 法院 高等法院 最高法院 法庭 工会 总工会 联盟
""".split())
# classifier characters of institutions: "一所" / "这家" + an organization word is a description
_CLASSIFIER_ENDINGS = frozenset("所家个间座支位名")
_LONGEST_NAME = 14
# the last characters of an agency's word ("俄国" + "联邦" + "安全局", however jieba tags it); a
# club's coined name after its kind ("中乙球队" + "成都钱宝") is a name of its own
_AGENCY_ENDINGS = frozenset("局部署院委处厅社")  # not 会 or 所: 社会, 场所
_LIST_CONJUNCTIONS = frozenset("和 及 与 以及 或".split())
# a phrase ending in a person's role or a span of time names no place or organization ("元朗区议会
# 主席", "立法会议员", "香港日治时期"): the characters roles end with, and time words
_ROLE_ENDINGS = frozenset("长员事记席理师臣友官任")
_TIME_WORDS = frozenset("时期 时代 期间 年代 年间 时候".split())
# characters of a word that joins or bounds two names (至, 及, 等...): no part of a longer name
_LINKING_CHARS = frozenset("至及等和与或的之")
# words after which a team's name comes ("中甲球队广州医药", "升班马厦门蓝狮", "对阵深圳红钻")
_TEAM_CUES = frozenset("球队 升班马 球会 对阵 迎战 战胜 击败 负于 不敌 力克".split())
# what ends a team's name after its city: particles, prepositions, conjunctions, pronouns,
# punctuation; verbs, verb nouns and adverbs of two characters or more ("试训", "签约", "随后")
_TEAM_STOP_TAGS = frozenset("ucprxw")
_TEAM_STOP_VERBS = frozenset("v vn vd d ad t f".split())
_MATCH_WORDS = frozenset("比赛 赛事 交锋 较量 对决".split())
_TEAM_STOP_WORDS = frozenset("是 为 有 将 被 也 都 就 已 还 又 和 与 及 在 代表".split())


def _nominal(pair: Pair) -> bool:
    word, flag = pair
    return (flag in _NOMINAL or word in _STATE_HEADS) and not any(ch in _LINKING_CHARS for ch in word)


def _field_word(pair: Pair) -> bool:
    """An adjective or verb of two characters that an organization's name can hold before its
    organization word: the field it works in ("纽约市" + "健康" + "医疗" + "总局", "英国皇家" + "鸟类" +
    "保护" + "协会"); one at most per name."""
    word, flag = pair
    return flag in ("a", "v") and len(word) == 2 and bool(_CJK_WORD.match(word)) \
        and not any(ch in _LINKING_CHARS for ch in word)


def _name_end(pairs: list[Pair], lo: int, hi: int) -> int:
    """pairs[lo:hi] less the words that end no name: a verb's noun ("服务", "出资") or one
    character that is no kind of place or agency ("原")."""
    while hi > lo:
        word, flag = pairs[hi - 1]
        if flag == "vn" or (len(word) == 1 and word not in _GEO_TAILS and word not in _AGENCY_ENDINGS
                            and word not in _INFRA_SUFFIXES):
            hi -= 1
            continue
        break
    return hi


def _name_start(pairs: list[Pair], lo: int, hi: int) -> int | None:
    """The first word of pairs[lo:hi] that can begin a name of several words (a name, an
    abbreviation or a state head), or None."""
    for k in range(lo, hi):
        word, flag = pairs[k]
        if flag in _NAME_TAGS or word in _STATE_HEADS:  # not an abbreviation tag: "房地产" is one
            return k
    return None


def _joined(pairs: list[Pair], lo: int, hi: int) -> str | None:
    """The words pairs[lo:hi] as one name, when they can be one: Chinese only, not too long, and
    not names alone (a place after a place, "广东省" + "广州市", is two names)."""
    words = [w for w, _ in pairs[lo:hi]]
    name = "".join(words)
    if hi - lo < 2 or len(name) > _LONGEST_NAME or not _CJK_WORD.match(name):
        return None
    if all(f == "ns" for _, f in pairs[lo:hi]) or any(f in _PERSON_TAGS for _, f in pairs[lo:hi]):
        return None  # places alone (a place in a place), or a person with their role ("朝大臣向朗")
    if name[-1] in _ROLE_ENDINGS or words[-1] in _TIME_WORDS:
        return None
    if pairs[lo][0] in _STATE_HEADS and name[-1] not in _AGENCY_ENDINGS and words[-1] not in _LONG_ORG_SUFFIXES:
        return None  # "国家" + "经济": a state head begins an agency's name only
    if pairs[hi - 1][1] == "ns" and any(w in _LONG_ORG_SUFFIXES or w[-1] in _AGENCY_ENDINGS
                                        for w in words[:-1] if len(w) >= 2):
        return None  # an organization, then a place ("中国足球俱乐部" + "上海浦东"): two names
    return name


def _place_like(pair: Pair) -> bool:
    word, flag = pair
    return flag == "ns" or word[-1:] in _PLACE_ENDINGS or word in _INFRA_SUFFIXES


def _list_items(pairs: list[Pair]) -> list[tuple[int, int]]:
    """The spans of an enumeration's items: between the 、 marks, the first one the nominal words
    before the first mark, the last one the nominal words after the last mark."""
    marks = [i for i, (w, _) in enumerate(pairs) if w == "、"]
    if not marks:
        return []
    # "和" / "及" / "与" join the list's last items ("佛山车务段和工务、电务")
    marks = sorted(marks + [i for i, (w, f) in enumerate(pairs) if f == "c" and w in _LIST_CONJUNCTIONS])
    items = []
    lo = marks[0]
    while lo > 0 and _nominal(pairs[lo - 1]):
        lo -= 1
    items.append((lo, marks[0]))
    for a, b in zip(marks, marks[1:]):
        if all(_nominal(p) for p in pairs[a + 1:b]):
            items.append((a + 1, b))
    hi = marks[-1] + 1
    while hi < len(pairs) and _nominal(pairs[hi]):
        hi += 1
    items.append((marks[-1] + 1, hi))
    return items


def _listed(pairs: list[Pair], freq: Callable[[str], int]) -> list[Pair]:
    """An enumeration's item made of a name and generic nouns is one name ("中国教育网、新华社、国家
    气象局"): the list marks where each item ends. Only in a list of at least two names. A rare
    noun listed among places is a place too ("佛山、三水、肇庆")."""
    merges: dict[int, tuple[int, str, str]] = {}
    names = 0
    items = _list_items(pairs)
    _listed_with_places(pairs, items, freq)
    for lo, hi in items:
        start = _name_start(pairs, lo, hi)
        if start is None:
            continue
        names += 1
        hi = _name_end(pairs, start, hi)
        name = _joined(pairs, start, hi)
        if name and name not in ORDINARY:
            merges[start] = (hi, name, "ns" if _place_like(pairs[hi - 1]) else "nt")
    if names < 2 or not merges:
        return pairs
    out: list[Pair] = []
    i = 0
    while i < len(pairs):
        if i in merges:
            hi, name, flag = merges[i]
            out.append((name, flag))
            i = hi
            continue
        out.append(pairs[i])
        i += 1
    return out


def _listed_with_places(pairs: list[Pair], items: list[tuple[int, int]], freq: Callable[[str], int]) -> None:
    """In a list most of whose items are places, an item that is one rare noun ("三水", a
    dictionary frequency under _COINED_NOUN) is a place as well (retagged in ``pairs``)."""
    singles = [lo for lo, hi in items if hi - lo == 1]
    places = [lo for lo in singles if pairs[lo][1] == "ns"]
    if len(places) < 2 or 2 * len(places) < len(items):
        return
    for lo in singles:
        word, flag = pairs[lo]
        if flag in ("n", "j", "nz") and _CJK_WORD.match(word) and 2 <= len(word) <= 3 and word not in ORDINARY \
                and freq(word) < _COINED_NOUN:
            pairs[lo] = (word, "ns")


def _long_orgs(pairs: list[Pair]) -> list[Pair]:
    """"美国" + "消费" + "科技" + "协会" -> one organization: a name, up to three nouns, and an
    organization word after them."""
    out: list[Pair] = []
    for word, flag in pairs:
        agency = flag in ("n", "nt") and len(word) >= 2 and word[-1] in _AGENCY_ENDINGS  # "联邦" + "安全局"
        if (word in _LONG_ORG_SUFFIXES or agency) and out:
            lo, loose = len(out), None
            while lo > 0 and len(out) - lo < 4 and (_nominal(out[lo - 1]) or (loose is None and _field_word(out[lo - 1]))):
                if not _nominal(out[lo - 1]):
                    loose = lo - 1
                lo -= 1
            start = _name_start(out, lo, len(out))
            # a verb right after the name says what the name does ("英国" + "支持" + "委员会"); after
            # a noun it names the field ("鸟类" + "保护" + "协会")
            if start is not None and loose == start + 1 and out[loose][1] == "v":
                start = None
            if start is not None and len(out) - start >= 2:
                name = _joined(out + [(word, "n")], start, len(out) + 1)
                if name:
                    del out[start:]
                    out.append((name, "nt"))
                    continue
        out.append((word, flag))
    return out


def _described(pairs: list[Pair]) -> list[Pair]:
    """"一所" + "武术学校" (nt) -> a description: an organization word after a measure word is a
    kind of organization, not the name of one."""
    out: list[Pair] = []
    for word, flag in pairs:
        if flag == "nt" and out and out[-1][1] in ("m", "q", "r") and out[-1][0][-1:] in _CLASSIFIER_ENDINGS:
            flag = "n"
        out.append((word, flag))
    return out


def _team_start(pairs: list[Pair], i: int) -> bool:
    """Whether pairs[i] can begin a team's name: a place right after a word that says a team comes
    next ("中甲球队" + "广州医药", "升班马" + "厦门蓝狮", "对阵" + "深圳红钻")."""
    if pairs[i][1] != "ns" or not _CJK_WORD.match(pairs[i][0]) or i == 0:
        return False
    before = pairs[i - 1][0]
    if before == "的" and i >= 2 and pairs[i - 2][0].endswith("球队"):
        before = pairs[i - 2][0]  # "中甲球队的广州医药"
    return before in _TEAM_CUES or before.endswith("球队")


def _team_end(pairs: list[Pair], i: int) -> int:
    """The end of the team name that starts with the place pairs[i]: the Chinese words after it up
    to punctuation, a particle, preposition, conjunction or pronoun, a verb of two characters or
    more, or a kind of team ("青年队"); at most four characters after the place."""
    end, width = i + 1, 0
    while end < len(pairs):
        word, flag = pairs[end]
        if word == "之" and end + 1 < len(pairs) and len(pairs[end + 1][0]) == 1:
            flag = "n"  # "广东" + "日之泉"
        if not _CJK_WORD.match(word) or flag[:1] in _TEAM_STOP_TAGS or word.endswith("队") or word in _TEAM_STOP_WORDS \
                or (len(word) >= 2 and flag in _TEAM_STOP_VERBS) or width + len(word) > 4:
            break
        width += len(word)
        end += 1
    return end


def _before_a_match(pairs: list[Pair], i: int) -> int | None:
    """The end of a place and one word after it that "的比赛" follows ("武汉" + "光谷" + "的比赛"):
    a team's name, with or without a word before it that says so."""
    end = i + 2
    if pairs[i][1] != "ns" or end + 1 >= len(pairs) or not _CJK_WORD.match(pairs[i + 1][0]) \
            or pairs[i + 1][1] in _TEAM_STOP_VERBS or pairs[i + 1][1][:1] in _TEAM_STOP_TAGS:
        return None
    return end if pairs[end][0] == "的" and pairs[end + 1][0] in _MATCH_WORDS else None


def _teams(pairs: list[Pair]) -> list[Pair]:
    """"中甲球队" + "广州" + "医药" -> "广州医药" (an organization): a place and the words after it,
    where the words before say that a team is named ("球队", "升班马", "对阵"); a club's sponsor name
    after its city is part of the club's name, and the city alone no entity there."""
    out: list[Pair] = []
    i = 0
    while i < len(pairs):
        match_end = _before_a_match(pairs, i)
        if match_end is not None or _team_start(pairs, i):
            end = match_end or _team_end(pairs, i)
            if end > i + 1:
                out.append(("".join(w for w, _ in pairs[i:end]), "nt"))
                i = end
                continue
        out.append(pairs[i])
        i += 1
    return out


def _listed_people(pairs: list[Pair]) -> list[Pair]:
    """"队友" + "于" + "乐" + "、" + "凌思浩": a surname and one or two characters jieba cut apart
    (reading 于 as "at") next to a person in a list of names are a person too."""
    if not any(w == "、" for w, _ in pairs):
        return pairs
    out: list[Pair] = []
    i = 0
    while i < len(pairs):
        nxt = i + 2
        while nxt < len(pairs) and nxt - i <= 3 and pairs[nxt][0] != "、":
            nxt += 1
        name = "".join(w for w, _ in pairs[i:nxt])
        beside = (nxt < len(pairs) - 1 and pairs[nxt + 1][1] in _PERSON_TAGS) \
            or (i >= 2 and pairs[i - 1][0] == "、" and out and out[-2][1] in _PERSON_TAGS)
        if nxt < len(pairs) and pairs[nxt][0] == "、" and nxt - i >= 2 and 2 <= len(name) <= 3 \
                and _CJK_WORD.match(name) and name[0] in SURNAMES and all(len(w) == 1 for w, _ in pairs[i:nxt]) \
                and beside:
            out.append((name, "nr"))
            i = nxt
            continue
        out.append(pairs[i])
        i += 1
    return out


def phrases(pairs: list[Pair], freq: Callable[[str], int]) -> list[Pair]:
    """The mended pairs with the module's rules applied (``freq``: jieba's dictionary frequency)."""
    return _described(_listed(_long_orgs(_teams(_listed_people(pairs))), freq))
