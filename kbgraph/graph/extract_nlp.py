"""Extraction without an LLM ("nlp"): proper names + sentence co-occurrence. No model download.

Entities
* English (and any Latin-script text): runs of capitalized words, with short connectors inside
  ("Bank of England", "Ghost of Christmas Past"), honorifics handled ("Mr. Fezziwig" -> "Fezziwig",
  person; "Mrs. Cratchit" keeps "Mrs." because in family-name-heavy text she is another person),
  possessives cut ("Scrooge's" -> "Scrooge"), acronyms (2-6 capitals). Capitalization at a sentence
  start or after an opening quote proves nothing, so leading stop words are cut and a single word
  seen capitalized only in such positions within the chunk is rejected unless a speech verb is next
  to it ("Marley said"). Runs of two or more all-caps words are headings and are skipped.
* Chinese: jieba part-of-speech tags nr/nrfg/nrt (person), ns (place), nt (organization),
  nz (other proper noun), two characters or more. Latin names inside Chinese text go through the
  English rules. Quoted titles and products (《海棠依旧》, “东篱十五年”, 「」, 『』, "" around CJK;
  at most 20 characters, no sentence punctuation) are one name each, never cut by jieba. A name-like
  head before organization suffixes is one organization ("澄江" + "机器人", "青禾" + "科技" +
  "有限公司"): any name tag before a strong suffix (公司, 集团, 银行, 大学...), a rare name or rare
  two-character noun (jieba's dictionary frequency) before an industry word (科技, 汽车, 乳业...);
  the coined head seen alone in the chunk stands for that firm. jieba's junk names (新一轮, 上市)
  are dropped. None of this touches text without CJK characters.
* Types come from cheap cues, voted per entity within the chunk: honorifics, speech verbs and common
  given names (person); head words like Guild/Bank/University (organization), River/Street/Island or
  "town of X" (geo), War/Festival/Treaty or a holiday (event); else "concept". Then they are mapped
  to the knowledge base's types (``extract.map_entity_type``).
* Description: the first one or two sentences the entity appears in (about 300 characters, cut
  around the mention). Weight: the number of sentences mentioning it.

Relations: two entities in one sentence. With N the chunk's sentences, c(x) the sentences naming x
and c(x,y) those naming both, p = c/N and
    npmi(x,y) = log(p(x,y) / (p(x) p(y))) / -log p(x,y)        (npmi = 1 when p(x,y) = 1)
    weight    = c(x,y) * (1 + npmi(x,y)) / 2
npmi > -1 whenever c(x,y) >= 1, so the weight lies in (0, c(x,y)]: pairs that co-occur more than
their frequencies predict keep most of their count, ubiquitous names that happen to meet keep less.
Only the first 12 entities of a sentence are paired (lists and legal boilerplate would otherwise
add quadratically many pairs). Description: the shared sentence(s), about 300 characters.
"""

from __future__ import annotations

import bisect
import logging
import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kbgraph.graph.extract import (DEFAULT_ENTITY_TYPES, ChunkExtraction, ExtractedEntity, ExtractedRelation,
                                   finalize, map_entity_type)
from kbgraph.graph.keys import normalize_key
from kbgraph.llm.base import Cancelled, CancelCheck

MAX_DESCRIPTION_CHARS = 300
MAX_PAIRED_PER_SENTENCE = 12
MAX_NAME_WORDS = 6

_STOP = frozenset("""
a about above across after afterwards again against ah alas all almost alone along already also although always
am among an and another any anybody anyhow anyone anything anyway anywhere are around as at aye back be because
been before beforehand behind being below beside besides between beyond both but by can cannot could dear did
do does doing done down during each eh either else elsewhere enough even ever every everybody everyone everything
everywhere except far few first for former formerly from further furthermore good great had has have having he
hello hence her here hereafter hereby herein hers herself hey hi him himself his how however hullo hum i if in
indeed instead into is it its itself just last later latter least less let like little lo look many may maybe me
meanwhile might mine more moreover most mostly much must my myself namely nay neither never nevertheless next no
nobody none noone nor not nothing now nowhere o of off often oh ok okay on once one only onto or other others
otherwise ought our ours ourselves out over own perhaps please quite rather really said same say see seem several
shall she should since so some somebody somehow someone something sometime sometimes somewhere soon still such
than that the thee their theirs them themselves then thence there thereafter thereby therefore therein these they
thine this those thou though through throughout thus thy till to together too toward towards twas tis under
unless until up upon us very via was we well were what whatever when whence whenever where whereas wherever
whether which while whither who whoever whole whom whose why will with within without would ye yes yet you your
yours yourself yourselves hallo hah ha ho halloa whoa why aye amen alas bah humbug pooh pshaw
two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen twenty thirty forty fifty
hundred thousand million second third
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday
chapter stave illustration contents title author note footnote figure table section page volume part appendix
end start beginning introduction preface index copyright license
thanks thank thx sorry yeah yep yup nope lol omg wow haha hmm oops congrats congratulations cheers welcome
great nice cool sure looking hey hiya morning evening afternoon night tonight today tomorrow yesterday
asap fyi btw tbd eta eod imo imho tl dr dm pm am ps nb aka ok ooo wfh rsvp faq re fwd cc bcc
mondays tuesdays wednesdays thursdays fridays saturdays sundays weekend weekends
jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thurs fri sat sun
""".split())
# words that name a role in front of a name or an organization ("CEO of Corvid Interactive"): cut, no vote
_ROLES = frozenset("ceo cto cfo coo cmo vp chairman chairwoman director head founder manager".split())
# the sentence is licence, legal or distribution boilerplate (a book's licence, a site's footer) when it
# holds two of these: its names (the licensor, the foundation) would otherwise become top entities
_BOILERPLATE = re.compile(
    r"licen[cs]e|copyright|warrant|trademark|liabilit|redistribut|royalt|donation|terms of use|"
    r"all rights reserved|e-?books?\b|e-?text|project gutenberg|https?://|www\.|public domain|disclaim|"
    r"permission|refund|electronic works?", re.I)
# a table-of-contents line: a chapter word, then a title, then a page number or dotted leader
_CONTENTS_LINE = re.compile(r"(?im)^[ \t]*(?:chapter|stave|part|book|section|appendix|[ivxlc]+\.)\b[^\n]{0,80}"
                            r"(?:\.{3,}|\s\d{1,4})[ \t]*$")
# a speaker at the start of a chat or script line: "AdamSmith: ...", "Li Hua: ...", "[10:02] Nora Lind: ..."
_SPEAKER = re.compile(r"(?m)^[ \t]*(?:\[[^\]\n]{1,30}\][ \t]*)?<?([A-Z][\w'’.\-]*(?:[ \t][A-Z][\w'’.\-]*){0,2})>?:[ \t]")
# a quoted title: "Moonlit Orchard", “Overwatch 3”, 'Keeper's Light'
_QUOTED = re.compile(r"[\"“]([A-Z0-9][^\"“”\n]{1,60}?)[\"”]")
# CamelCase handles and names ("LiHua", "JonasVale"), not Mc/Mac names ("McRae")
_CAMEL = re.compile(r"^(?!Mc|Mac[A-Z])[A-Z][a-z]+(?:[A-Z][a-z]+)+$")
_HEADING_MAX_WORDS = 8
_CONNECTORS = frozenset("of the de von van der den da di du la le del des".split())
_TITLES_DROP = frozenset("mr mister dr doctor prof professor sir captain capt uncle aunt master general colonel "
                         "col president rev reverend sgt sergeant lieutenant lt".split())
_TITLES_KEEP = frozenset("mrs miss ms madame mme mlle lady lord king queen prince princess".split())
_TITLE_ABBR = _TITLES_DROP | _TITLES_KEEP | {"st"}
_ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr prof mt no vs etc co inc ltd capt col gen lt sgt rev fig vol".split())
_SPEECH = frozenset("said says say cried replied asked answered exclaimed returned observed whispered shouted "
                    "muttered added continued rejoined inquired enquired remarked declared murmured repeated "
                    "thought laughed sighed".split())
_ORG_HEADS = frozenset("guild company co corporation corp inc ltd llc plc bank university college school council "
                       "society association institute institution foundation committee party church ministry "
                       "department agency club union army navy court parliament academy museum group press "
                       "commission federation league office bureau board trust firm partners brothers".split())
_ORG_FIRST = frozenset("university bank college institute house church ministry department order".split())
_GEO_HEADS = frozenset("city river street st road lane square mountain mountains mount lake sea ocean island islands "
                       "bay valley county province state kingdom republic hill hills bridge park forest desert coast "
                       "town village harbour harbor port strait gulf peninsula avenue alley market court states "
                       "cathedral abbey castle palace".split())
_GEO_FIRST = frozenset("mount mt lake port cape fort isle gulf".split())
_GEO_NOUNS = frozenset("town city village port county kingdom province state island river isle duchy".split())
_GEO_PREPS = frozenset("in near across throughout".split())
_EVENT_HEADS = frozenset("war wars festival battle treaty revolution conference summit games olympics election "
                         "crisis cup championship eve fair expedition massacre rebellion uprising congress "
                         "ceremony coronation siege day".split())
_HOLIDAYS = frozenset("christmas easter halloween thanksgiving hanukkah ramadan diwali passover pentecost "
                      "michaelmas whitsun".split())
_FIRST_NAMES = frozenset("""
adam alan albert alex alice amy andrew ann anna anne arthur belle ben benjamin beth betty bill billy bob carl
caroline catherine charles charlie charlotte chris christopher clara daniel david dick edward elizabeth ellen emily
emma eric fanny frank fred frederick george harry helen henry jack jacob james jane jenny jim joan joe john joseph
kate katherine laura lily lucy margaret maria mark martha mary matthew michael molly nancy ned nell oliver paul
peter philip polly richard robert rose ruth sally sam samuel sarah simon sophia steve susan thomas tim tom tony
victoria walter william aaron ahmed ali amir ana andrea angela anton astrid carlos chen dev diego elena elif
felix fatima gwen hana hans ines ivan jonas juan julia kenji li lin luca lucas malcolm maria marta mei mohammed
nina nora olga omar owen pablo priya raj rosa sofia sven tomasz wei yuki zara
""".split())
_CJK_SURNAMES = frozenset("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁"
                          "任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严"
                          "覃武戴莫孔向汤欧阳司马上官诸葛")
_CJK_TAGS = {"nr": "person", "nrfg": "person", "nrt": "person", "ns": "geo", "nt": "organization", "nz": "concept"}
# words that end an organization's name. After any name-like head ("中国银行", "北京大学") they make one:
_CJK_ORG_SUFFIXES = frozenset("""
公司 有限公司 股份有限公司 集团 银行 大学 学院 研究院 研究所 医院 控股 股份 基金会 协会 商会 实验室
""".split())
# ...after a rare head only (a firm's coined name, "澄江机器人", "青禾科技"): a common word or a big place
# before them is a description ("工业机器人", "中国汽车市场"), not a firm
_CJK_INDUSTRY_SUFFIXES = frozenset("""
科技 技术 电子 能源 汽车 机器人 生物 医药 药业 制药 传媒 智能 医疗 教育 游戏 音乐 旅游 快递 物流 食品
钢铁 家居 光电 半导体 电池 纺织 航天 航空 无人机 风电 农牧 乳业 酒业 影业 种业 茶业 水务 重工 航运 软件
网络 通信 化工 材料 地产 置业 证券 保险 基金 资本 投资 电器 电气 环保 实业 矿业 建工 动力 精密
微电子 信息 数据 电力 燃气 服饰 家电 文化 体育 影视 咨询 物业 新材料 农业 牧业 渔业 商贸 贸易 电商
""".split()) | _CJK_ORG_SUFFIXES
# 的 and verbs that take a kind of product as their object ("推出扫地机器人", "专注冷链物流")
_CJK_MAKING_VERBS = frozenset("的 推出 发布 研发 开发 生产 制造 量产 销售 采用 使用 部署 专注 布局 进军 发展 加快".split())
_CJK_NAME_TAGS = frozenset("nr nrfg nrt ns nz nt".split())
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
_CJK_SENTENCE_PUNCT = re.compile(r"[。！？；，、：,;!?:]")

_LATIN = "A-Za-zÀ-ÖØ-öø-ÿĀ-ɏ"
_TOKEN = re.compile(rf"[{_LATIN}]+(?:['’\-][{_LATIN}]+)*")  # "--" (a dash) splits words
_CJK_CHAR = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf]")
# a blank line, a sentence end, or the end of a heading/title line (a short line with no closing
# punctuation, e.g. "Bubye River\nThe Bubye River is..."), so a title never runs into its text;
# hard-wrapped prose lines are longer and keep joining ("Ebenezer\nScrooge")
_BOUNDARY = re.compile(r"\n[ \t]*\n|\n(?=[ \t]*(?:\[[^\]\n]{1,30}\][ \t]*)?<?[A-Z][\w'’.\-]*(?:[ \t][A-Z][\w'’.\-]*){0,2}>?:[ \t])"
                       r"|(?m:^\S[^\n]{0,59}(?<![.,;:!?\-—–\s])(?=\n[ \t]*[\"'“‘(#*]*[A-Z\d\u4e00-\u9fff]))"
                       r"|[.!?…]+[\"'”’)\]_]*(?=\s|$)|[。！？；]+[”’」』\"]*")
_WS_GAP = re.compile(r"^\s+$")
_PLAIN_GAP = re.compile(r"^[\s,]+$")
_TITLE_GAP = re.compile(r"^\.?\s+$")
_CONTRACTION = re.compile(r"['’](t|ll|re|ve|d|m)$", re.I)
_POSSESSIVE = re.compile(r"['’]s$", re.I)
_SPACES = re.compile(r"\s+")


@dataclass
class _Candidate:
    name: str
    key: str
    sentences: list[int] = field(default_factory=list)
    first_pos: int = 0
    votes: Counter[str] = field(default_factory=Counter)
    proven: bool = False  # seen where capitalization means a name
    name_part: bool = False  # seen after "of" in a longer name: its own entity, never that name's short form


def _proven_candidate(cands: dict[str, _Candidate], occurrences: list[tuple[int, int, str]], name: str, key: str,
                      pos: int, sentence: int) -> _Candidate:
    """The candidate of ``key`` (made with ``name`` at ``pos`` if new), proven a name, seen in ``sentence``."""
    cand = cands.get(key)
    if cand is None:
        cand = cands[key] = _Candidate(name=name, key=key, first_pos=pos)
    cand.proven = True
    if not cand.sentences or cand.sentences[-1] != sentence:
        cand.sentences.append(sentence)
    occurrences.append((sentence, pos, key))
    return cand


@lru_cache(maxsize=65536)
def _key(name: str) -> str:
    return normalize_key(name)


@lru_cache(maxsize=1)
def _jieba_posseg() -> Any:
    import jieba
    import jieba.posseg as posseg
    jieba.setLogLevel(logging.WARNING)
    return posseg


def _heading_lines(text: str, spans: list[tuple[int, int]]) -> list[int]:
    """The sentences that are title lines: a short line of its own with no closing punctuation."""
    out = []
    for si, (start, end) in enumerate(spans):
        line = text[start:end].strip()
        if (line and "\n" not in line and len(line.split()) <= _HEADING_MAX_WORDS and line[-1] not in ".!?…:;,"
                and text[end:end + 1] == "\n" and (start == 0 or text[start - 1] == "\n")):
            out.append(si)
    return out


def _of_tail(toks: list[tuple[str, int, int]], run: list[int]) -> list[int]:
    """The name after the first "of" inside a name ("Bank of England" -> England), connectors
    ("the") dropped; empty when there is none."""
    for pos in range(1, len(run) - 1):
        if toks[run[pos]][0] == "of":
            tail = run[pos + 1:]
            while tail and toks[tail[0]][0].lower() in _CONNECTORS:
                tail = tail[1:]
            return tail
    return []


def _name_and_its_part(x: str, y: str) -> bool:
    """One key is the other's part after "of" ("flood of varrow", "varrow")."""
    return any(long.endswith((f" of {short}", f" of the {short}")) for long, short in ((x, y), (y, x)))


def _sentences(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        mark = m.group(0)
        if mark[0] in ".!?…":
            word = re.search(rf"([{_LATIN}]+)$", text[max(start, m.start() - 12):m.start()])
            if mark == "." and word and (word.group(1).lower() in _ABBREVIATIONS
                                         or (len(word.group(1)) == 1 and word.group(1).isupper())):
                continue
            nxt = re.match(r"\s*[\"'“‘(\[_*]*(.)", text[m.end():m.end() + 12])
            if nxt and not (nxt.group(1).isupper() or nxt.group(1).isdigit() or _CJK_CHAR.match(nxt.group(1))):
                continue  # '"How now?" said Scrooge' goes on
            end = m.end()
        elif mark[0] == "\n":
            end = m.start()
        elif "\n" not in mark and m.end() < len(text) and text[m.end()] == "\n":  # a heading line
            end = m.end()
        else:
            end = m.end()
        if text[start:end].strip():
            spans.append((start, end))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


def _without_boilerplate(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with licence/legal sentences and table-of-contents lines blanked (same length, so
    offsets hold): names found there (the licensor, chapter titles) are not what the text is about."""
    blanks = [(start, end) for start, end in spans
              if len({m.group(0).lower()[:6] for m in _BOILERPLATE.finditer(text, start, end)}) >= 2]
    blanks += [m.span() for m in _CONTENTS_LINE.finditer(text)]
    if not blanks:  # most texts: no copy
        return text
    chars = list(text)
    for start, end in blanks:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _quoted_titles(text: str) -> list[tuple[int, int]]:
    """Spans of quoted titles: at most six words, no sentence punctuation, most words capitalized or
    numbers ("Moonlit Orchard", "Overwatch 3"); quoted speech ("How now?", "Thanks a lot") is not one."""
    found = []
    for m in _QUOTED.finditer(text):
        inner = m.group(1).strip()
        words = inner.split()
        if not words or len(words) > 6 or re.search(r"[.!?,;:]$|[!?;]", inner):
            continue
        if words[0].lower() in _STOP:
            continue
        content = [w for w in words if w.lower() not in _CONNECTORS and w.lower() not in ("a", "an", "and", "or")]
        if not content or sum(w[0].isupper() or w[0].isdigit() for w in content) < max(1, len(content)):
            continue
        found.append((m.start(1), m.start(1) + len(m.group(1).rstrip())))
    return found


def _link_short_names(cands: dict[str, "_Candidate"], occurrences: list[tuple[int, int, str]]
                      ) -> list[tuple[int, int, str]]:
    """A one-word name that is the first or last word of exactly one longer name of the chunk ("Dev"
    and "Dev Patel", "Wren" and "Tobias Wren") is that entity: its occurrences and votes move there."""
    longer: dict[str, set[str]] = defaultdict(set)
    for key in cands:
        parts = key.split()
        # "Mrs. Fezziwig" is not "Fezziwig" (Mr. Fezziwig, titles dropped): titled names take no short form
        if len(parts) >= 2 and parts[0].rstrip(".") not in _TITLE_ABBR:
            longer[parts[0]].add(key)
            # "Maharashtra" is not the short form of "Chief Minister of Maharashtra": what follows
            # "of" names another entity (``_of_tail``)
            if parts[-2] != "of":
                longer[parts[-1]].add(key)
    moved: dict[str, str] = {}
    for key, cand in cands.items():
        if " " in key or key not in longer or len(longer[key]) != 1 or cand.name_part:
            continue
        target = next(iter(longer[key]))
        full = cands[target]
        if full.votes and cand.votes and full.votes.most_common(1)[0][0] != cand.votes.most_common(1)[0][0]:
            continue  # "Harbor" (a place) is not "Tin Harbor"'s short form only because it is its last word
        moved[key] = target
        full.proven = full.proven or cand.proven
        full.votes.update(cand.votes)
        full.sentences = sorted(set(full.sentences) | set(cand.sentences))
        full.first_pos = min(full.first_pos, cand.first_pos)
    for key in moved:
        del cands[key]
    return [(si, off, moved.get(key, key)) for si, off, key in occurrences]


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
    found = []
    for m in _CJK_QUOTED.finditer(text):
        group = next(g for g in range(1, 6) if m.group(g) is not None)
        inner = m.group(group)
        title = inner.strip()
        if not _CJK_CHAR.search(title) or len(title) > _CJK_TITLE_MAX or _CJK_SENTENCE_PUNCT.search(title):
            continue
        start = m.start(group) + len(inner) - len(inner.lstrip())
        found.append((start, start + len(title)))
    return found


@lru_cache(maxsize=1)
def _jieba_frequencies() -> dict[str, int]:
    import jieba
    jieba.initialize()
    return jieba.dt.FREQ


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
        if end > i + width and flag != "nt" and not described and _org_head(head, "nr" if width == 2 else flag,
                                                                             strong):
            org = head + "".join(p[0] for p in pairs[i + width:end])
            if glued:
                out.append((word[0], "c"))
            out.append((org, "nt"))
            if heads is not None and _jieba_frequencies().get(head, 0) < _CJK_RARE:
                heads[head].add(org)
            i = end
            continue
        out.append((word, flag))
        i += 1
    return out


def _shouting(toks: list[tuple[str, int, int]], i: int) -> bool:
    return 0 <= i < len(toks) and len(toks[i][0]) >= 2 and toks[i][0].isupper()


def _excerpt(sentence: str, focus: int, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """The sentence squashed to one line, cut to about ``limit`` characters around ``focus``."""
    s = sentence.strip()
    if len(s) <= limit:
        return _SPACES.sub(" ", s)
    begin = max(0, min(focus - limit // 3, len(s) - limit))
    if begin > 0:
        sp = s.find(" ", begin)
        begin = sp + 1 if 0 <= sp < begin + 30 else begin
    end = begin + limit
    if end < len(s):
        sp = s.rfind(" ", begin, end)
        end = sp if sp > begin + limit // 2 else end
    out = _SPACES.sub(" ", s[begin:end].strip())
    return ("…" if begin > 0 else "") + out + ("…" if end < len(s) else "")


class NLPExtractor:
    method = "nlp"

    def __init__(self, entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES,
                 max_description_chars: int = MAX_DESCRIPTION_CHARS) -> None:
        self.entity_types = list(entity_types) or list(DEFAULT_ENTITY_TYPES)
        self.max_description_chars = max_description_chars

    # -- entry -----------------------------------------------------------------------------------
    def extract(self, text: str, *, cancel: CancelCheck | None = None) -> ChunkExtraction:
        if cancel is not None and cancel():
            raise Cancelled("extraction cancelled")
        if not text.strip():
            return ChunkExtraction()
        spans, cands, occurrences, keep = self._names(text)
        self._type_by_tokens(cands, keep)
        return self._build(text, spans, cands, keep, occurrences)

    def names(self, text: str) -> list[str]:
        """The proper names ``extract`` would list for ``text``, in order of first mention, without
        typing, descriptions or relations: a cheap, model-free list of what the text names (the
        LLM extractor checks its first pass against it before spending a gleaning round)."""
        if not text.strip():
            return []
        _, cands, _, keep = self._names(text)
        return [cands[k].name for k in sorted(keep, key=lambda k: (cands[k].first_pos, k))]

    def _names(self, text: str) -> tuple[list[tuple[int, int]], dict[str, _Candidate],
                                         list[tuple[int, int, str]], set[str]]:
        spans = _sentences(text)
        starts = [s for s, _ in spans]
        names_text = _without_boilerplate(text, spans)
        cands: dict[str, _Candidate] = {}
        # (sentence index, char offset, key) of every accepted-or-pending occurrence
        occurrences: list[tuple[int, int, str]] = []
        cjk = _CJK_CHAR.search(names_text) is not None
        cjk_titles = _cjk_titles(names_text) if cjk else []
        self._latin(names_text, spans, starts, cands, occurrences, cjk_titles)
        if cjk:
            self._chinese(names_text, spans, starts, cjk_titles, cands, occurrences)
        occurrences = _link_short_names(cands, occurrences)
        keep = {k for k, c in cands.items() if c.proven}
        return spans, cands, occurrences, keep

    # -- Latin script ----------------------------------------------------------------------------
    def _latin(self, text: str, spans: list[tuple[int, int]], starts: list[int],
               cands: dict[str, _Candidate], occurrences: list[tuple[int, int, str]],
               skip: list[tuple[int, int]]) -> None:
        """``skip``: spans of Chinese titles, whose Latin parts ("华岳QY300") are no names of their own."""
        toks = [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)]
        if not toks:
            return
        speakers = {m.start(1) for m in _SPEAKER.finditer(text)}
        titles = _quoted_titles(text)
        for start, end in titles:
            self._take_title(text, start, end, starts, cands, occurrences)
        sent_of = [bisect.bisect_right(starts, s) - 1 for _, s, _ in toks]
        lower_words = {t.lower() for t, _, _ in toks if t[0].islower()}
        initial = [False] * len(toks)
        for i, (_tok, s, _e) in enumerate(toks):
            si = sent_of[i]
            if si < 0:
                continue
            if i == 0 or sent_of[i - 1] != si:
                initial[i] = not re.search(rf"[{_LATIN}\u4e00-\u9fff]", text[spans[si][0]:s])
                continue
            gap = text[toks[i - 1][2]:s].rstrip("_*([ ")
            initial[i] = gap.endswith(("\"", "“", "‘", ":")) or (gap.endswith("'") and gap[:-1][-1:].isspace())
        # a title line names what follows ("Maharashtra\nThe politics of the state..."): its words are
        # capitalized as names, not by their position, unless the text also writes them in lower case
        for si in _heading_lines(text, spans):
            for i in range(bisect.bisect_left(sent_of, si), bisect.bisect_right(sent_of, si)):
                if toks[i][0].lower() not in lower_words:
                    initial[i] = False

        def capital(i: int) -> bool:
            tok = toks[i][0]
            return tok[0].isupper() and not _CONTRACTION.search(tok)

        noninitial_caps: set[str] = set()
        runs: list[list[int]] = []
        i = 0
        n = len(toks)
        while i < n:
            if not capital(i):
                i += 1
                continue
            run = [i]
            j = i
            while True:
                if _POSSESSIVE.search(toks[j][0]):
                    break  # "Marley's Ghost": the possessive ends the name
                k = j + 1
                if k >= n or sent_of[k] != sent_of[j]:
                    break
                gap = text[toks[j][2]:toks[k][1]]
                title = toks[j][0].lower() in _TITLE_ABBR or (
                    len(toks[j][0]) == 1 and toks[j][0].isupper())
                if not (_WS_GAP.match(gap) or (title and _TITLE_GAP.match(gap))):
                    break
                if capital(k):
                    run.append(k)
                    j = k
                    continue
                # connectors ("of", "the") only inside a name: the next word must be capitalized again
                m = k
                while m < n and toks[m][0] in _CONNECTORS and sent_of[m] == sent_of[j] and m - k < 2 \
                        and _WS_GAP.match(text[toks[m - 1][2]:toks[m][1]]):
                    m += 1
                if m > k and m < n and capital(m) and sent_of[m] == sent_of[j] \
                        and _WS_GAP.match(text[toks[m - 1][2]:toks[m][1]]):
                    run.extend(range(k, m + 1))
                    j = m
                    continue
                break
            runs.append(run)
            i = j + 1

        for run in runs:
            for idx in run:
                if not initial[idx] and capital(idx):
                    noninitial_caps.add(_POSSESSIVE.sub("", toks[idx][0]))

        for run in runs:
            if any(start <= toks[run[0]][1] < end for start, end in titles + skip):
                continue  # a word of a quoted title: the title is the name
            self._take_run(text, toks, run, initial, sent_of, lower_words, noninitial_caps, cands, occurrences,
                           toks[run[0]][1] in speakers)
            tail = _of_tail(toks, run)
            if tail:  # "Chief Minister of Maharashtra", "History of Mississippi" mention Maharashtra, Mississippi
                self._take_run(text, toks, tail, initial, sent_of, lower_words, noninitial_caps, cands, occurrences,
                               name_part=True)

    @staticmethod
    def _take_title(text: str, start: int, end: int, starts: list[int], cands: dict[str, _Candidate],
                    occurrences: list[tuple[int, int, str]]) -> None:
        """A quoted title ("Moonlit Orchard", "Overwatch 3") as one name, typed by its head word if any."""
        name = _SPACES.sub(" ", text[start:end]).strip()
        key = _key(name)
        if not key:
            return
        cand = _proven_candidate(cands, occurrences, name, key, start, bisect.bisect_right(starts, start) - 1)
        head = name.split()[-1].lower()
        if head in _EVENT_HEADS or head in _HOLIDAYS:
            cand.votes["event"] += 3
        elif head in _ORG_HEADS:
            cand.votes["organization"] += 3

    def _take_run(self, text: str, toks: list[tuple[str, int, int]], run: list[int], initial: list[bool],
                  sent_of: list[int], lower_words: set[str], noninitial_caps: set[str],
                  cands: dict[str, _Candidate], occurrences: list[tuple[int, int, str]],
                  speaker: bool = False, name_part: bool = False) -> None:
        words = [_POSSESSIVE.sub("", toks[i][0]) for i in run]
        idxs = list(run)
        caps = [w for w in words if len(w) >= 2 and w.isupper()]
        if len(caps) >= 2:
            return  # "MARLEY'S GHOST", "A CHRISTMAS CAROL": a heading
        person = 3 if speaker else 0  # "AdamSmith: ..." at the start of a chat line
        # a role in front: "CEO of Corvid Interactive" is Corvid Interactive (the connector goes below)
        while len(idxs) > 1 and words[0].lower() in _ROLES:
            words, idxs = words[1:], idxs[1:]
        # honorifics
        while idxs and words[0].lower() in _TITLES_DROP and len(idxs) > 1:
            person += 3
            words, idxs = words[1:], idxs[1:]
        if words and words[0].lower() in _TITLES_KEEP:
            person += 3 if len(words) > 1 else 0
        # leading stop words, and words that are common words capitalized by their position
        while words and (words[0].lower() in _STOP or words[0].lower() in _CONNECTORS
                         or (initial[idxs[0]] and words[0].lower() in lower_words and len(words) > 1)):
            words, idxs = words[1:], idxs[1:]
        while words and (words[-1].lower() in _STOP or words[-1].lower() in _CONNECTORS):
            words, idxs = words[:-1], idxs[:-1]
        if not words or len(words) > MAX_NAME_WORDS:
            return
        if len(words) == 1:
            w = words[0]
            if len(w) < 2 or w.lower() in _TITLE_ABBR:
                return
            if w.isupper() and (len(w) > 6 or _shouting(toks, run[0] - 1) or _shouting(toks, run[-1] + 1)):
                return  # not an acronym but a word of an all-caps heading ("MARLEY'S GHOST")
        first, last = idxs[0], idxs[-1]
        end = toks[last][2] - (2 if _POSSESSIVE.search(toks[last][0]) else 0)
        name = _SPACES.sub(" ", text[toks[first][1]:end])
        if len(words) == 1 and _CAMEL.match(name):
            name = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name)  # "LiHua" is Li Hua: one key for both spellings
        key = _key(name)
        if not key:
            return
        # a speech verb right next to the name, with no quote between: 'said Scrooge', 'Scrooge said'
        prev_tok = toks[run[0] - 1] if run[0] > 0 else None
        next_tok = toks[run[-1] + 1] if run[-1] + 1 < len(toks) else None
        if (prev_tok and prev_tok[0].lower() in _SPEECH and _PLAIN_GAP.match(text[prev_tok[2]:toks[run[0]][1]])) or (
                next_tok and next_tok[0].lower() in _SPEECH and _PLAIN_GAP.match(text[toks[run[-1]][2]:next_tok[1]])):
            person += 2
        proven = (len(words) > 1 or not initial[first] or words[0] in noninitial_caps or person > 0
                  or (words[0].isupper() and len(words[0]) >= 2))
        cand = cands.get(key)
        if cand is None:
            cand = cands[key] = _Candidate(name=name, key=key, first_pos=toks[first][1])
        cand.proven = cand.proven or proven
        cand.name_part = cand.name_part or name_part
        si = sent_of[first]
        if not cand.sentences or cand.sentences[-1] != si:
            cand.sentences.append(si)
        occurrences.append((si, toks[first][1], key))
        votes = cand.votes
        if person:
            votes["person"] += person
        low = [w.lower() for w in words]
        head = low[0] if len(low) > 2 and low[1] == "of" else low[-1]  # "Bank of England": the head is "bank"
        if head in _ORG_HEADS or head in _ORG_FIRST:
            votes["organization"] += 3
        if head in _GEO_HEADS or low[0] in _GEO_FIRST:
            votes["geo"] += 3
        if head in _EVENT_HEADS or head in _HOLIDAYS:
            votes["event"] += 3
        if any(w in _FIRST_NAMES for w in low):
            votes["person"] += 2
        before = [toks[j][0].lower() for j in range(max(0, run[0] - 2), run[0])]
        # only a preposition right before the name governs it: in "In 790 Mira Castell founded" the
        # tokens (words only) put "In" next to the name, but it belongs to the year
        governs = bool(prev_tok) and _WS_GAP.match(text[prev_tok[2]:toks[run[0]][1]]) is not None
        if len(before) == 2 and before[1] == "of" and before[0] in _GEO_NOUNS:
            votes["geo"] += 3
        elif before and before[-1] in _GEO_PREPS and governs:
            votes["geo"] += 1
        after = [toks[j][0].lower() for j in range(run[-1] + 1, min(len(toks), run[-1] + 3))]
        if after[:1] in (["died"], ["married"]) or after == ["was", "born"]:  # only people are born and die
            votes["person"] += 2
        if len(words) == 1 and words[0].isupper():
            votes["organization"] += 1

    # -- Chinese ---------------------------------------------------------------------------------
    def _chinese(self, text: str, spans: list[tuple[int, int]], starts: list[int], titles: list[tuple[int, int]],
                 cands: dict[str, _Candidate], occurrences: list[tuple[int, int, str]]) -> None:
        posseg = _jieba_posseg()
        for start, end in titles:  # one name each, never cut by jieba
            self._take_title(text, start, end, starts, cands, occurrences)
        # (sentence, offset in the text, word, tag) outside the titles
        words: list[tuple[int, int, str, str]] = []
        # a firm's coined name seen alone in the chunk ("澄江" in "澄江S7") stands for the firm
        heads: dict[str, set[str]] = defaultdict(set)
        for si, (s, e) in enumerate(spans):
            cuts = [s] + [x for t in titles if s <= t[0] < e for x in t] + [e]
            for a, b in zip(cuts[::2], cuts[1::2]):
                piece = text[a:b]
                if not _CJK_CHAR.search(piece):
                    continue
                pos = 0
                for word, flag in _whole_orgs(_whole_names([(p.word, p.flag) for p in posseg.cut(piece)]), heads):
                    at = piece.find(word, pos)
                    pos = at + len(word) if at >= 0 else pos
                    words.append((si, a + max(at, 0), word, flag))
        for si, offset, word, flag in words:
            etype = _CJK_TAGS.get(flag)
            if etype is None or len(word) < 2 or not _CJK_CHAR.search(word) or word in _CJK_STOP:
                continue
            if len(heads.get(word, ())) == 1:
                word, etype = next(iter(heads[word])), "organization"
            key = _key(word)
            if not key:
                continue
            cand = _proven_candidate(cands, occurrences, word, key, offset, si)
            cand.votes[etype] += 3

    # -- typing, relations, output -----------------------------------------------------------------
    @staticmethod
    def _type_by_tokens(cands: dict[str, _Candidate], keep: set[str]) -> None:
        """A name sharing a word with a person's name is a person too ("Bob" -> "Bob Cratchit")."""
        person_words: set[str] = set()
        for k in keep:
            c = cands[k]
            if c.votes and c.votes.most_common(1)[0][0] == "person":
                person_words.update(w for w in c.key.split() if w not in _TITLES_KEEP and w not in _CONNECTORS
                                    and w.rstrip(".") not in _TITLE_ABBR)
        for k in keep:
            c = cands[k]
            if not c.votes and any(w in person_words for w in c.key.split()):
                c.votes["person"] += 1

    def _type(self, cand: _Candidate) -> str:
        if cand.votes:
            # ties break on a fixed order, so the result does not depend on dict order
            order = ("person", "organization", "geo", "event", "concept")
            best = max(cand.votes.items(), key=lambda kv: (kv[1], -order.index(kv[0]) if kv[0] in order else -9))
            guessed = best[0]
        else:
            guessed = "concept"
        return map_entity_type(guessed, self.entity_types)

    def _build(self, text: str, spans: list[tuple[int, int]], cands: dict[str, _Candidate], keep: set[str],
               occurrences: list[tuple[int, int, str]]) -> ChunkExtraction:
        limit = self.max_description_chars
        first_offset: dict[tuple[int, str], int] = {}
        by_sentence: dict[int, list[str]] = defaultdict(list)
        for si, off, key in sorted(occurrences):
            if key not in keep:
                continue
            if (si, key) not in first_offset:
                first_offset[(si, key)] = off
                by_sentence[si].append(key)

        def sentence_excerpt(si: int, key: str) -> str:
            s, e = spans[si]
            return _excerpt(text[s:e], first_offset[(si, key)] - s, limit)

        entities: list[ExtractedEntity] = []
        sentence_count: Counter[str] = Counter()
        for si, keys in by_sentence.items():
            sentence_count.update(keys)
        ordered = sorted(keep, key=lambda k: (cands[k].first_pos, k))
        for key in ordered:
            cand = cands[key]
            sents = sorted({si for si, k in first_offset if k == key})
            desc = sentence_excerpt(sents[0], key) if sents else ""
            if len(sents) > 1 and len(desc) < limit // 2:
                desc = f"{desc} {sentence_excerpt(sents[1], key)}"[:limit + 2]
            entities.append(ExtractedEntity(name=cand.name, type=self._type(cand), description=desc,
                                            weight=float(max(1, sentence_count[key]))))

        n_sent = max(1, len(spans))
        pair_sents: dict[tuple[str, str], list[int]] = defaultdict(list)
        for si in sorted(by_sentence):
            keys = by_sentence[si][:MAX_PAIRED_PER_SENTENCE]
            for a in range(len(keys)):
                for b in range(a + 1, len(keys)):
                    x, y = keys[a], keys[b]
                    if _name_and_its_part(x, y):
                        continue  # "Flood of Varrow" and Varrow: the name says it, no fact of the text
                    pair = (x, y) if x < y else (y, x)
                    pair_sents[pair].append(si)
        relations: list[ExtractedRelation] = []
        for (x, y), sents in sorted(pair_sents.items(), key=lambda kv: (kv[1][0], kv[0])):
            cxy = len(sents)
            pxy = cxy / n_sent
            px, py = sentence_count[x] / n_sent, sentence_count[y] / n_sent
            npmi = 1.0 if pxy >= 1.0 else math.log(pxy / (px * py)) / -math.log(pxy)
            weight = cxy * (1.0 + max(-1.0, min(1.0, npmi))) / 2.0
            first = sents[0]
            focus = min(first_offset[(first, x)], first_offset[(first, y)])
            s, e = spans[first]
            desc = _excerpt(text[s:e], focus - s, limit)
            for si in sents[1:]:
                more = _SPACES.sub(" ", text[spans[si][0]:spans[si][1]].strip())
                if len(desc) + 1 + len(more) > limit:
                    break
                desc = f"{desc} {more}"
            relations.append(ExtractedRelation(source=cands[x].name, target=cands[y].name, description=desc,
                                               keywords=[], weight=max(weight, 1e-6)))
        return finalize(entities, relations, self.entity_types)
