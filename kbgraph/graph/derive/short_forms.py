"""Short forms and spelling variants of names that are not people, linked to the one full name of the
knowledge base they stand for (``short_form_links``), beside the first names of ``aliases.name_links``.

A knowledge base written by many hands names one thing several ways: "St. Louis" and "St Louis",
"HP Designjets" and "HP Designjet", "AES" and "AES Corporation"; Chinese text drops the word for a name's
kind (中超 for 中超联赛, 清华 for 清华大学), and a team's name its city (国奥队 for 中国国奥队) or the
rest of its club's (国安队 for 北京国安). Each variant is a node of its own unless linked, and the
passages that use one form never meet the passages that use the other.

The rules read only the keys the knowledge base holds, their mention counts and their types, and
closed classes of words (legal forms, the Chinese words for an organization's kind), never a list of
names: a variant is linked when exactly one full name fits it (precision first, as for first names),
never when it is a person or a place, and never by a longer name that adds anything else (四川大学
is not 四川大学华西临床医学院, nor 独立战争 土耳其独立战争: a generic word after a place's name is
not the name of what the place holds).
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping

from kbgraph.graph.extract.nlp.chinese_cues import is_league
from kbgraph.graph.extract.nlp.lexicon import ordinary_word

# legal forms that follow a company's own name ("Sky plc", "AES Corporation")
_LEGAL_FORMS = frozenset({
    "inc", "inc.", "incorporated", "ltd", "ltd.", "limited", "plc", "corp", "corp.", "corporation", "company",
    "companies", "co", "co.", "group", "holdings", "llc", "gmbh", "ag", "sa", "s.a.", "n.v.", "nv",
})
# what a team's name adds to its club's (国安队)
_TEAM_WORD = "队"
# the words that say what kind of thing a Chinese name is, after its own part (中超 + 联赛, 清华 +
# 大学, 鑫诺二号 + 通信卫星); a longer name that adds anything else is another thing (四川大学 +
# 华西临床医学院 is a school of the university, 京都大学 + 文学部 a faculty)
_CHINESE_HEADS = ("联赛", "公司", "有限公司", "股份有限公司", "有限责任公司", "集团", "集团公司", "俱乐部",
                  "足球俱乐部", "大学", "通信卫星", "卫星")
# a league's abbreviation names a league: 德甲 + 俱乐部 is any club playing in it, not its full name
_LEAGUE_HEADS = ("联赛",)
# a trade may come between a company's own name and its legal form (丰田 + 汽车 + 有限公司)
_TRADE_CHARS = 2
_DROPPED = re.compile(r"[.'’]")
_SPACED = re.compile(r"[\s\-_·•‧・]+")
_CJK = re.compile(r"^[\u3400-\u9fff]+$")


def _compact(key: str) -> str:
    """A key with dots and apostrophes dropped and hyphens read as spaces ("st. louis" and "st louis",
    "kim jong-un" and "kim jong un"). Spaces stay: "christ church" is not "christchurch"."""
    return _SPACED.sub(" ", _DROPPED.sub("", key)).strip()


def _is_cjk(key: str) -> bool:
    return bool(_CJK.match(key))


def _unique(candidates: Iterable[str], short: str) -> str | None:
    found = {c for c in candidates if c != short}
    return next(iter(found)) if len(found) == 1 else None


def short_form_links(counts: Mapping[str, int], types: Mapping[str, str], person: str, place: str
                     ) -> dict[str, str]:
    """Variant key -> the one full key it stands for.

    ``counts``: every entity key of the knowledge base and its mention count; ``types``: each key's
    main type; ``person`` and ``place``: the configured types of people and places (neither side of
    a link is a person; a place is never a short form, and only stands before a name). The rules,
    each linking only when exactly one key fits:

    - spelling: keys equal once dots and apostrophes are dropped and hyphens read as spaces ("st.
      louis", "st louis"; "kim jong-un", "kim jong un") go to the most mentioned of them;
    - number and article: "hp designjets" -> "hp designjet" (names of several words: "normans" is a
      people, not "norman"), "beatles" -> "the beatles" (the more mentioned of "x" and "the x");
    - a legal form after a name that is no ordinary word: "aes" -> "aes corporation", but "future"
      stays itself beside "future plc";
    - Chinese: a name and the word for its kind (中超 -> 中超联赛, 清华 -> 清华大学, 丰田 -> 丰田汽车
      有限公司); a team after a place (国奥队 -> 中国国奥队), and a team word after a sponsor's name
      (国安队 -> 北京国安, where 北京 is a place of the knowledge base).
    """
    names = _Names({k: counts[k] for k in counts if k and types.get(k) != person}, types, place)
    links = _spelling_links(names.counts)
    for short in sorted(names.counts):
        if short in links or types.get(short) == place:
            continue
        full = names.full_name(short)
        if full is not None and full != short:
            links[short] = full
    return _flattened(links)


def _spelling_links(counts: Mapping[str, int]) -> dict[str, str]:
    groups: dict[str, list[str]] = defaultdict(list)
    for key in counts:
        compact = _compact(key)
        if len(compact) >= 2:
            groups[compact].append(key)
    links: dict[str, str] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        ranked = sorted(members, key=lambda k: (-counts[k], k))
        if counts[ranked[0]] == counts[ranked[1]]:
            continue  # no form is the knowledge base's own
        links.update({m: ranked[0] for m in ranked[1:]})
    return links


class _Names:
    """The knowledge base's keys (people left out) with what the rules look up: Chinese keys in
    order (those a name starts are a range), Chinese keys by what follows a place's name in them,
    and keys by the name before their legal form."""

    def __init__(self, counts: Mapping[str, int], types: Mapping[str, str], place: str) -> None:
        self.counts, self.types, self.place = counts, types, place
        # a longer name may be typed a place by mistake (北京国安 read as 北京's): any type is kept
        self.cjk = sorted(k for k in counts if _is_cjk(k))
        places = {k for k in counts if _is_cjk(k) and types.get(k) == place}
        longest = max((len(p) for p in places), default=0)
        self.after_place: dict[str, set[str]] = defaultdict(set)
        for key in self.cjk:
            for cut in range(1, min(longest, len(key) - 1) + 1):
                if key[:cut] in places:
                    self.after_place[key[cut:]].add(key)
        self.before_form: dict[str, set[str]] = defaultdict(set)
        for key in counts:
            head, _, last = key.rpartition(" ")
            if head and key.isascii() and last in _LEGAL_FORMS:
                self.before_form[head].add(key)

    def full_name(self, short: str) -> str | None:
        if short.isascii():
            # an ordinary word is not a company's own name ("future" of "future plc")
            formal = None if ordinary_word(short) else _unique(self.before_form.get(short, ()), short)
            return self._number_or_article(short) or formal
        return self._chinese_full(short) if _is_cjk(short) else None

    def _number_or_article(self, short: str) -> str | None:
        counts, last = self.counts, short.rsplit(" ", 1)[-1]
        # only a name of words: a single word's plural is often a people's (Normans, of Norman)
        if " " in short and len(last) >= 4 and last.endswith("s") and not last.endswith("ss") and short[:-1] in counts:
            return short[:-1]
        if short.startswith("the ") and short[4:] in counts:
            return short[4:] if counts[short[4:]] > counts[short] else None
        if counts.get(f"the {short}", -1) >= counts[short]:
            return f"the {short}"
        return None

    def _starting(self, prefix: str) -> list[str]:
        at = bisect.bisect_right(self.cjk, prefix)
        out = []
        while at < len(self.cjk) and self.cjk[at].startswith(prefix):
            out.append(self.cjk[at])
            at += 1
        return out

    def _chinese_full(self, short: str) -> str | None:
        full = self._longer_name(short)
        if full is None and short.endswith(_TEAM_WORD) and len(short) >= 3:
            full = self._team_full(short[:-1])
        return full

    def _longer_name(self, short: str) -> str | None:
        """The one longer name that is ``short`` and the word for its kind (联赛, 大学, 公司...), or
        ``short`` after a place when ``short`` is a team (国奥队 -> 中国国奥队); None when there is
        none, or each rule finds another."""
        if len(short) < 2:
            return None
        heads = _LEAGUE_HEADS if is_league(short) else _CHINESE_HEADS
        by_head = _unique((k for k in self._starting(short) if _names_kind(k[len(short):], heads)), short)
        after_place = _unique(self.after_place.get(short, ()), short) if short.endswith(_TEAM_WORD) else None
        if by_head and after_place and by_head != after_place:
            return None
        return by_head or after_place

    def _team_full(self, stem: str) -> str | None:
        """The club a team's name stands for, by its sponsor's name: 国安队 -> 北京国安 when 北京国安
        is the one name that is a place and 国安. A place's team (北京队) is left alone: a city has
        had several clubs, under several sponsors."""
        if self.types.get(stem) == self.place:
            return None
        return _unique(self.after_place.get(stem, ()), stem) or self._longer_name(stem)


def _names_kind(tail: str, heads: Iterable[str] = _CHINESE_HEADS) -> bool:
    """Whether a longer name adds only the word for its kind (one of ``heads``) to a shorter one
    (with a trade before a company's legal form)."""
    return any(tail == head or (head.endswith("公司") and tail.endswith(head) and len(tail) - len(head) <= _TRADE_CHARS)
               for head in heads)


def _flattened(links: Mapping[str, str]) -> dict[str, str]:
    """Each variant straight to a key that is no variant itself (a loop links nothing)."""
    out: dict[str, str] = {}
    for short in links:
        seen, target = {short}, links[short]
        while target in links and target not in seen:
            seen.add(target)
            target = links[target]
        if target not in seen:
            out[short] = target
    return out
