"""Chinese names: jieba's part-of-speech tags nr/nrfg/nrt (person), ns (place), nt (organization) and
nz (other proper noun), two characters or more. Quoted titles and products (《海棠依旧》, “东篱十五年”,
「」, 『』, "" around CJK; at most 20 characters, no sentence punctuation) are one name each, never
cut by jieba. A name-like head before organization suffixes is one organization ("澄江" + "机器人",
"青禾" + "科技" + "有限公司"): any name tag before a strong suffix (公司, 集团, 银行, 大学...), a rare
name or rare two-character noun (jieba's dictionary frequency) before an industry word (科技, 汽车,
乳业...); the coined head seen alone in the chunk stands for that firm. jieba's junk names (新一轮,
上市) are dropped. None of this touches text without CJK characters; Latin names inside Chinese
text are names.py's.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections import Counter, defaultdict
from functools import lru_cache
from typing import Any

from kbgraph.graph.extract.nlp.candidates import _Candidate, _key, _proven_candidate, _take_title
from kbgraph.graph.extract.nlp.chinese_phrases import phrases
from kbgraph.graph.extract.nlp.chinese_cues import dictionary_tag
from kbgraph.graph.extract.nlp.chinese_tokens import _transliterated, mended, person_like, plain
from kbgraph.graph.extract.nlp.sentences import _CJK_CHAR

_CJK_SURNAMES = frozenset("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁"
                          "任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严"
                          "覃武戴莫孔向汤欧阳司马上官诸葛")
_CJK_TAGS = {"nr": "person", "nrfg": "person", "nrt": "person", "ns": "geo", "nt": "organization", "nz": "concept",
             "nev": "event", "nlg": "organization"}
# words that end an organization's name. After any name-like head ("中国银行", "北京大学") they make one:
_CJK_ORG_SUFFIXES = frozenset("""
公司 有限公司 股份有限公司 集团 银行 大学 学院 研究院 研究所 医院 控股 股份 基金会 协会 商会 实验室
俱乐部 委员会 理事会 联合会 改善会 基金 中学 高中 小学
""".split())
# ...after a rare head only (a firm's coined name, "澄江机器人", "青禾科技"): a common word or a big place
# before them is a description ("工业机器人", "中国汽车市场"), not a firm
_CJK_INDUSTRY_SUFFIXES = frozenset("""
科技 技术 电子 能源 汽车 机器人 生物 医药 药业 制药 传媒 智能 医疗 教育 游戏 音乐 旅游 快递 物流 食品
钢铁 家居 光电 半导体 电池 纺织 航天 航空 卫星 宇航 卫星通信
书店 书局 茶庄 茶楼 酒楼 饭店 酒店 餐厅 商店 超市 药店 药房 商行 面馆 咖啡馆 无人机 风电 农牧 乳业 酒业 影业 种业 茶业 水务 重工 航运 软件
网络 通信 化工 材料 地产 置业 证券 保险 基金 资本 投资 电器 电气 环保 实业 矿业 建工 动力 精密
微电子 信息 数据 电力 燃气 服饰 家电 文化 体育 影视 咨询 物业 新材料 农业 牧业 渔业 商贸 贸易 电商
餐饮 娱乐 建设 服装 时装 零售
""".split()) | _CJK_ORG_SUFFIXES
# a country's or city's name before these is a company ("英国航空", "中国移动"), however common the name
_CJK_NATIONAL_SUFFIXES = frozenset("航空 石油 石化 电信 移动 联通 邮政 铁路 海运 航运".split())
# 的 and verbs that take a kind of product as their object ("推出扫地机器人", "专注冷链物流")
_CJK_MAKING_VERBS = frozenset("的 推出 发布 研发 开发 生产 制造 量产 销售 采用 使用 部署 专注 布局 进军 发展 加快".split())
_CJK_NAME_TAGS = frozenset("nr nrfg nrt ns nz nt".split())
_PERSON_FLAGS = frozenset("nr nrfg nrt".split())
# what jieba tags a character its guessing runs onto a name: verbs, adverbs, directions, particles
_RUN_ON_TAGS = frozenset("vdfpcu")
_ARMY_CHARS = frozenset("军兵部")  # "陆完军", "曹爽军": the person's army
_TITLE_SUBJECT_MAX = 12
_THING_FLAGS = frozenset("nz nt nlg nev".split())
_CJK_WORD_RE = re.compile(r"^[\u4e00-\u9fff·]+$")
# institutions a city numbers ("罗马第三大学", "北京第四中学", "第二人民医院")
_CJK_ORDINAL = re.compile(r"^第[一二三四五六七八九十百]{1,3}$")
_CJK_NUMBERED_ORGS = frozenset("大学 中学 小学 高中 医院 人民医院 中心医院 实验室 研究所 研究院".split())
# what follows a page's subject where its text begins: a gloss, a comma, a copula ("于乐，", "X（", "X是")
_SUBJECT_FOLLOWERS = frozenset("（(，,是为")
# what jieba tags the single characters of a coined name it could not read as one word
_CJK_CHAR_TAGS = _CJK_NAME_TAGS | frozenset("n ng a ag b j".split())
# conjunctions and prepositions that jieba's guessing sometimes glues to the name after them
_CJK_FUNCTION_CHARS = frozenset("和与及跟同在从向对把被由为将了是给让")
_CJK_RARE = 1000  # jieba dictionary frequency under which a noun can be a coined name ("石榴", "绿洲")
# jieba tags these as names, but they are a quantifier phrase and a verb ("新一轮融资", "在香港上市")
_CJK_STOP = frozenset("新一轮 上市 印发 一轮 新一代 下一代 首发 发布 亮相 开业 投产 同比 环比".split())
# a quoted title or product: 《海棠依旧》, “东篱十五年”, 「…」, 『…』; short, no sentence punctuation inside
_CJK_QUOTED = re.compile(r"《([^《》\n]{1,30})》|“([^“”\n]{1,30})”|「([^「」\n]{1,30})」|『([^『』\n]{1,30})』"
                         r"|\"([^\"\n]{1,30})\"")
_CJK_TITLE_MAX = 20
# tags of a dictionary word that is an ordinary word when quoted alone ("手指", "解冻", "烫手山芋")
_ORDINARY_WORD_TAGS = frozenset("n v vn a ad an l i d".split())
_CJK_SENTENCE_PUNCT = re.compile(r"[。！？；，、：,;!?:]")
# jieba's tags of verbs that make a quoted phrase a clause (not "vn", a verb's noun: "保护", "管理")
_CLAUSE_VERB_TAGS = frozenset("v vd vi".split())


@lru_cache(maxsize=1)
def _jieba_posseg() -> Any:
    import jieba
    import jieba.posseg as posseg
    jieba.setLogLevel(logging.WARNING)
    return posseg


def _whole_names(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """jieba's (word, tag) pairs with split Chinese names put back together: a one-character surname
    before a given name ("杨" + "明哲", "何" + "志远") is one person."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(pairs):
        word, flag = pairs[i]
        nxt = pairs[i + 1] if i + 1 < len(pairs) else None
        if nxt and len(word) == 1 and word in _CJK_SURNAMES and nxt[1] in ("nr", "nrfg", "nrt") \
                and 1 <= len(nxt[0]) <= 2 and _CJK_CHAR.match(nxt[0]):
            out.append((word + nxt[0], "nr"))
            i += 2
            continue
        out.append((word, flag))
        i += 1
    return out


def _cjk_titles(text: str) -> list[tuple[int, int]]:
    """Spans of Chinese quoted titles and products (《海棠依旧》, “东篱十五年”): CJK inside, at most
    20 characters, no sentence punctuation (quoted speech has it)."""
    return [(start, end) for start, end, title in _cjk_quotes(text) if title]


@lru_cache(maxsize=4)  # read twice per chunk: by detect.py for the titles, by chinese_names for the cuts
def _cjk_quotes(text: str) -> tuple[tuple[int, int, bool], ...]:
    """Spans of short Chinese phrases in quotation marks or 《》, each with whether it is a title;
    one that is not (quoted words: “手指”, “最新的事件”) is still kept apart from the text around
    it, so that the words there are cut as before."""
    found = []
    for m in _CJK_QUOTED.finditer(text):
        group = next(g for g in range(1, 6) if m.group(g) is not None)
        inner = m.group(group)
        title = inner.strip()
        if not _CJK_CHAR.search(title) or len(title) > _CJK_TITLE_MAX or _CJK_SENTENCE_PUNCT.search(title):
            continue
        named = _nominal(title) and not (group > 1 and ("的" in title or _quoted_words(title) or _clause(title)))
        start = m.start(group) + len(inner) - len(inner.lstrip())
        found.append((start, start + len(title), named))
    return tuple(found)


def _quoted_words(phrase: str) -> bool:
    """Whether a phrase in quotation marks (not 《》) is words quoted rather than a name: one word
    jieba's dictionary knows as an ordinary noun, verb or adjective ("手指", "解冻", "烫手山芋"), or
    a phrase that ends with a direction or particle ("紧急情况下")."""
    pairs = [(p.word, p.flag) for p in _jieba_posseg().cut(phrase)]
    if len(pairs) == 1:
        word, flag = pairs[0]
        return _frequency(word) > 0 and flag in _ORDINARY_WORD_TAGS
    return pairs[-1][1][:1] in ("f", "u", "y")


def _clause(phrase: str) -> bool:
    """Whether a phrase in quotation marks says something: a verb of two characters or more that
    jieba's dictionary knows among its words ("100%属于科斯佩达尔", "不比在尼罗河没有泛滥时杀掉法老王理智").
    Quoted names of things are nouns, though jieba may guess a verb in a coined product's name
    ("翠屏凉感布": "感布"); a work's title with a verb is written in 《》, which this is not asked of."""
    return any(p.flag in _CLAUSE_VERB_TAGS and len(p.word) >= 2 and _frequency(p.word) > 0
               for p in _jieba_posseg().cut(phrase))


def _nominal(title: str) -> bool:
    """Whether a quoted phrase can be a title: it holds a noun, a name or a Latin word; quoted words
    of judgement ("非常合理", "很好") are speech."""
    return any(p.flag[:1] in ("n", "j", "i", "l") or p.flag == "eng" or p.flag == "x" and p.word.strip()
               for p in _jieba_posseg().cut(title))


@lru_cache(maxsize=1)
def _jieba_frequencies() -> dict[str, int]:
    import jieba
    jieba.initialize()
    return jieba.dt.FREQ


def _frequency(word: str) -> int:
    return _jieba_frequencies().get(word, 0)


def _cjk_word(word: str) -> bool:
    return all(_CJK_CHAR.match(ch) for ch in word)


def _org_head(word: str, flag: str, strong: bool) -> bool:
    """Can ``word`` (tagged ``flag``) be the coined part of an organization's name before a suffix?
    A name tag does (rare names before any suffix, any name before a strong one: "中国银行"); so does
    a rare two-character noun ("石榴音乐", "绿洲农牧"); verbs, adjectives and common nouns do not."""
    if len(word) < 2 or not _cjk_word(word) or word in _CJK_STOP:
        return False
    rare = _jieba_frequencies().get(word, 0) < _CJK_RARE
    if flag in _CJK_NAME_TAGS:
        return strong or rare
    return flag in ("n", "j") and len(word) == 2 and rare


def _foreign_name_word(pair: tuple[str, str]) -> bool:
    """A word of two or more transliteration characters that jieba tags as a name ("哈雷", "戴维森")."""
    word, flag = pair
    return flag in _CJK_NAME_TAGS and _transliterated(word)


def _whole_orgs(pairs: list[tuple[str, str]], heads: dict[str, set[str]] | None = None) -> list[tuple[str, str]]:
    """jieba's (word, tag) pairs with organization names put back together: a name-like head and the
    suffixes after it ("澄江" + "机器人", "青禾" + "科技" + "有限公司") are one organization ("nt"),
    and the head is no person or place of its own. ``heads`` collects the rare heads (coined names)
    and the organizations they began."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(pairs):
        word, flag = pairs[i]
        head, width = word, 1
        if len(word) == 1 and i + 1 < len(pairs) and len(pairs[i + 1][0]) == 1 and flag in _CJK_CHAR_TAGS \
                and pairs[i + 1][1] in _CJK_CHAR_TAGS and _cjk_word(word + pairs[i + 1][0]):
            head, width = word + pairs[i + 1][0], 2  # "恒" + "岳", "青" + "禾": jieba cut a coined name in two
        end = i + width
        if end + 1 < len(pairs) and _CJK_ORDINAL.match(pairs[end][0]) and pairs[end + 1][0] in _CJK_NUMBERED_ORGS:
            end += 1  # "罗马" + "第三" + "大学", "北京" + "第四" + "中学": an institution's number
        while end < len(pairs) and pairs[end][0] in _CJK_INDUSTRY_SUFFIXES:
            end += 1
        glued = end > i + width and width == 1 and len(word) == 3 and word[0] in _CJK_FUNCTION_CHARS \
            and word not in _jieba_frequencies()
        if glued:
            head = word[1:]  # "和朗峰" + "家居": jieba's guess ran a conjunction into the name
        strong = any(p[0] in _CJK_ORG_SUFFIXES for p in pairs[i + width:end])
        # a common noun and an industry word after a verb, 的 or a measure word describe a thing
        # ("推出扫地机器人", "新推出的扫地机器人"); only a name tag or a strong suffix makes a firm there
        described = i > 0 and (pairs[i - 1][1][:1] in ("m", "q") or pairs[i - 1][0] in _CJK_MAKING_VERBS) \
            and flag not in _CJK_NAME_TAGS and not strong
        national = flag == "ns" and end == i + width + 1 and pairs[i + width][0] in _CJK_NATIONAL_SUFFIXES
        if end > i + width and (flag != "nt" or strong) and not described \
                and (national or _org_head(head, "nr" if width == 2 else flag, strong)):
            org = head + "".join(p[0] for p in pairs[i + width:end])
            if glued:
                out.append((word[0], "c"))
            elif out and _foreign_name_word(out[-1]) and _foreign_name_word((head, flag)):
                # "哈雷" + "戴维森" + "公司": a foreign name jieba cut in two, then the firm word; the bare
                # word "company" is no part of the name (the set's "Uber" of "Uber公司")
                org = out.pop()[0] + (head if org == head + "公司" else org)
            out.append((org, "nt"))
            if heads is not None and _jieba_frequencies().get(head, 0) < _CJK_RARE:
                heads[head].add(org)
            i = end
            continue
        out.append((word, flag))
        i += 1
    return out


def _one_reading(words: list[tuple[int, int, str, str]]) -> list[tuple[int, int, str, str]]:
    """An organization's or person's name read whole once in the chunk ("广东日之泉" after "中甲球队",
    "李成栋") is read so wherever jieba cut the same characters into pieces ("与" + "广东" + "日" +
    "之" + "泉", "李成" + "栋"): the pieces that spell it from a word's start are that name."""
    whole = {w: f for _, _, w, f in words if (f == "nt" and len(w) >= 4) or (f in _PERSON_FLAGS and len(w) >= 3)}
    if not whole:
        return words
    prefixes = {o[:k] for o in whole for k in range(1, len(o) + 1)}
    out: list[tuple[int, int, str, str]] = []
    i = 0
    while i < len(words):
        si, offset, word, flag = words[i]
        spelled, j = word, i + 1
        while j < len(words) and word in prefixes and words[j][1] == offset + len(spelled) \
                and spelled + words[j][2] in prefixes:
            spelled += words[j][2]
            j += 1
        if j > i + 1 and spelled in whole:
            out.append((si, offset, spelled, whole[spelled]))
            i = j
            continue
        out.append(words[i])
        i += 1
    return out


def _team_word_dropped(words: list[tuple[int, int, str, str]]) -> list[tuple[int, int, str, str]]:
    """"厦门蓝狮队" where the chunk names the club "厦门蓝狮": the same club; the word for a team
    after a club's name is no part of it."""
    orgs = {w for _, _, w, f in words if f == "nt"}
    return [(si, offset, word[:-1], flag) if word.endswith("队") and len(word) >= 4 and word[:-1] in orgs
            else (si, offset, word, flag) for si, offset, word, flag in words]


def _person_fragments(words: list[tuple[int, int, str, str]]) -> list[tuple[int, int, str, str]]:
    """A three-character person whose first two characters the chunk names as a person more often
    is that person and a word jieba's guessing ran onto the name ("侯景" + "入", "陆完" + "率",
    "曹爽" + "军"): the third character alone is a verb, adverb, direction or an army."""
    people = Counter(w for _, _, w, f in words if f in _PERSON_FLAGS)
    out = []
    for si, offset, word, flag in words:
        head = word[:2]
        if flag in _PERSON_FLAGS and len(word) == 3 and people[head] > people[word] \
                and (word[2] in _ARMY_CHARS or (dictionary_tag(word[2]) or "n")[:1] in _RUN_ON_TAGS):
            word = head
        out.append((si, offset, word, flag))
    return out


def _title_subject(text: str, starts: list[int], words: list[tuple[int, int, str, str]]
                   ) -> list[tuple[int, int, str, str]]:
    """A page's title line that its text begins by repeating ("于乐" then "于乐，中国足球运动员...",
    "猴面包树" then "猴面包树（学名..."): the page's subject, a name, however jieba cut it."""
    first, _, rest = text.partition("\n")
    title = first.strip()
    body = rest.lstrip()
    if not 2 <= len(title) <= _TITLE_SUBJECT_MAX or not _CJK_WORD_RE.match(title) or not body.startswith(title) \
            or body[len(title):len(title) + 1] not in _SUBJECT_FOLLOWERS \
            or any((w == title or title.startswith(w) and f in _THING_FLAGS) and f in _CJK_TAGS for _, _, w, f in words):
        return words  # named already, or a designation before a kind ("鑫诺一号" of "鑫诺一号通信卫星")
    dotted = any(d in title for d in "·•‧・")
    flag = dictionary_tag(title) or ("nr" if (len(title) <= 3 or dotted) and person_like(title) else "nz")
    if flag not in _CJK_TAGS:
        flag = "nz"  # "猴面包树" (n): the subject of its page
    if any(w == title for _, _, w, _ in words):
        return [(si, a, w, flag if w == title else f) for si, a, w, f in words]
    at = [text.index(title), len(text) - len(body)]
    return words + [(bisect.bisect_right(starts, a) - 1, a, title, flag) for a in at]


# a page's opening words before its bracket ("郭芝苑（），台湾苗栗县人", "曹文埴（），字近薇")
_LEAD_SUBJECT = re.compile(r"^\s*([\u4e00-\u9fff]{2,4})[（(]")


def _lead_subject(text: str, starts: list[int], words: list[tuple[int, int, str, str]]
                  ) -> list[tuple[int, int, str, str]]:
    """A person's name that an encyclopedia page opens with, its dates or other names in brackets
    after it: the page's subject, whole wherever the text writes it, however jieba cut it ("郭芝" +
    "苑", "曹文" + "埴": a rare last character)."""
    m = _LEAD_SUBJECT.match(text)
    if m is None or not person_like(m.group(1)) or dictionary_tag(m.group(1)) not in (None, "nr", "nrfg", "nrt"):
        return words
    name = m.group(1)
    spans = [(m.start(), m.end()) for m in re.finditer(re.escape(name), text)]
    kept = [w for w in words if not any(a < w[1] + len(w[2]) and w[1] < b for a, b in spans)]
    return sorted(kept + [(bisect.bisect_right(starts, a) - 1, a, name, "nr") for a, _ in spans], key=lambda w: (w[0], w[1]))


def chinese_names(text: str, spans: list[tuple[int, int]], starts: list[int], titles: list[tuple[int, int]],
                  cands: dict[str, _Candidate], occurrences: list[tuple[int, int, str]]) -> None:
    """The Chinese names of ``text`` (its sentences: ``spans`` and their ``starts``) added to ``cands`` and
    ``occurrences``; ``titles``: the spans of its quoted titles (``_cjk_titles``)."""
    posseg = _jieba_posseg()
    for start, end in titles:  # one name each, never cut by jieba
        _take_title(text, start, end, starts, cands, occurrences)
    # (sentence, offset in the text, word, tag) outside the titles
    words: list[tuple[int, int, str, str]] = []
    # a firm's coined name seen alone in the chunk ("澄江" in "澄江S7"), or a club's after its city
    # ("建业" of "河南建业"), stands for it
    heads: dict[str, set[str]] = defaultdict(set)
    quotes = _cjk_quotes(text)
    quoted = [(a, b) for a, b, _ in quotes]
    for si, (s, e) in enumerate(spans):
        cuts = [s] + [x for t in quoted if s <= t[0] < e for x in t] + [e]
        # the words between the quotes, and those of each quote that is no title (quoted speech
        # names things too: "不比在尼罗河没有泛滥时..."), each cut on its own
        pieces = sorted([*zip(cuts[::2], cuts[1::2]), *((a, b) for a, b, title in quotes if s <= a < e and not title)])
        for a, b in pieces:
            piece = text[a:b]
            if not _CJK_CHAR.search(piece):
                continue
            pos = 0
            pairs = _whole_orgs(_whole_names(plain([(p.word, p.flag) for p in posseg.cut(piece)])), heads)
            for word, flag in phrases(mended(pairs, _frequency, _CJK_RARE, heads), _frequency):
                at = piece.find(word, pos)
                pos = at + len(word) if at >= 0 else pos
                words.append((si, a + max(at, 0), word, flag))
    words = _lead_subject(text, starts, _title_subject(text, starts, _person_fragments(_team_word_dropped(_one_reading(words)))))
    tags = posseg.dt.word_tag_tab
    for _si, _offset, word, flag in words:  # "河南建业": "建业" alone is the club too
        if flag == "nt" and len(word) >= 4:
            for cut in (2, 3):
                if tags.get(word[:cut]) == "ns" and len(word) - cut >= 2 and word[cut:] not in _CJK_STOP:
                    heads[word[cut:]].add(word)
    for si, offset, word, flag in words:
        etype = _CJK_TAGS.get(flag)
        if len(heads.get(word, ())) == 1 and word not in heads[word]:
            word, etype = next(iter(heads[word])), "organization"
        if etype is None or len(word) < 2 or not _CJK_CHAR.search(word) or word in _CJK_STOP \
                or (flag == "nz" and len(word) == 2 and not _frequency(word)):  # a guess: "和沙", "七科"
            continue
        key = _key(word)
        if not key:
            continue
        cand = _proven_candidate(cands, occurrences, word, key, offset, si)
        cand.votes[etype] += 3
