"""Name candidates: a name found in a chunk, where it occurs and the votes for its type, gathered
by the Latin-script and Chinese name finders and merged once both have run (a one-word name that is
the short form of exactly one longer name is that entity).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

from kbgraph.graph.extract.nlp.sentences import _SPACES
from kbgraph.graph.extract.nlp.words import _EVENT_HEADS, _HOLIDAYS, _ORG_HEADS, _TITLE_ABBR
from kbgraph.graph.keys import normalize_key

_CJK_KEY = re.compile(r"^[\u4e00-\u9fff·•‧・]+$")
# words initials skip ("BBC" is British Broadcasting Corporation, "UoL" aside)
_INITIALS_SKIP = frozenset("of the and & for de du la von van".split())


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


def _link_short_names(cands: dict[str, "_Candidate"], occurrences: list[tuple[int, int, str]]
                      ) -> list[tuple[int, int, str]]:
    """A name that is the short form of exactly one longer name of the chunk is that entity: its
    occurrences and votes move there. Short forms: a first or last word ("Dev" and "Dev Patel",
    "Wren" and "Tobias Wren"; not "California" of "Southern California", whose first word is an
    ordinary one), initials ("CW" and "Conor Wynne", "UK" and "United Kingdom"), and in Chinese the
    last part of a transliterated name ("罗迪奇", "亚历山大·罗迪奇"), the end of an organization's
    name after its place ("建业", "河南建业") or the start of a longer name ("鑫诺", "鑫诺卫星公司")."""
    firms: set[str] = set()
    longer = _short_forms(cands, firms)
    moved: dict[str, str] = {}
    for key, cand in cands.items():
        if key not in longer or len(longer[key]) != 1 or cand.name_part:
            continue
        target = next(iter(longer[key]))
        full = cands[target]
        initials = cand.name.isupper() and " " not in key
        if key in firms:
            full.votes["organization"] += sum(full.votes.values()) + sum(cand.votes.values()) + 1
        elif not initials and full.votes and cand.votes \
                and full.votes.most_common(1)[0][0] != cand.votes.most_common(1)[0][0]:
            continue  # "Harbor" (a place) is not "Tin Harbor"'s short form only because it is its last word
        moved[key] = target
        full.proven = full.proven or cand.proven
        full.votes.update(cand.votes)
        full.sentences = sorted(set(full.sentences) | set(cand.sentences))
        full.first_pos = min(full.first_pos, cand.first_pos)
    for key in moved:
        del cands[key]
    return [(si, off, moved.get(key, key)) for si, off, key in occurrences]


def _short_forms(cands: dict[str, "_Candidate"], firms: set[str] | None = None) -> dict[str, set[str]]:
    """Short key -> the longer keys it may stand for; ``firms`` receives the short keys that are a
    club's or firm's own name after its city (their longer name is an organization)."""
    from kbgraph.graph.extract.nlp.lexicon import ordinary_word

    longer: dict[str, set[str]] = defaultdict(set)
    for key, cand in cands.items():
        parts = key.split()
        if _CJK_KEY.match(key):
            _chinese_short_forms(key, cand, cands, longer, firms if firms is not None else set())
            continue
        # "Mrs. Fezziwig" is not "Fezziwig" (Mr. Fezziwig, titles dropped): titled names take no short form
        if len(parts) < 2 or parts[0].rstrip(".") in _TITLE_ABBR:
            continue
        longer[parts[0]].add(key)
        # "Maharashtra" is not the short form of "Chief Minister of Maharashtra": what follows
        # "of" names another entity (``_of_tail``); "Southern California" is no Californian's name
        person = bool(cand.votes) and cand.votes.most_common(1)[0][0] == "person"
        if parts[-2] != "of" and (person or not ordinary_word(parts[0])):
            longer[parts[-1]].add(key)
        letters = "".join(p[0] for p in parts if p not in _INITIALS_SKIP and p[0].isalpha())
        if 2 <= len(letters) <= 5:
            longer[letters].add(key)
    for key in list(longer):
        if key in cands and " " not in key and not _CJK_KEY.match(key) and len(key) <= 5 \
                and not cands[key].name.isupper() and key not in {k.split()[0] for k in longer[key]} \
                and key not in {k.split()[-1] for k in longer[key]}:
            del longer[key]  # initials stand only for a name written in capitals ("CW", not "Cw")
    return longer


def _chinese_short_forms(key: str, cand: "_Candidate", cands: dict[str, "_Candidate"],
                         longer: dict[str, set[str]], firms: set[str]) -> None:
    top = cand.votes.most_common(1)[0][0] if cand.votes else ""
    tail = _city_named_firm(key, cands) if top != "person" else None
    if tail is not None:  # "北京国安" -> "国安", "天津泰达" -> "泰达": a club or firm named for its city
        longer[tail].add(key)
        firms.add(tail)
    for dot in "·•‧・":
        if dot in key:  # "罗迪奇" or "亚历山大" of "亚历山大·罗迪奇"
            longer[key.rsplit(dot, 1)[1]].add(key)
            longer[key.split(dot, 1)[0]].add(key)
    if len(key) < 3 or top == "geo":
        return
    for cut in range(2, len(key) - 1):
        head, tail = key[:cut], key[cut:]
        if tail in cands and top == "organization" and _votes_top(cands.get(head)) == "geo":
            longer[tail].add(key)  # "河南建业" -> "建业"
        if head in cands and _votes_top(cands[head]) not in ("geo", "person"):
            longer[head].add(key)  # "鑫诺卫星公司" -> "鑫诺"


def _city_named_firm(key: str, cands: dict[str, "_Candidate"]) -> str | None:
    """The tail of a name made of a place the dictionary knows and a coined name that the chunk
    also writes alone ("北京" + "国安", "大连" + "实德"), or None. A place after a place ("北京朝阳")
    is a district, a person's name after it a native (neither is a firm)."""
    from kbgraph.graph.extract.nlp.chinese_cues import dictionary_tag

    for cut in (2, 3):
        head, tail = key[:cut], key[cut:]
        if len(tail) >= 2 and tail in cands and dictionary_tag(head) == "ns" \
                and dictionary_tag(tail) not in ("ns", "nr", "nrfg", "nrt") \
                and _votes_top(cands[tail]) not in ("geo", "person"):
            return tail
    return None


def _votes_top(cand: "_Candidate | None") -> str:
    return cand.votes.most_common(1)[0][0] if cand is not None and cand.votes else ""
