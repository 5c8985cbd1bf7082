"""Latin-script names: runs of capitalized words, with short connectors inside ("Bank of England",
"Ghost of Christmas Past"), honorifics handled ("Mr. Fezziwig" -> "Fezziwig", person; "Mrs. Cratchit"
keeps "Mrs." because in family-name-heavy text she is another person), possessives cut ("Scrooge's"
-> "Scrooge"), acronyms (2-6 capitals). Capitalization at a sentence start or after an opening quote
proves nothing, so leading stop words are cut and a single word seen capitalized only in such
positions within the chunk is rejected unless a speech verb is next to it ("Marley said"). Runs of
two or more all-caps words are headings and are skipped. Quoted titles ("Moonlit Orchard") are one
name each. Each name collects votes for its type from cheap cues (words.py): honorifics, speech
verbs and common given names (person); head words like Guild/Bank/University (organization),
River/Street/Island or "town of X" (geo), War/Festival/Treaty or a holiday (event).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from kbgraph.graph.extract.nlp.candidates import _Candidate, _key, _take_title
from kbgraph.graph.extract.nlp.lexicon import (
    generic_acronym, given_name, interjection, nationality_word, ordinary_word, plain_word,
)
from kbgraph.graph.extract.nlp.sentences import _CJK_CHAR, _LATIN, _SPACES, _heading_lines
from kbgraph.graph.extract.nlp.spans import LEGAL_FORM_AFTER, MODIFIER, widened
from kbgraph.graph.extract.nlp.words import (
    _COMPASS, _CONNECTORS, _EVENT_HEADS, _FIRST_NAMES, _GEO_FIRST, _GEO_HEADS, _GEO_NOUNS, _GEO_PREPS, _HOLIDAYS,
    _GIVEN_NAMES_IN_AN, _LONE_TITLES, _ORG_FIRST, _ORG_HEADS, _REQUEST_WORDS, _ROLES, _SPEECH, _STOP, _TITLE_ABBR,
    _TITLES_DROP, _TITLES_KEEP,
)

MAX_NAME_WORDS = 6

# a speaker at the start of a chat or script line: "AdamSmith: ...", "Li Hua: ...", "[10:02] Nora Lind: ..."
_SPEAKER = re.compile(r"(?m)^[ \t]*(?:\[[^\]\n]{1,30}\][ \t]*)?<?([A-Z][\w'’.\-]*(?:[ \t][A-Z][\w'’.\-]*){0,2})>?:[ \t]")
# a quoted title: "Moonlit Orchard", “Overwatch 3”, 'Keeper's Light'
_QUOTED = re.compile(r"[\"“]([A-Z0-9][^\"“”\n]{1,60}?)[\"”]")
# CamelCase handles and names ("LiHua", "JonasVale"), not Mc/Mac names ("McRae")
_CAMEL = re.compile(r"^(?!Mc|Mac[A-Z])[A-Z][a-z]+(?:[A-Z][a-z]+)+$")
# a word, digits inside it and a version after it kept ("XFree86", "RH7.3", "T20"); "--" (a dash)
# splits words, and a word never starts inside another or a number ("650M", "3C5X9")
_TOKEN = re.compile(rf"(?<![0-9{_LATIN}])[{_LATIN}][{_LATIN}0-9]*(?:['’\-][{_LATIN}0-9]+)*(?:\.[0-9]+[{_LATIN}0-9]*)*")
_AMPERSAND_GAP = re.compile(r"^[ \t]+&[ \t]+$")  # "Wandel & Goltermann", "Marks & Spencer"
_ROMAN = re.compile(r"^(?:I{1,3}|IV|V|VI{1,3}|IX|X|XI{1,3})$")
_WS_GAP = re.compile(r"^\s+$")
_PLAIN_GAP = re.compile(r"^[\s,]+$")
_TITLE_GAP = re.compile(r"^\.?\s+$")
_CONTRACTION = re.compile(r"['’](t|ll|re|ve|d|m)$", re.I)
_POSSESSIVE = re.compile(r"['’]s$", re.I)


# words that make a compound title with a title ("Lieutenant-Governor", "Vice-Admiral")
_TITLE_PARTS = frozenset("vice governor admiral commander chief major marshal brigadier".split())


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


def _tokens(text: str) -> tuple[list[tuple[str, int, int]], set[str]]:
    """The chunk's word tokens (a word inside an address or path in lower case: no name), and the
    words it writes in lower case in its sentences (not "rick" of rick@linuxmafia.com)."""
    toks: list[tuple[str, int, int]] = []
    lower_words: set[str] = set()
    for m in _TOKEN.finditer(text):
        word, start, end = m.group(0), m.start(), m.end()
        if _embedded(text, start, end):
            toks.append((word.lower(), start, end))
            continue
        toks.append((word, start, end))
        if word[0].islower():
            lower_words.add(word.lower())
    return toks, lower_words


def _plain_tail(toks: list[tuple[str, int, int]], idxs: list[int]) -> bool:
    """One plain word after "of" ("Representatives" of "House of Representatives", "Terror" of
    "Reign of Terror"): the end of the longer name, no name of its own. A tail of several plain words
    may be one ("United States", "National Football League")."""
    words = [_POSSESSIVE.sub("", toks[i][0]) for i in idxs if toks[i][0].lower() not in _CONNECTORS]
    return len(words) == 1 and not words[0].isupper() and plain_word(words[0])  # "CD of GNU": an acronym


# a letter written three times in a row: a drawn-out word ("Sooooo", "Grrrr"); no name is spelt so
_DRAWN_OUT = re.compile(r"([A-Za-z])\1\1")
# number words: stop words at a name's edge, but a name's own word where capitalized inside a
# sentence ("Thousand Oaks", "Sky Three", "Channel Four")
_CARDINALS = frozenset("one two three four five six seven eight nine ten eleven twelve twenty hundred thousand".split())
_NUMBER_WORDS = _CARDINALS | {"first", "second", "third"}  # an ordinal begins a name, never ends one ("China Third")
# a company's legal form or a name's suffix, never a name alone ("Publix Super Markets, Inc.", "Jr.")
_SUFFIX_WORDS = frozenset("inc ltd llc plc corp co jr sr gmbh esq".split())


def _quoted_titles(text: str) -> list[tuple[int, int]]:
    """Spans of quoted titles: at most six words, no sentence punctuation, most words capitalized or
    numbers ("Moonlit Orchard", "Overwatch 3"); quoted speech ("How now?", "Thanks a lot") is not one."""
    found = []
    for m in _QUOTED.finditer(text):
        inner = m.group(1).strip()
        words = inner.split()
        # a quote with Chinese in it is the Chinese finder's ("ETA要来了，" is speech)
        if not words or len(words) > 6 or re.search(r"[.!?,;:]$|[!?;]", inner) or _CJK_CHAR.search(inner) \
                or not any(ch.isalpha() for ch in inner):  # "686": a number, quoted
            continue
        if words[0].lower() in _STOP:
            continue
        content = [w for w in words if w.lower() not in _CONNECTORS and w.lower() not in ("a", "an", "and", "or")]
        if not content or sum(w[0].isupper() or w[0].isdigit() for w in content) < max(1, len(content)):
            continue
        found.append((m.start(1), m.start(1) + len(m.group(1).rstrip())))
    return found


def _shouting(toks: list[tuple[str, int, int]], i: int, text: str = "") -> bool:
    """Token ``i`` is an all-caps word right beside its neighbour (only a space between): a word of
    an all-caps heading; a list ("BBC, ITV and Channel 4") is not one."""
    if not (0 <= i < len(toks) and len(toks[i][0]) >= 2 and toks[i][0].isupper() and toks[i][0].isalpha()):
        return False
    if not text:
        return True
    gaps = [text[toks[j][2]:toks[j + 1][1]] for j in (i - 1, i) if 0 <= j and j + 1 < len(toks)]
    return any(_WS_GAP.match(g) for g in gaps)


def latin_names(text: str, spans: list[tuple[int, int]], starts: list[int],
                cands: dict[str, _Candidate], occurrences: list[tuple[int, int, str]],
                skip: list[tuple[int, int]], utterances: Sequence[int] = (), values: Sequence[int] = (),
                named_values: Mapping[int, str] | None = None) -> None:
    """The Latin-script names of ``text`` (its sentences: ``spans`` and their ``starts``) added to
    ``cands`` and ``occurrences``. ``skip``: spans of Chinese titles, whose Latin parts ("华岳QY300")
    are no names of their own."""
    toks, lower_words = _tokens(text)
    if not toks:
        return
    # a label at a line's start is a speaker's, unless an IRC speaker's utterance begins there
    # ("<ubottu> Error: I am only a bot": the nick is blanked, "Error:" is what it says)
    said = {len(text[:u]) + len(text[u:u + 40]) - len(text[u:u + 40].lstrip(" \t")) for u in utterances}
    speakers = {m.start(1) for m in _SPEAKER.finditer(text)} - said
    titles = _quoted_titles(text)
    for start, end in titles:
        _take_title(text, start, end, starts, cands, occurrences)
    sent_of = [bisect.bisect_right(starts, s) - 1 for _, s, _ in toks]
    initial = _initial_words(text, spans, toks, sent_of, lower_words)
    value_first = _phrase_firsts(text, toks, values)
    for i in value_first | _phrase_firsts(text, toks, utterances) | _line_firsts(text, toks):
        initial[i] = True
    named = _named_tokens(text, toks, named_values or {})
    runs = [run for run in _capitalized_runs(text, toks, sent_of)
            if run[0] in named or not (run[0] in value_first and _ordinary_phrase(toks, run))]

    noninitial_caps: set[str] = set()
    for run in runs:
        for idx in run:
            if not initial[idx] and _capital(toks[idx][0]):
                noninitial_caps.add(_POSSESSIVE.sub("", toks[idx][0]))

    for run in runs:
        if any(start <= toks[run[0]][1] < end for start, end in titles + skip):
            continue  # a word of a quoted title: the title is the name
        if run[0] in named:  # "Name: Acme Robotics": the label says it is a name, whatever its words
            _take_named_value(text, toks, run, named[run[0]], sent_of, cands, occurrences)
            continue
        _take_run(text, toks, run, initial, sent_of, lower_words, noninitial_caps, cands, occurrences,
                  toks[run[0]][1] in speakers)
        tail = _of_tail(toks, run)
        if tail and not _plain_tail(toks, tail):  # "Chief Minister of Maharashtra", "History of Mississippi" mention Maharashtra, Mississippi
            _take_run(text, toks, tail, initial, sent_of, lower_words, noninitial_caps, cands, occurrences,
                      name_part=True)


def _initial_words(text: str, spans: list[tuple[int, int]], toks: list[tuple[str, int, int]], sent_of: list[int],
                   lower_words: set[str]) -> list[bool]:
    """Per token, whether it stands where any word is capitalized: a sentence's first word, or the
    first after an opening quote or a colon."""
    initial = [False] * len(toks)
    for i, (_tok, s, _e) in enumerate(toks):
        si = sent_of[i]
        if si < 0:
            continue
        if i == 0 or sent_of[i - 1] != si:
            initial[i] = not re.search(rf"[{_LATIN}\u4e00-\u9fff]", text[spans[si][0]:s])
            continue
        gap = text[toks[i - 1][2]:s].rstrip("_*([ ")
        initial[i] = gap.endswith(("\"", "“", "‘", ":")) or (gap.endswith("'") and gap[:-1][-1:].isspace()) \
            or (gap == "/" and initial[i - 1])  # "Easier/Quicker way"
    # a title line names what follows ("Maharashtra\nThe politics of the state..."): its words are
    # capitalized as names, not by their position, unless the text also writes them in lower case
    for si in _heading_lines(text, spans):
        for i in range(bisect.bisect_left(sent_of, si), bisect.bisect_right(sent_of, si)):
            # a short line of ordinary words is a chat line or a subject as often as a title
            # ("Got it", "Sounds good"): its ordinary words prove nothing
            if toks[i][0].lower() not in lower_words and not ordinary_word(toks[i][0]):
                initial[i] = False
    return initial


def _phrase_firsts(text: str, toks: list[tuple[str, int, int]], phrase_starts: Sequence[int]) -> set[int]:
    """The tokens that open an utterance after its speaker or a field's value."""
    firsts: set[int] = set()
    begins = [s for _, s, _ in toks]
    for pos in sorted(set(phrase_starts)):
        i = bisect.bisect_left(begins, pos)
        if i < len(toks) and not text[pos:toks[i][1]].strip(" \t*-_\"'“‘(["):
            firsts.add(i)
    return firsts


def _named_tokens(text: str, toks: list[tuple[str, int, int]], named_values: Mapping[int, str]) -> dict[int, str]:
    """Token index -> kind of name, for the first token of each value a label says is a name."""
    begins = [s for _, s, _ in toks]
    out: dict[int, str] = {}
    for pos, kind in named_values.items():
        i = bisect.bisect_left(begins, pos)
        if i < len(toks) and not text[pos:toks[i][1]].strip(" \t\"'“‘(["):
            out[i] = kind
    return out


def _take_named_value(text: str, toks: list[tuple[str, int, int]], run: list[int], kind: str,
                      sent_of: list[int], cands: dict[str, _Candidate], occurrences: list[tuple[int, int, str]]) -> None:
    """A field value its label says is a name ("Name: Acme Robotics", "City: Reading"): that name."""
    end = toks[run[-1]][2]
    after = LEGAL_FORM_AFTER.match(text, end)
    name = _SPACES.sub(" ", text[toks[run[0]][1]:after.end(1) if after else end])
    key = _key(name)
    if not key:
        return
    cand = cands.get(key)
    if cand is None:
        cand = cands[key] = _Candidate(name=name, key=key, first_pos=toks[run[0]][1])
    cand.proven = True
    si = sent_of[run[0]]
    if not cand.sentences or cand.sentences[-1] != si:
        cand.sentences.append(si)
    occurrences.append((si, toks[run[0]][1], key))
    cand.votes[kind] += 3


def _line_firsts(text: str, toks: list[tuple[str, int, int]]) -> set[int]:
    """The tokens that open a line: capitalized by their place as often as not (a chat line, a list
    item), whatever the sentence splitter made of the lines around them."""
    firsts: set[int] = set()
    for i, (_tok, start, _end) in enumerate(toks):
        line_start = text.rfind("\n", 0, start) + 1
        if not re.search(rf"[{_LATIN}\u4e00-\u9fff]", text[line_start:start]):
            firsts.add(i)
    return firsts


def _ordinary_phrase(toks: list[tuple[str, int, int]], run: list[int]) -> bool:
    """A run of ordinary words at a field value's start ("Health Care", "Aerospace & Defense"): a
    category, not a name."""
    words = [_POSSESSIVE.sub("", toks[i][0]) for i in run]
    return len(words) >= 2 and all(ordinary_word(w) or w.lower() in _CONNECTORS for w in words)


def _capital(tok: str) -> bool:
    return tok[0].isupper() and not _CONTRACTION.search(tok)


def _embedded(text: str, start: int, end: int) -> bool:
    """A word inside a path, file name, address or identifier ("beatles/SGT.WAV",
    "SAL_DO_NOT_USE", "user@Host"): no name of its own."""
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    after2 = text[end + 1] if end + 1 < len(text) else " "
    option = before == "-" and start > 1 and text[start - 2] in " \t"  # "rpm -Uvh": a command's option
    return before in "/\\_@." and not (before == "." and start > 1 and text[start - 2].isspace()) \
        or after in "/\\_@" or (after == "." and after2.isalnum()) or option


def _capitalized_runs(text: str, toks: list[tuple[str, int, int]], sent_of: list[int]) -> list[list[int]]:
    """The token indices of each run of capitalized words within a sentence, with connectors
    ("of", "the") between capitalized words and honorifics' periods ("Mr. Fezziwig") inside."""
    runs: list[list[int]] = []
    i = 0
    n = len(toks)
    while i < n:
        if not _capital(toks[i][0]):
            i += 1
            continue
        run = [i]
        j = i
        while True:
            if _POSSESSIVE.search(toks[j][0]):
                break  # "Marley's Ghost": the possessive ends the name
            if MODIFIER.match(toks[j][0]):
                break  # "the Oscar-winning Gravity", "New York-based Acme Ltd": a modifier ends a name
            k = j + 1
            if k >= n or sent_of[k] != sent_of[j]:
                break
            gap = text[toks[j][2]:toks[k][1]]
            title = toks[j][0].lower() in _TITLE_ABBR or (
                len(toks[j][0]) == 1 and toks[j][0].isupper())
            if _AMPERSAND_GAP.match(gap) and _capital(toks[k][0]):
                run.append(k)
                j = k
                continue
            if not (_WS_GAP.match(gap) or (title and _TITLE_GAP.match(gap))):
                break
            if _capital(toks[k][0]):
                run.append(k)
                j = k
                continue
            if len(run) >= 2 and _ROMAN.match(toks[j][0]):
                break  # "Charles III of West Francia": a regnal name ends at its number
            # connectors ("of", "the") only inside a name: the next word must be capitalized again
            m = k
            while m < n and toks[m][0] in _CONNECTORS and sent_of[m] == sent_of[j] and m - k < 2 \
                    and _WS_GAP.match(text[toks[m - 1][2]:toks[m][1]]):
                m += 1
            if m > k and m < n and _capital(toks[m][0]) and sent_of[m] == sent_of[j] \
                    and _WS_GAP.match(text[toks[m - 1][2]:toks[m][1]]):
                run.extend(range(k, m + 1))
                j = m
                continue
            break
        runs.append(run)
        i = j + 1
    return runs


def _trimmed_run(text: str, toks: list[tuple[str, int, int]], run: list[int], initial: list[bool],
                 lower_words: set[str], speaker: bool) -> tuple[list[str], list[int], int] | None:
    """The words of a run that make the name and their token indices (roles, honorifics, leading and
    trailing stop words cut), and the person votes the cut honorifics and a speaker's place give;
    None when no name is left (a heading, a lone title, an all-caps heading word)."""
    words = [_POSSESSIVE.sub("", toks[i][0]) for i in run]
    caps = [w for w in words if len(w) >= 2 and w.isupper() and w.isalpha() and not _ROMAN.match(w)]
    if len(caps) >= 3 or (len(caps) == 2 and max(len(w) for w in caps) >= 5):
        return None  # "MARLEY'S GHOST", "A CHRISTMAS CAROL": a heading ("ILUG IRC" is two names)
    person = 3 if speaker else 0  # "AdamSmith: ..." at the start of a chat line
    words, idxs, person = _cut_titles(words, list(run), person)
    words, idxs = _cut_edges(words, idxs, initial, lower_words)
    if not words or len(words) > MAX_NAME_WORDS:
        return None
    if len(words) == 1 and not _single_word_name(text, toks, idxs[0], run):
        return None
    return words, idxs, person


def _cut_titles(words: list[str], idxs: list[int], person: int) -> tuple[list[str], list[int], int]:
    """Roles and honorifics in front of a name cut, the person votes the honorifics give."""
    # a role in front: "CEO of Corvid Interactive" is Corvid Interactive (the connector goes below)
    while len(idxs) > 1 and words[0].lower() in _ROLES:
        words, idxs = words[1:], idxs[1:]
    while idxs and _title_drop(words[0]) and len(idxs) > 1:
        person += 3
        words, idxs = words[1:], idxs[1:]
    if len(words) >= 3 and words[0].lower() in _TITLES_KEEP and _ROMAN.match(words[-1]):
        person += 3  # "King Charles III" is Charles III: a regnal number names the person alone
        words, idxs = words[1:], idxs[1:]
    elif words and words[0].lower() in _TITLES_KEEP:
        person += 3 if len(words) > 1 else 0
    return words, idxs, person


def _title_drop(word: str) -> bool:
    """A title dropped before a name, also a compound one ("Lieutenant-Governor", "Vice-Admiral")."""
    parts = word.lower().split("-")
    return word.lower() in _TITLES_DROP or (len(parts) > 1 and all(p in _TITLES_DROP or p in _TITLE_PARTS
                                                                    for p in parts))


def _cut_edges(words: list[str], idxs: list[int], initial: list[bool],
               lower_words: set[str]) -> tuple[list[str], list[int]]:
    """Leading and trailing words that are no part of the name: stop words and connectors, words
    capitalized by their place ("Following BSkyB's", "Burnt the ISO"), generic abbreviations at an
    edge ("Windows CD", "ILUG IRC channel")."""
    generic = False
    while words and ((words[0].lower() in _STOP and not _initial_letter(words, idxs)
                      and not (len(words) > 1 and not initial[idxs[0]] and words[0].lower() in _NUMBER_WORDS))
                     or words[0].lower() in _CONNECTORS
                     or (len(words) > 1 and initial[idxs[0]] and _lead_word(words[0], words[1], lower_words))
                     or (len(words) > 1 and _edge_acronym(words[0]))):
        generic = generic or _edge_acronym(words[0])
        words, idxs = words[1:], idxs[1:]
    # "Mark Page": a surname may be a word that is a stop word elsewhere (page, part, title)
    surname = len(words) == 2 and given_name(words[0]) and words[1].lower() not in _CONNECTORS
    while words and not surname and ((words[-1].lower() in _STOP and not (len(words) > 1 and words[-1].lower()
                                                                       in _CARDINALS))
                                     or words[-1].lower() in _CONNECTORS
                                     or (len(words) > 1 and _edge_acronym(words[-1]))
                                     or (len(words) > 1 and words[-1].lower() in _REQUEST_WORDS)):
        generic = generic or _edge_acronym(words[-1])
        words, idxs = words[:-1], idxs[:-1]
    if generic and len(words) == 1 and ordinary_word(words[0]):
        return [], []  # "BIOS Setup", "Legacy ISA": a thing's description, not a name
    return words, idxs


def _initial_letter(words: list[str], idxs: list[int]) -> bool:
    """"A. O. Smith": a capital letter run into the name by its period is an initial, not "a"."""
    return len(words) > 1 and len(words[0]) == 1 and words[0].isupper() and len(words[1]) <= 2 \
        and words[1][:1].isupper()


def _edge_acronym(word: str) -> bool:
    """A generic abbreviation at a name's edge is no part of it ("Windows CD", "ILUG IRC channel"),
    unless it is one that brands carry ("Pick TV", "Kiss FM")."""
    return generic_acronym(word) and word.lower() not in ("tv", "fm", "hd", "it")


def _single_word_name(text: str, toks: list[tuple[str, int, int]], i: int, run: list[int]) -> bool:
    """Whether a name of one word, token ``i``, can be a name at all."""
    w = _POSSESSIVE.sub("", toks[i][0])
    if len(w) < 2 or w.lower() in _TITLE_ABBR or w.lower() in _LONE_TITLES or generic_acronym(w) \
            or nationality_word(w) or interjection(w):
        return False  # "CD", "GMT"; "French", "Carolingian-based"; "Im", "Lol": no entity of their own
    if _DRAWN_OUT.search(w) and len(w) >= (6 if w.isupper() else 4):  # not "KKK", "PPPD"
        return False  # "Sooooo", "YESSSS", "Argggh": a word drawn out in chat, no name
    if w.lower() in _SUFFIX_WORDS and not (w.isupper() and len(w) == 2):
        return False  # "Inc", "Jr" cut from their name by a comma ("JR", "CO": acronyms)
    if w.isupper() and len(w) >= 5 and plain_word(w):
        return False  # "URGENT", "NULL", "FATAL": a plain word in capitals is emphasis or code, no acronym
    if plain_word(w) and _beside_possessive(text, toks, i):
        return False  # "Ryan's Hope", "Women's Society": a plain word of a longer title a possessive cut
    if _people_adjective(w, text):
        return False  # "Norman rule" in a text about the Normans: the people's adjective
    if w.isupper() and w.isalpha() and (len(w) > 6 or _shouting(toks, run[0] - 1, text)
                                        or _shouting(toks, run[-1] + 1, text)):
        return False  # not an acronym but a word of an all-caps heading ("MARLEY'S GHOST")
    return True


def _beside_possessive(text: str, toks: list[tuple[str, int, int]], i: int) -> bool:
    """A one-word run that a possessive split from a capitalized word beside it: after "Waldo's"
    ("Waldo's People") or itself possessive before one ("Women's Society")."""
    if i > 0 and _POSSESSIVE.search(toks[i - 1][0]) and _capital(toks[i - 1][0]) \
            and _POSSESSIVE.sub("", toks[i - 1][0]).lower() not in _STOP and _WS_GAP.match(text[toks[i - 1][2]:toks[i][1]]):
        return True
    return _POSSESSIVE.search(toks[i][0]) is not None and i + 1 < len(toks) and _capital(toks[i + 1][0]) \
        and _WS_GAP.match(text[toks[i][2]:toks[i + 1][1]]) is not None


def _people_adjective(word: str, text: str) -> bool:
    """A word in -an whose plural the text writes as a name ("Norman" beside "the Normans",
    "Mercian" beside "the Mercians") is the adjective or the singular of a people, no entity of its
    own (the people, in the plural, is); so is the adjective of a place the text names ("Victorian"
    beside "Victoria", "Canadian" beside "Canada", "Mexican" beside "Mexico"), unless it is a given
    name ("Julian" beside "Julia")."""
    if len(word) < 4 or not word.endswith("an") or not word[0].isupper() or word.isupper():
        return False
    if re.search(rf"\b{re.escape(word)}s\b", text) is not None:
        return True
    if given_name(word) or word.lower() in _GIVEN_NAMES_IN_AN:
        return False
    places = {word[:-1], word[:-3] + "a", word[:-2] + "o"}  # Victoria-n, Canad-ian, Mexic-an
    return any(len(place) >= 5 and re.search(rf"\b{re.escape(place)}\b", text) is not None
               for place in places if place != word)



def _handle(name: str, seen: set[str]) -> bool:
    """A CamelCase word that is a handle made of names ("JonasVale", "LiHua"), not a name written
    so ("SoCal", "PayPal", "AbbVie", "SaskTel"): a known given name first, or a first part the chunk
    also writes as a word of its own ("Theo" beside "TheoMarsh"); ``seen``: the chunk's words. A
    handle at a chat line's start ("TheoMarsh: ...") is a speaker's, split whatever its parts."""
    parts = re.findall(r"[A-Z][a-z]+", name)
    return parts[0].lower() in _FIRST_NAMES or (parts[0] in seen and len(parts[0]) >= 3)


def _lead_word(word: str, following: str, lower_words: set[str]) -> bool:
    """A first word capitalized by its place that is no part of the name after it: written in lower
    case elsewhere in the chunk, or an ordinary adverb, gerund or interjection ("Following BSkyB's
    launch", "Initially Sky", "Absolutely Jennifer"), or an ordinary word before "the" ("Burnt the
    ISO"); an ordinary adjective may be ("United Kingdom")."""
    low = word.lower()
    return low in lower_words or (ordinary_word(word) and (low.endswith(("ly", "ing")) or low in _STOP
                                                          or following.lower() == "the"))


def _take_run(text: str, toks: list[tuple[str, int, int]], run: list[int], initial: list[bool],
              sent_of: list[int], lower_words: set[str], noninitial_caps: set[str],
              cands: dict[str, _Candidate], occurrences: list[tuple[int, int, str]],
              speaker: bool = False, name_part: bool = False) -> None:
    """The name a run of capitalized words makes, if any, added to ``cands`` and ``occurrences``."""
    trimmed = _trimmed_run(text, toks, run, initial, lower_words, speaker)
    if trimmed is None:
        return
    words, idxs, person = trimmed
    if len(words) == 2 and words[0].lower() in _COMPASS and nationality_word(_POSSESSIVE.sub("", words[1])):
        return  # "The South Korean company", "North Korean troops": an adjective of nationality
    first, last = idxs[0], idxs[-1]
    end = toks[last][2] - (2 if _POSSESSIVE.search(toks[last][0]) else 0)
    start, event = toks[first][1], False
    if (len(words) == 1 and "-" in words[0] and words[0].rsplit("-", 1)[1].islower()) or MODIFIER.match(words[-1]):
        end = toks[last][1] + words[-1].rindex("-")  # "Linux-native utilities", "New York-based" name a place
    elif end == toks[last][2] and not person:
        start, end, event = widened(text, start, end)
    name = _SPACES.sub(" ", text[start:end])
    if len(words) == 1 and _CAMEL.match(name) and (speaker or _handle(name, {t for t, _, _ in toks if t[:1].isupper()})):
        name = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name)  # "LiHua" is Li Hua: one key for both spellings
    key = _key(name)
    if not key:
        return
    # a speech verb right next to the name, with no quote between: 'said Scrooge', 'Scrooge said';
    # not an ordinary word that starts the sentence ("Researchers say", "Police said")
    prev_tok = toks[run[0] - 1] if run[0] > 0 else None
    next_tok = toks[run[-1] + 1] if run[-1] + 1 < len(toks) else None
    speaks = (prev_tok and prev_tok[0].lower() in _SPEECH and _PLAIN_GAP.match(text[prev_tok[2]:toks[run[0]][1]])) \
        or (next_tok and next_tok[0].lower() in _SPEECH and _PLAIN_GAP.match(text[toks[run[-1]][2]:next_tok[1]]))
    if speaks and not (len(words) == 1 and initial[first] and plain_word(words[0])):
        person += 2
    # a word capitalized where any word is (a sentence's, line's or field's first) is a name when it
    # is no ordinary word ("Eircom", "Waider"), or the chunk also capitalizes it elsewhere
    proven = (len(words) > 1 or not initial[first] or words[0] in noninitial_caps or person > 0
              or (words[0].isupper() and len(words[0]) >= 2) or not ordinary_word(words[0]))
    cand = cands.get(key)
    if cand is None:
        cand = cands[key] = _Candidate(name=name, key=key, first_pos=toks[first][1])
    cand.proven = cand.proven or proven
    cand.name_part = cand.name_part or name_part
    si = sent_of[first]
    if not cand.sentences or cand.sentences[-1] != si:
        cand.sentences.append(si)
    occurrences.append((si, toks[first][1], key))
    _vote(cand.votes, text, toks, run, words, person, prev_tok)
    if event:
        cand.votes["event"] += 3


def _census_person(words: list[str], head: str) -> bool:
    """A person's name by its first word alone: a given name of the Census's lists before one or two
    more words, the last no ordinary word and no head of a place, an organization or an event
    ("Sandra Bullock"; not "Orlando International Airport", "Franklin Township", "Marshall Plan")."""
    return 2 <= len(words) <= 3 and given_name(words[0]) and not ordinary_word(words[-1]) \
        and head not in _ORG_HEADS and head not in _GEO_HEADS and head not in _EVENT_HEADS


def _vote(votes: Counter[str], text: str, toks: list[tuple[str, int, int]], run: list[int], words: list[str],
          person: int, prev_tok: tuple[str, int, int] | None) -> None:
    """Votes for a name's type from its words and the words around it (in a fixed order: ties of
    ``most_common`` go to the type voted for first)."""
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
    # any word of the hand list ("Mark" alone); of the Census's longer list only a first word before
    # a surname (``_census_person``), never a lone first name: typed a person, "Aiko" would be linked
    # to the one "Aiko Brennan" (aliases.name_links), and on the generated chat logs the passages
    # that only mention her (org charts) then cite her too (kg recall@5 -2.4 points)
    if any(w in _FIRST_NAMES for w in low) or _census_person(words, head):
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
