"""jieba's (word, tag) pairs mended where its default tags cut or misread names, by general rules:

- a transliterated name joined by "·" is one person ("凯尔" + "·" + "内斯" is 凯尔·内斯, never 内斯),
  and so are the pieces jieba cut a foreign name into ("伊斯" + "内尔", "格拉夫" + "顿");
- a regnal name is one person ("路" + "易九世" is 路易九世; "和亨" + "利八世" is 亨利八世);
- a designation is one name: a name and its serial number ("中星" + "九号" is 中星九号, "长征三号" +
  "乙" is 长征三号乙);
- a city's or province's name right before a coined name is one organization, a club or a firm
  ("成都" + "谢菲联", "深圳" + "健力宝"): only a rare word or a name tag makes the second part;
- a person's name (nr) must look like one: a surname first (one of the commonest few hundred, or a
  compound one), or transliteration characters throughout; jieba's person tag on 西兰花, 今天上午,
  友谊赛 is dropped, and a function character it glued on ("由金晨") is cut off (a word jieba's
  dictionary knows, "同盟国", stays whole);
- a regnal name takes the name part before it ("阿闵" + "塔斯一世"), a transliterated name a sea,
  river or island after it ("凯尔特" + "海"), and a particle jieba ran onto a person's name is cut
  off ("潘淑的" is 潘淑);
- ordinary words its dictionary tags as names (城市, 卫星, 国家队; chinese_words.ORDINARY) and the
  names of languages (英文, 粤语, 西班牙语) are none.

Names of several words (lists, long organization names) are chinese_phrases.py's.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kbgraph.graph.extract.nlp.chinese_cues import (
    CJK_WORD as _CJK_WORD,
    NAME_TAGS as _NAME_TAGS,
    PERSON_TAGS as _PERSON_TAGS,
    Pair,
    clan,
    dictionary_tag,
    division_name,
    generic_after_place,
    initial_surname,
    leagues,
    linked_guess,
    ordinary_compound,
    reads_as_ordinary,
    region_in_place,
)
from kbgraph.graph.extract.nlp.chinese_words import COMPOUND_SURNAMES, ORDINARY, SURNAMES, TRANSLITERATION

_DOTS = frozenset("·•‧・")
_NUMERALS = "一二三四五六七八九十"
# tags of words that are no part of a name after it (verbs, prepositions, particles...)
_VERBAL = frozenset("v vd vn p c u uj ul uz ud ug uv d r f m q x".split())
_REGNAL = re.compile(rf"[{_NUMERALS}]{{1,3}}世$")
_SERIAL = re.compile(rf"^[{_NUMERALS}]{{1,3}}号$")
_SERIAL_END = re.compile(rf"^[\u4e00-\u9fff]{{2,4}}[{_NUMERALS}]{{1,3}}号$")
# conjunctions and prepositions that jieba's guessing glues to a name after them ("由金晨", "和朗峰")
FUNCTION_CHARS = frozenset("和与及跟同在从向对把被由为将了是给让")
_GLUED_CHARS = FUNCTION_CHARS | {"原"}  # "原广三" (the former ...)
# prepositions that are surnames as well (于丹): glued only before a word jieba knows ("于京师")
_SURNAME_PREPOSITIONS = frozenset("于")
# compass directions jieba tags as places ("转向东北", "山东省西北部"): directions, not regions
_DIRECTIONS = frozenset("东北 西北 东南 西南 东部 西部 南部 北部 中部 东面 西面 南面 北面".split())
# a noun rarer than this in jieba's dictionary may be a coined name after a place ("光谷"); 效力 (753)
# in "在中国效力" is a verb it tags as a noun
_COINED_NOUN = 300
# a noun more frequent than this in jieba's dictionary is a common word before a place's name (中心
# 23969, 北方 3850), whatever district shares it; cities it tags as nouns are rarer (大理 958, 银川 290)
_COMMON_WORD = 1000
_FIRM_WORDS = frozenset("公司 集团 有限公司 股份有限公司 总公司 管理局 基金会".split())
_OPERATOR_SUFFIXES = frozenset("集团 公司 总公司 有限公司 股份有限公司 局 管理局".split())
# characters a place name ends with ("科学城", "亦庄", "蛇口"): a word jieba tags as a person that
# cannot be one (no surname first) and ends so is a place
_PLACE_ENDINGS = frozenset("城庄村镇县区市省州郡山河湖江岛湾港桥路街园寺庙宫楼塔门关峡谷岭峰洲泉池坝堡营屯寨府道巷坊口")
# the ends of an administrative division's name: no person's name ends so ("张家村", "肯特郡")
_ADMIN_ENDINGS = frozenset("村镇县郡州省市区乡")
# a club's name may go on with these ("成都谢菲联" + "足球俱乐部"); "队" after it is a description
_CLUB_SUFFIXES = ("俱乐部", "足球俱乐部")
# a league, cup or games after a name or an abbreviation is an event ("中甲" + "联赛", "亚冠" + "联赛")
_EVENT_SUFFIXES = frozenset("联赛 杯 锦标赛 公开赛 大师赛 运动会 奥运会 博览会 展览会 电影节 音乐节 艺术节 狂欢节 啤酒节 文化节 戏剧节 峰会".split())
# a sport between a place and a competition word: one event ("澳洲" + "网球" + "公开赛")
_SPORTS = frozenset("""网球 足球 篮球 排球 羽毛球 乒乓球 高尔夫 高尔夫球 斯诺克 台球 田径 游泳 棋 围棋 象棋 国际象棋 马拉松
自行车 赛车 拳击 击剑 滑雪 冰球 橄榄球 板球 棒球 手球 沙滩排球 花样滑冰 摔跤 柔道 举重 射击 体操""".split())
# referendums: a place and what it votes on before them name one ("苏格兰独立公投", "英国脱欧公投")
_VOTE_WORDS = frozenset("公投 公民投票 全民公投 全民投票".split())
# words of scope that name an event before a games word ("世界" + "博览会", "冬季" + "奥运会")
_EVENT_SCOPES = frozenset("世界 冬季 夏季".split())
# battles, wars, risings and treaties after a place's or people's name ("凡尔登" + "会战")
_BATTLE_SUFFIXES = frozenset("战役 战争 之战 会战 起义 条约 公约 协定 和约".split())
# infrastructure after a place or an abbreviation of places makes a place: "广州" + "西站",
# "茂名" + "站", "广茂" + "铁路", "广三" + "线"
_INFRA_SUFFIXES = frozenset("""
站 火车站 东站 西站 南站 北站 铁路 线 联络线 支线 干线 机场 国际机场 港 码头 大桥 隧道 公路 高速公路 高速 运河 水库 大坝
""".split())

# tags under which jieba leaves a single syllable of a foreign name it cut (not p, c, u, d, r, m)
_SYLLABLE_TAGS = frozenset("n q vg v a ag j f nr nrt ns nz ng b zg".split())  # 奇 (ag) of 佩特里奇
_FOREIGN_NAME_TAGS = frozenset("nr nrt nrfg ns nz".split())
# a word this frequent in jieba's dictionary is a name of its own (伊朗 3820, 伊拉克 2671, 波斯 1717),
# not a piece of a longer one (塔斯 4)
_KNOWN_NAME = 100
# characters that end no person's name but that jieba's guessing runs onto one ("潘淑的", "余蔚为")
_NAME_FINAL_STOPS = frozenset("为的时也向因死妻了在和是与及被把将说等曾又再就都便则亦即乃于自给")
# last characters of the names of kinds of things (fish, birds, insects, plants, food, drink,
# medicine, illness, tools, furniture, clothes, instruments) that end no person's name
_KIND_CHARS = frozenset("鱼鸟虫蛇藤草菜菇酒药病柜鞋帽袜裙锣钹笛鼓炮枪剂")
# one-character words for a sea, lake, river, mountain, island, bay, strait, cape, port, pass, city
_GEO_TAILS = frozenset("海湖河山岛湾峡角港江关城州")
# generic head words of the names of places, regions, parks and streets ("劳伦大陆", "克利希广场")
_GEO_HEADS = frozenset("""
大陆 群岛 半岛 平原 高原 盆地 山脉 峡谷 海峡 海湾 森林 沙漠 河畔 地区 大区 公国 王国 帝国 花园 广场 公园 植物园
动物园 度假区 工业园区 公路 大道 大街 正街 商场 大楼 大厦
""".split())
# a street's word after a name ("黎平路", "银城街", "弥敦道")
_ROAD_WORDS = frozenset("路街道巷")
# a place this frequent in jieba's dictionary is a country or a capital (美国 36089, 德国 9604; 香港
# 8044, 加拿大 2067): a site word after it is a kind of site there ("日本花园": a Japanese garden)
_COUNTRY_FREQ = 9000
# ...of which these name a site of a place (维多利亚 + 广场, 布什 + 大楼), not a region of it (上海地区)
_SITE_HEADS = frozenset("花园 广场 公园 植物园 动物园 度假区 工业园区 公路 大道 大街 正街 商场 大楼 大厦".split())


def _transliterated(word: str) -> bool:
    return len(word) >= 2 and all(ch in TRANSLITERATION for ch in word)


def person_like(word: str) -> bool:
    """Whether a word jieba tags as a person can be a person's name."""
    if any(d in word for d in _DOTS) or (_REGNAL.search(word) and len(word) >= 3):
        return True  # "凯尔·内斯", "路易九世"
    if word in ORDINARY or not _CJK_WORD.match(word):
        return False
    if word[:2] in COMPOUND_SURNAMES and 3 <= len(word) <= 4:
        return True
    if word[0] in SURNAMES and 2 <= len(word) <= 3:
        return True
    return _transliterated(word)


def _dotted(pairs: list[Pair], freq: Callable[[str], int]) -> list[Pair]:
    """"凯尔" "·" "内斯" -> "凯尔·内斯" (nr); "杰西卡" "·" "拉" "布罗卡" -> "杰西卡·拉布罗卡" (jieba cut the
    part after the dot again); "唐纳德" "特朗普" -> "唐纳德特朗普" (a transliterated given name and
    surname written without the dot); "伊斯" + "内尔" -> "伊斯内尔" (a foreign name jieba cut into
    pieces it tags as names; ``freq``: jieba's dictionary frequency)."""
    out: list[Pair] = []
    for i, (word, flag) in enumerate(pairs):
        after_dot = _name_part((word, flag)) or all(ch in TRANSLITERATION for ch in word)  # "拉" (v) in 杰西卡·拉布罗卡
        initial = len(out) >= 2 and _unit_syllable(out[-2], out[-3] if len(out) >= 3 else None) \
            and _transliterated(word) and len(word) >= 2  # "克" "·" "帕克": an initial jieba read as a gram
        if out and len(out) >= 2 and out[-1][0] in _DOTS and (_name_part(out[-2]) or initial) and after_dot:
            dot = out.pop()[0]
            prev = out.pop()[0]
            out.append((prev + dot + word, "nr"))
            continue
        if out and len(word) == 1 and word in TRANSLITERATION and out[-1][1] == "nr" \
                and any(d in out[-1][0] for d in _DOTS) and _last_syllable(flag, pairs[i + 1] if i + 1 < len(pairs) else None):
            out.append((out.pop()[0] + word, "nr"))  # "克里斯蒂安·沃尔玛" + "尔": its last syllable
            continue
        if out and _transliterated(word) and flag not in _VERBAL and out[-1][1] == "nr" \
                and any(d in out[-1][0] for d in _DOTS) and len(out[-1][0].rsplit("·", 1)[-1]) + len(word) <= 6:
            out.append((out.pop()[0] + word, "nr"))  # the rest of the part after the dot
            continue
        if out and _transliterated(word) and _transliterated(out[-1][0]) and len(word) >= 2 \
                and len(out[-1][0]) >= 2 and {flag, out[-1][1]} & _PERSON_TAGS and flag not in _VERBAL \
                and min(freq(word), freq(out[-1][0])) < _KNOWN_NAME:  # not "伊朗" + "伊拉克"
            out.append((out.pop()[0] + word, "nr"))
            continue
        if out and _unit_syllable(out[-1], out[-2] if len(out) >= 2 else None) and _transliterated(word) \
                and len(word) >= 2 and flag in _FOREIGN_NAME_TAGS:
            out.append((out.pop()[0] + word, flag))  # "克" + "斯蒂文" (克斯蒂文, a place): no gram here
            continue
        if out and _foreign_run(out[-1], (word, flag), freq):
            prev, prev_flag = out.pop()
            out.append((prev + word, "nr" if {flag, prev_flag} & _PERSON_TAGS else "ns"))
            continue
        out.append((word, flag))
    return out


# what may follow a name's last character where no word could start with that character
_CLOSERS = frozenset("（ ( ） ) ， , 。 、 ； ; ： : ！ ？ ” 」 』 》".split()) | {""}


def _last_syllable(flag: str, after: Pair | None) -> bool:
    """Whether one transliteration character after a dotted name ends it: jieba tagged it as part of
    a name, or as a bound morpheme that is no word alone ("布里斯·奥尔特" + "弗" (dg)), or nothing
    follows it but a bracket or punctuation (``_closes``)."""
    return flag in _PERSON_TAGS or (len(flag) == 2 and flag.endswith("g")) or _closes(after)


def _closes(after: Pair | None) -> bool:
    """Whether ``after`` (the pair after a character, None at the end) leaves the character no word
    to start: "君特·德·布吕" + "因" + "（Günter de Bruyn）": 因 is no preposition there."""
    return after is None or (after[1] == "x" and after[0].strip() in _CLOSERS)


def _unit_syllable(pair: Pair, before: Pair | None) -> bool:
    """A transliteration character jieba read as a unit of measure (克 a gram, 米 a metre) with no
    number before it: the first syllable of a foreign name ("克斯蒂文", "克·帕克汉姆")."""
    word, flag = pair
    return len(word) == 1 and word in TRANSLITERATION and flag == "m" and (before is None or before[1] != "m")


def _foreign_syllables(pair: Pair) -> bool:
    """A word of transliteration characters only; one character only where jieba did not read it
    as a function word ("肯" + "瑟斯", "格拉夫" + "顿")."""
    word, flag = pair
    if not _CJK_WORD.match(word) or not all(ch in TRANSLITERATION for ch in word) or word in ORDINARY:
        return False
    return len(word) >= 2 or (flag in _SYLLABLE_TAGS and word not in _GEO_TAILS)  # "凯尔特" + "海": a sea


def _foreign_run(prev: Pair, pair: Pair, freq: Callable[[str], int]) -> bool:
    """Whether two adjacent words are pieces of one transliterated name jieba cut ("伊斯" + "内尔",
    "潘" + "沃尔卡", "巴罗" + "佐"): transliteration characters throughout, one of them tagged as a
    name, at most seven characters, and not two places jieba knows ("伊朗" + "伊拉克")."""
    if not (_foreign_syllables(prev) and _foreign_syllables(pair)) or len(prev[0]) + len(pair[0]) > 7:
        return False
    if any(d in prev[0] for d in _DOTS) or not {prev[1], pair[1]} & _FOREIGN_NAME_TAGS:
        return False
    known = [p for p in (prev, pair) if len(p[0]) >= 2 and freq(p[0]) >= _KNOWN_NAME]
    single = len(prev[0]) == 1 or len(pair[0]) == 1
    return not known if single else len(known) < 2  # "德" + "波斯": the 德 ends the name before


def _name_part(pair: Pair) -> bool:
    word, flag = pair
    if any(d in word for d in _DOTS):
        return True  # a name already joined ("凯尔·内斯" + "·" + "三世")
    return bool(_CJK_WORD.match(word)) and (_transliterated(word) or (flag in _NAME_TAGS and len(word) <= 4))


def _regnal(pairs: list[Pair]) -> list[Pair]:
    """"路" + "易九世" -> "路易九世"; "和亨" + "利八世" -> "和" + "亨利八世"."""
    out: list[Pair] = []
    for word, flag in pairs:
        m = _REGNAL.search(word)
        if m and out and _CJK_WORD.match(word):
            head = word[:m.start()]
            prev, prev_flag = out[-1]
            take = 0
            while take < min(3, len(prev)) and prev[len(prev) - take - 1] in TRANSLITERATION:
                take += 1
            if take and len(head) + take >= 2 and (not head or all(ch in TRANSLITERATION for ch in head)):
                out.pop()
                if take < len(prev):
                    out.append((prev[:len(prev) - take], "x" if prev[:len(prev) - take] in FUNCTION_CHARS else prev_flag))
                out.append((prev[len(prev) - take:] + word, "nr"))
                _name_before_regnal(out)
                continue
            if len(head) >= 2 and all(ch in TRANSLITERATION for ch in head):
                out.append((word, "nr"))
                _name_before_regnal(out)
                continue
        out.append((word, flag))
    return out


def _name_before_regnal(out: list[Pair]) -> None:
    """"阿闵" + "塔斯一世" -> "阿闵塔斯一世", "拉美" + "西斯二世" -> "拉美西斯二世": the word before a
    regnal name that jieba tags as a name (short, not a function word) is the start of that name."""
    if len(out) < 2:
        return
    word, flag = out[-2]
    if flag in _PERSON_TAGS | {"nz"} and _CJK_WORD.match(word) and len(word) <= 3 and word not in ORDINARY \
            and word[0] not in FUNCTION_CHARS:
        name = out.pop()[0]
        out[-1] = (word + name, "nr")


def _designations(pairs: list[Pair]) -> list[Pair]:
    """"中星" + "九号" -> "中星九号"; "长征三号" + "乙" -> "长征三号乙" (nz): a name and its serial
    (not the kind of thing after it: a question says 鑫诺二号 where its article says 鑫诺二号通信卫星,
    and one key must serve both)."""
    out: list[Pair] = []
    for word, flag in pairs:
        if word == "线" and out and out[-1][1] == "nz" and out[-1][0].endswith("号"):
            out.append((out.pop()[0] + word, "ns"))  # "北京地铁十九号" + "线": a line, not a vehicle
            continue
        if word == "号" and out and 2 <= len(out[-1][0]) <= 3 and _CJK_WORD.match(out[-1][0]) \
                and out[-1][1] in _NAME_TAGS and out[-1][0] not in ORDINARY:
            out.append((out.pop()[0] + word, "nt"))  # "福顺" + "号": a shop's old-style name
            continue
        if re.match(rf"^[\u4e00-\u9fff]{{2,4}}[{_NUMERALS}]{{1,3}}号[甲乙丙丁]?$", word):
            out.append((word, "nz"))  # "长征三号甲", whatever jieba tagged it
            continue
        if out and _SERIAL.match(word) and _CJK_WORD.match(out[-1][0]) and 2 <= len(out[-1][0]) <= 4 \
                and (out[-1][1] in _NAME_TAGS or out[-1][1] in ("n", "j", "nz", "x")) and out[-1][0] not in ORDINARY:
            out.append((out.pop()[0] + word, "nz"))
            continue
        if out and len(word) == 1 and word in "甲乙丙丁" and (_SERIAL_END.match(out[-1][0])
                                                          or (out[-1][1] == "nz" and out[-1][0].endswith("号"))):
            out.append((out.pop()[0] + word, "nz"))
            continue
        out.append((word, flag))
    return out


def _clubs(pairs: list[Pair], freq: Callable[[str], int], rare: int,
           tails: dict[str, set[str]] | None = None) -> list[Pair]:
    """"成都" + "谢菲联" -> "成都谢菲联" (nt): a place and a coined name right after it (a rare word
    or one jieba tags as a name, not a place), with a team suffix after it if any."""
    pairs = list(pairs)
    out: list[Pair] = []
    i = 0
    while i < len(pairs):
        word, flag = pairs[i]
        nxt = pairs[i + 1] if i + 1 < len(pairs) else None
        if nxt and nxt[0] == "站" and 2 <= len(word) <= 3 and _CJK_WORD.match(word) and word not in ORDINARY \
                and (flag == "ns" or (flag in ("n", "a", "j", "nz") and freq(word) < rare)):
            out.append((word + "站", "ns"))  # "茂名" + "站" (jieba reads 站 as "to stand")
            i += 2
            continue
        if flag == "ns" and nxt and nxt[0] in _INFRA_SUFFIXES or (
                nxt and nxt[0] in _INFRA_SUFFIXES and nxt[0] not in ("港", "线") and _CJK_WORD.match(word)
                and 2 <= len(word) <= 4 and word not in ORDINARY
                and (flag in _NAME_TAGS or flag == "j" or freq(word) < _COINED_NOUN)):
            name, end = word + nxt[0], i + 2
            while end < len(pairs) and pairs[end][0] in _INFRA_SUFFIXES:
                name, end = name + pairs[end][0], end + 1
            if end < len(pairs) and pairs[end][0] in _OPERATOR_SUFFIXES:
                out.append((name + pairs[end][0], "nt"))  # "广州铁路" + "集团": the operator
                i = end + 1
                continue
            out.append((name, "ns"))
            i = end
            continue
        if flag == "ns" and nxt and _city_after_place(nxt, freq):
            out.append((word, flag))  # "陕西" + "宝鸡", "香港" + "九龙": a place in a place, no club
            pairs[i + 1] = (nxt[0], "ns")  # which may still begin one ("沈阳" + "金德")
            i += 1
            continue
        if flag == "ns" and nxt and ((2 <= len(word) <= 3 and _coined(nxt, freq, rare))
                                     or (nxt[1] == "nt" and nxt[0] not in ORDINARY)):
            name, end = word + nxt[0], i + 2
            while end < len(pairs) and pairs[end][0] in _CLUB_SUFFIXES:
                name, end = name + pairs[end][0], end + 1
            if tails is not None and nxt[1] != "nt":
                tails.setdefault(nxt[0], set()).add(name)  # "建业" alone is 河南建业
            out.append((name, "nt"))
            i = end
            continue
        out.append((word, flag))
        i += 1
    return out


def _city_after_place(pair: Pair, freq: Callable[[str], int]) -> bool:
    """A city's or county's name after a place's (``division_name``): a name-tagged word, or a noun
    or verb jieba's dictionary holds as no common word (宝鸡 n, 包头 v; not 中心, whose 中心区 is
    a district too)."""
    word, flag = pair
    if not _CJK_WORD.match(word) or not division_name(word):
        return False
    return flag in _NAME_TAGS or (flag in ("n", "v", "j") and freq(word) < _COMMON_WORD)


def _native(word: str, city: bool = False) -> bool:
    """A person of a place ("洛阳人", "南昌人"): a place's name and 人, no one's name; with ``city``,
    only of a city or county (a people, "英国人", "印第安人", may be named as a group)."""
    if len(word) < 3 or word[-1] != "人":
        return False
    return division_name(word[:-1]) or (not city and dictionary_tag(word[:-1]) == "ns")


def _coined(pair: Pair, freq: Callable[[str], int], rare: int) -> bool:
    word, flag = pair
    if not _CJK_WORD.match(word) or not 2 <= len(word) <= 4 or word in ORDINARY or flag == "ns" \
            or ordinary_compound(word, freq) or _native(word):
        return False  # "蒙古" + "宣布独立", "河南" + "洛阳人" are no club
    if word[0] in FUNCTION_CHARS and flag in _PERSON_TAGS:
        return False
    if flag in ("nr", "nrt", "nz", "nt", "j"):
        return freq(word) < rare  # "谢菲联", "健力宝"; not a language or a people ("加拿大" + "中文")
    return flag in ("n", "nrfg", "x") and len(word) == 2 and freq(word) < _COINED_NOUN


def _geo_tails(pairs: list[Pair], freq: Callable[[str], int]) -> list[Pair]:
    """"凯尔特" + "海" -> "凯尔特海" (a place): a transliterated name jieba tags as a person or a
    name, then a one-character word for a sea, lake, river, mountain, island, pass or city; a word
    tagged as a person or a proper noun, then a place's generic head word ("劳伦" + "大陆", "阿登" +
    "地区", "海翠" + "花园": the place, never a person of that name)."""
    out: list[Pair] = []
    for i, (word, flag) in enumerate(pairs):
        firm = i + 1 < len(pairs) and pairs[i + 1][0] in _FIRM_WORDS  # "加拿大广场" + "公司": the firm's name
        if out and word in _GEO_HEADS and not firm and _CJK_WORD.match(out[-1][0]) and 2 <= len(out[-1][0]) <= 5 \
                and (out[-1][1] in _PERSON_TAGS | {"nz"}
                     or (out[-1][1] == "ns" and word in _SITE_HEADS and freq(out[-1][0]) < _COUNTRY_FREQ)):
            out.append((out.pop()[0] + word, "ns"))  # "劳伦" + "大陆", "克利希" + "广场": a place, no person
            continue
        if out and word in _ROAD_WORDS and flag in ("n", "s", "q") and out[-1][1] in _NAME_TAGS \
                and _CJK_WORD.match(out[-1][0]) and 2 <= len(out[-1][0]) <= 3:
            out.append((out.pop()[0] + word, "ns"))  # "惠民" + "路", "银城" + "街", "弥敦" + "道": a street
            continue
        if out and ((word in _GEO_TAILS and out[-1][1] in _NAME_TAGS and _transliterated(out[-1][0]))
                    or (word in _ADMIN_ENDINGS and out[-1][1] in _PERSON_TAGS and _CJK_WORD.match(out[-1][0])
                        and 2 <= len(out[-1][0]) <= 4)):  # "敖德萨" + "州"
            out.append((out.pop()[0] + word, "ns"))
            continue
        out.append((word, flag))
    return out


def _events(pairs: list[Pair], freq: Callable[[str], int]) -> list[Pair]:
    """"中甲" + "联赛" -> "中甲联赛" (an event): a name or abbreviation before a league or games word;
    a name before a battle, war or treaty word ("凡尔登" + "会战", "天津" + "条约"; not "国际条约").
    A common noun before a league word is a kind of league ("低" + "级别" + "联赛"). A place, what it
    votes on (one verb or noun) and a referendum word are one event ("苏格兰" + "独立" + "公投"); so
    are a place, a sport and a competition word ("澳洲" + "网球" + "公开赛")."""
    out: list[Pair] = []
    for word, flag in pairs:
        if word in _VOTE_WORDS and len(out) >= 2 and out[-2][1] == "ns" and _CJK_WORD.match(out[-1][0]) \
                and len(out[-1][0]) <= 2 and out[-1][1] in ("v", "vn", "n", "ns", "j"):
            what = out.pop()[0]
            out.append((out.pop()[0] + what + word, "nev"))
            continue
        if word in _EVENT_SUFFIXES and len(out) >= 2 and out[-1][0] in _SPORTS and out[-2][1] in ("ns", "nz", "j") \
                and _CJK_WORD.match(out[-2][0]):
            sport = out.pop()[0]
            out.append((out.pop()[0] + sport + word, "nev"))
            continue
        if word in _EVENT_SUFFIXES and out and out[-1][1] in _NAME_TAGS and len(out[-1][0]) <= 8 \
                and any(out[-1][0].endswith(sport) and len(out[-1][0]) > len(sport) for sport in _SPORTS):
            out.append((out.pop()[0] + word, "nev"))  # "中国羽毛球" (jieba's one word) + "公开赛"
            continue
        named = word in _BATTLE_SUFFIXES and out and out[-1][1] in _NAME_TAGS
        if (word in _EVENT_SUFFIXES or named) and out and 2 <= len(out[-1][0]) <= 4 and _CJK_WORD.match(out[-1][0]) \
                and out[-1][0] not in ORDINARY and out[-1][1] not in _VERBAL \
                and (out[-1][1] in _NAME_TAGS or out[-1][1] in ("j", "nlg") or out[-1][0] in _EVENT_SCOPES
                     or freq(out[-1][0]) < _COINED_NOUN):
            out.append((out.pop()[0] + word, "nev"))
            continue
        out.append((word, flag))
    return out


def _unglued(pairs: list[Pair], freq: Callable[[str], int]) -> list[Pair]:
    """"由金晨" (nr) -> "由" + "金晨", "由广茂" -> "由" + "广茂": a function character jieba ran
    into the name after it (a person's must then start with a surname). "于" is a surname too: only
    before a word the dictionary knows better than the whole ("于京师", "于岩礁") or a foreign name
    ("于罗密·施奈德") is it the preposition."""
    out: list[Pair] = []
    for i, (word, flag) in enumerate(pairs):
        nxt = pairs[i + 1][0] if i + 1 < len(pairs) else ""
        if flag in _NAME_TAGS and len(word) == 3 and _glued(word, freq, nxt in _DOTS):
            out += [(word[0], "p"), (word[1:], dictionary_tag(word[1:]) or flag)]  # "华中" is a place
            continue
        out.append((word, flag))
    return out


def _glued(word: str, freq: Callable[[str], int], dotted: bool) -> bool:
    """Whether the first character of a three-character name is a preposition glued to the rest.
    A word the dictionary knows is whole ("同盟国"), unless the rest is ten times better known: its
    rare entries "于京师" (3) and "和威廉" (3) are jieba's own glued guesses."""
    if word in ORDINARY or not _CJK_WORD.match(word) or word[0] not in _GLUED_CHARS | _SURNAME_PREPOSITIONS:
        return False
    rest = word[1:]
    if dotted and _transliterated(rest):
        return True  # no Chinese surname before a foreign name
    if word[0] in _SURNAME_PREPOSITIONS:
        return freq(rest) > 0 and freq(word) * 10 < freq(rest)
    return not freq(word) or freq(word) * 10 < freq(rest)


def _clipped(pairs: list[Pair], freq: Callable[[str], int]) -> list[Pair]:
    """"潘淑的" -> "潘淑" + "的", "尼高·高华为" -> "尼高·高华" + "为": a particle, conjunction or
    adverb jieba's guessing ran onto the end of a person's name; onto a word its dictionary knows
    ("任教" + "于", "晋升" + "为"), it made no name at all. A verb after a name the dictionary knows
    far better than the whole ("刘备入" + "蜀") is cut off too. A dotted name's last transliteration
    character before a bracket or punctuation stays ("君特·德·布吕因（Günter de Bruyn）")."""
    out: list[Pair] = []
    for i, (word, flag) in enumerate(pairs):
        rest = word[:-1]
        kept = word[-1] in TRANSLITERATION and _closes(pairs[i + 1] if i + 1 < len(pairs) else None)
        dotted = any(d in rest for d in _DOTS) and len(re.split("[·•‧・]", rest)[-1]) >= 2 and not kept
        if flag in _PERSON_TAGS and len(word) == 3 and _CJK_WORD.match(word) and freq(rest) > 10 * freq(word) \
                and dictionary_tag(rest) in _PERSON_TAGS and (dictionary_tag(word[-1]) or "n")[:1] in "vdpcu" \
                and word[-1] not in TRANSLITERATION and rest not in COMPOUND_SURNAMES:  # not 巴特拉, 慕容垂
            out += [(rest, "nr"), (word[-1], "x")]  # "刘备入" (8) + "蜀": a name its dictionary knows, and a verb
            continue
        if flag in _PERSON_TAGS and len(word) == 2 and word[-1] in _NAME_FINAL_STOPS and not freq(word):
            out += [(word[0], "n"), (word[-1], "x")]  # "叶" + "为": a noun and a verb, no "叶为"
            continue
        if flag == "nz" and len(word) == 3 and word[-1] in _NAME_FINAL_STOPS and freq(rest) > 0:
            out += [(rest, "n"), (word[-1], "x")]  # "改编" + "自"
            continue
        if flag in _PERSON_TAGS and word[-1:] in _NAME_FINAL_STOPS and len(word) >= 3 \
                and (dotted or (len(word) == 3 and (person_like(rest) or rest in ORDINARY))):
            known = not dotted and (freq(rest) > 0 or rest in ORDINARY)
            out += [(rest, "n" if known else "nr"), (word[-1], "x")]
            continue
        out.append((word, flag))
    return out


# one-character names of peoples and countries before 文 (英文, 汉文) and longer heads jieba does
# not tag as places (拉丁文)
_NATION_CHARS = frozenset("中英日法德俄汉满藏蒙韩朝意西葡梵越泰希波荷瑞")
_LANGUAGE_HEADS = frozenset("拉丁 意大利 阿拉伯 希腊 西班牙 葡萄牙 蒙古 朝鲜 满洲 波斯 中英".split())


def _language(word: str, flag: str) -> bool:
    """A language's name, which names no entity (英文, 粤语, 西班牙语, 拉丁文): jieba tags them as
    proper nouns; a person's name may end in 文 ("李文"), not in 语."""
    if len(word) < 2 or any(d in word for d in _DOTS) or not _CJK_WORD.match(word):
        return False
    if word[-1] == "文":  # only after a people's or country's name: 英文, 拉丁文, not the era 建文
        return flag == "nz" and (word[:-1] in _NATION_CHARS or word[:-1] in _LANGUAGE_HEADS)
    return word[-1] == "语" and (flag == "nz" or flag in _PERSON_TAGS)


def plain(pairs: list[Pair]) -> list[Pair]:
    """The name tags jieba's dictionary gives ordinary words (城市 ns, 卫星 nr, 国家队 nt) and a
    surname's family or clan ("李氏", "刘家") dropped to "n" before any rule reads them."""
    out: list[Pair] = []
    for w, f in pairs:
        if f in _NAME_TAGS and (w in ORDINARY or clan(w)):
            f = "n"
        out.append((w, f))
    return out


def mended(pairs: list[Pair], freq: Callable[[str], int], rare: int,
           tails: dict[str, set[str]] | None = None) -> list[Pair]:
    """jieba's pairs with the rules of the module applied (names joined; tags of non-names dropped
    to "n"); ``tails`` collects the coined part of each place-and-name organization."""
    pairs = _regnal(_dotted(_unglued(leagues(initial_surname(plain(pairs))), freq), freq))
    pairs = generic_after_place(region_in_place(pairs))
    pairs = _events(_clubs(_designations(_geo_tails(pairs, freq)), freq, rare, tails), freq)
    out: list[Pair] = []
    for word, flag in _clipped(pairs, freq):
        if flag in _PERSON_TAGS and word[-1:] in _PLACE_ENDINGS and word not in ORDINARY \
                and (not person_like(word) or (len(word) >= 3 and word[-1] in _ADMIN_ENDINGS)):
            flag = "ns"  # "科学城", "亦庄", "张家村": jieba's person tag on a place
        elif flag in _NAME_TAGS and (word in ORDINARY or (flag in _PERSON_TAGS and not person_like(word))
                                     or _language(word, flag) or (flag in _PERSON_TAGS and _CJK_WORD.match(word)
                                                                  and freq(word) > 0 and reads_as_ordinary(word))):
            flag = "n"
        elif flag in _NAME_TAGS and _CJK_WORD.match(word) and _native(word, city=True):
            flag = "n"  # "洛阳人" (nr): a person of Luoyang
        elif flag in _PERSON_TAGS and word[-1] in _KIND_CHARS and not any(d in word for d in _DOTS):
            flag = "n"  # "龙利鱼", "雷公藤", "冷冻柜": a kind of thing, by its last character
        elif flag in _NAME_TAGS and word in _DIRECTIONS:
            flag = "f"  # alone, after the rules: "西南" + "站" is a station
        elif flag in _NAME_TAGS and (linked_guess(word, flag, freq) or ordinary_compound(word, freq)):
            flag = "n"
        elif flag in _NAME_TAGS and flag != "ns" and _CJK_WORD.match(word) and division_name(word):
            flag = "ns"  # "多伦多" (nrt), "南通" (nz): a city, as its dictionary entry 多伦多市 says
        out.append((word, flag))
    return out


