"""A chunk's document structure, read as structure: header lines of e-mails and chat exports
("From:", "Date:", "Time:", "Subject:"), the subject's reply prefixes and list tags ("Re: [ILUG]"),
field labels of exported records ("Region: North; Revenue: 1200", a sheet's "Sheet:" line), an
encyclopedia's glosses in other languages ("(French: Normands; Latin: Normanni)") and scientific
names of species ("(Urtica dioica)"), and speakers (an IRC "<nick>", a sender "Wynne, Conor" or "Ryan, Shane" read as "Conor Wynne").

``read_structure`` says which spans the name finder must not read (labels, tags, dates and times:
they are blanked, same length, so offsets hold) and which people the structure names itself
(senders, nicks), with every place the chunk names them. A line-start label that is an ordinary
word ("Region:", "Note:") is a field; one that is a name ("Jennifer Moore:") stays a speaker for
names.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kbgraph.graph.extract.nlp.lexicon import header_label, nationality_word, ordinary_word, plain_word

# a header line: a known label at a line's start (after quote markers), its value to the line's end
_HEADER = re.compile(r"(?im)^[ \t>]*([A-Za-z][A-Za-z\-]{1,20})[ \t]*:[ \t]*(.*)$")
# values that are dates, times or ids: nothing in them is a name ("Mon, 02 Sep 2002 ... IST")
_OPAQUE_VALUES = frozenset("date sent time timestamp received message-id".split())
_SENDER_FIELDS = frozenset("from to cc bcc reply-to".split())
# reply prefixes and list tags at a subject's start: "Re: [ILUG] ", "RE: Fwd: ", "[Announce] "
_SUBJECT_PREFIX = re.compile(r"^(?:[ \t]*(?:(?:re|fw|fwd|aw|sv)(?:\[\d+\])?[ \t]*:|\[[^\]\n]{1,40}\]))+", re.I)
# "Surname, Given": an address-book sender ("Wynne, Conor"), as a whole field value or before "wrote:"
_REVERSED = re.compile(r"^([A-Z][a-zA-Z'’\-]+), ([A-Z][a-zA-Z'’\-]+)$")
_ADDRESS = re.compile(r"<[^<>\s]*>|\([^()]*@[^()]*\)|\S+@\S+")
_DISPLAY_NAME = re.compile(r"^[A-Za-zÀ-ÖØ-öø-ÿ][A-Za-zÀ-ÖØ-öø-ÿ'’.\-]*(?: [A-Za-zÀ-ÖØ-öø-ÿ][A-Za-zÀ-ÖØ-öø-ÿ'’.\-]*){0,3}$")
_REVERSED_WROTE = re.compile(r"\b([A-Z][a-zA-Z'’\-]+), ([A-Z][a-zA-Z'’\-]+)(?= (?:wrote|writes|said|says|mentioned)\b)")
# a field of a record line: "Label: value" between "; " or " | " separators
_RECORD_FIELD = re.compile(r"(?:^|;[ \t]*|[ \t]\|[ \t]*)([^;:|\n]{1,40}?)[ \t]*:[ \t]")
# an IRC or chat log line: "[02:24] <nick> text", "<nick> text", "* nick does something"
# (a "<nick>" says something on its line: "<snip>" alone on a line is an editor's mark)
_IRC_SPEAKER = re.compile(r"(?m)^[ \t]*(?:\[[^\]\n]{1,30}\][ \t]*)?(?:<[@+%&~]?([^\s<>]{2,30})>(?=[ \t]*\S)"
                          r"|\*[ \t]+([^\s*]{2,30})[ \t])")
# IRC join, part and nick-change lines: "=== fge [~insomniac@fge.user]  has left #ubuntu",
# "=== tim241_ is now known as tim241"
_IRC_EVENT = re.compile(r"(?m)^[ \t]*(?:\[[^\]\n]{1,30}\][ \t]*)?(?:===|\*\*\*|-->|<--|-!-)[ \t]*([^\s\[\]]{2,30})"
                        r"(?:[ \t]+is now known as[ \t]+([^\s]{2,30}))?")
_IRC_EVENT_TAIL = re.compile(r"\[~?[^\]\s]*@[^\]\s]*\]|\bhas (?:joined|left|quit)\b[^\n]*")
# the last word of a field label that says its value is a name, and of what
_NAME_LABELS = {**dict.fromkeys("name person employee contact owner author manager customer speaker member "
                                "founder ceo".split(), "person"),
                **dict.fromkeys("company client vendor supplier brand firm organization organisation security "
                                "employer publisher manufacturer ticker symbol".split(), "organization"),
                **dict.fromkeys("city country town place location headquarters venue state province".split(), "geo")}
# a parenthesis, and its "Label: gloss" parts ("Latin: Normanni", "Old Norse: Norðmaðr")
_PARENTHESIS = re.compile(r"\(([^()\n]{3,300})\)")
_GLOSS = re.compile(r"(?:^|[;,])([ \t]*)([A-Z][a-z]+(?:[ \t][A-Z][a-z]+)?)[ \t]*:[ \t]*([^;,]+?)[ \t]*(?=[;,]|$)")
# "Genus epithet" alone in quotes or parentheses (a species' scientific name)
_BINOMIAL = re.compile(r"[\"“「(（][ \t]*([A-Z][a-z]{2,})[ \t]+([a-z]{3,})[ \t]*[\"”」)）]")
# a menu path: "System -> Preferences -> Sessions", "System >> Administration", "System | Preferences"
_MENU_STEP = r"[A-Z][\w&'’\-]*(?:[ \t]+[A-Za-z&][\w&'’\-]*){0,3}"
_MENU_PATH = re.compile(rf"(?<![\w>\-]){_MENU_STEP}(?:[ \t]*(?:-+>|=+>|>>?|→|\|)[ \t]*{_MENU_STEP})+")
_MENU_ARROW = re.compile(r"[ \t]*(?:-+>|=+>|>>?|→|\|)[ \t]*")
_LINE_LABEL = re.compile(r"(?m)^[ \t]*(?:\[[^\]\n]{1,30}\][ \t]*)?([A-Za-z][\w'’.\- ]{0,40}?)[ \t]*:[ \t]")


@dataclass
class Structure:
    """What the structure of a chunk says: spans to blank, and people it names (name, spans)."""

    blank: list[tuple[int, int]] = field(default_factory=list)
    people: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    # where an utterance (after a speaker) or a field's value starts: a word there is capitalized by
    # its place; a phrase of ordinary words at a value's start ("Health Care") names nothing, at an
    # utterance's it may ("Studio Meridian sent their floor plan")
    utterances: list[int] = field(default_factory=list)
    values: list[int] = field(default_factory=list)
    # where the value of a field whose label says it holds a name starts ("Name:", "Company:",
    # "City:"), with the kind of name: a name there is one even in ordinary words ("Acme Robotics")
    named_values: dict[int, str] = field(default_factory=dict)

    def blanked(self, text: str) -> str:
        if not self.blank:
            return text
        chars = list(text)
        for start, end in self.blank:
            chars[start:end] = " " * (end - start)
        return "".join(chars)

    def _person(self, name: str, start: int, end: int) -> None:
        self.people.setdefault(name, []).append((start, end))
        self.blank.append((start, end))


def _headers(text: str, out: Structure) -> None:
    """Header lines of a mail or chat export: labels blanked, dates blanked, senders read."""
    for m in _HEADER.finditer(text):
        label = m.group(1).lower()
        if not header_label(label):
            continue
        out.blank.append((m.start(1), m.end(1)))
        value_start, value = m.start(2), m.group(2)
        if label in _OPAQUE_VALUES:
            out.blank.append((value_start, m.end(2)))
        elif label == "subject":
            _subject(text, value_start, m.end(2), out)
        elif label in _SENDER_FIELDS:
            _sender(value, value_start, out)


def _sender(value: str, value_start: int, out: Structure) -> None:
    """A sender's or recipient's display name, whatever its case ("Mark Page", "kevin lyda",
    "Wynne, Conor" read as "Conor Wynne"); an address alone names no one here."""
    shown = _ADDRESS.sub("", value).strip().strip("\"'")
    if not shown:
        return
    at = value_start + value.index(shown)
    reversed_name = _REVERSED.match(shown)
    if reversed_name:
        out._person(f"{reversed_name.group(2)} {reversed_name.group(1)}", at, at + len(shown))
    elif _DISPLAY_NAME.match(shown):
        out._person(shown, at, at + len(shown))


def _subject(text: str, start: int, end: int, out: Structure) -> None:
    prefix = _SUBJECT_PREFIX.match(text, start, end)
    if prefix and prefix.end() > start:
        out.blank.append((start, prefix.end()))


def _first_line_subject(text: str, out: Structure) -> None:
    """A message whose first line is its subject ("Re: [ILUG] Sun Solaris.."): its prefixes are
    structure."""
    first = re.match(r"[ \t]*", text)
    start = first.end() if first else 0
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    prefix = _SUBJECT_PREFIX.match(text, start, end)
    if prefix and prefix.end() > start:
        out.blank.append((start, prefix.end()))


def _records(text: str, out: Structure) -> None:
    """Lines of two or more "Label: value" fields (a sheet or CSV row as kbgraph's readers write
    it, "Region: North; Revenue: 1200"): their labels are structure; so is a label every such line
    shares when it stands alone on another line, and a sheet's "Sheet:" title label."""
    labels: set[str] = set()
    for line in re.finditer(r"(?m)^.*$", text):
        fields = list(_RECORD_FIELD.finditer(line.group(0)))
        if len(fields) < 2 or not any(";" in f.group(0) or "|" in f.group(0) for f in fields):
            continue
        for f in fields:
            start = line.start() + f.start(1)
            out.blank.append((start, line.start() + f.end(1)))
            out.values.append(line.start() + f.end())
            labels.add(f.group(1).strip().lower())
            kind = _NAME_LABELS.get(f.group(1).strip().lower().split()[-1]) if f.group(1).split() else None
            if kind:
                out.named_values[line.start() + f.end()] = kind
    for m in re.finditer(r"(?m)^[ \t]*(Sheet)[ \t]*:", text):
        out.blank.append((m.start(1), m.end(1)))
    if labels:
        for m in _LINE_LABEL.finditer(text):
            if m.group(1).strip().lower() in labels:
                out.blank.append((m.start(1), m.end(1)))


def _ordinary_labels(text: str, out: Structure) -> None:
    """A line-start label made of ordinary words ("Region:", "Time:", "Next steps:") is a field, not
    a speaker; names.py reads the others ("Jennifer Moore:", "JonasVale:") as speakers."""
    for m in _LINE_LABEL.finditer(text):
        words = m.group(1).split()
        value = text[m.end():text.find("\n", m.end()) if "\n" in text[m.end():] else len(text)]
        if words and len(words) <= 4 and (all(ordinary_word(w) for w in words) or _opaque_value(value)):
            out.blank.append((m.start(1), m.end(1)))
            out.values.append(m.end())
        elif words and len(words) <= 3:
            out.utterances.append(m.end())  # "Jennifer Moore: Sounds Good"


def _opaque_value(value: str) -> bool:
    """A field value no one says: a number, an id, an address or a link ("Linux User: 231986",
    "Jabber: tcobone@jabber.org"), so its label is a field's, not a speaker's."""
    words = value.split()
    return bool(words) and all(not re.search(r"[A-Za-z]", w) or "@" in w or "://" in w or w.startswith("www.")
                               or w.endswith(":") for w in words)  # "231986  Jabber: tcobone@jabber.org"


def _irc_speakers(text: str, out: Structure) -> None:
    """The nicks of an IRC log ("[02:24] <pnunn> ...", "=== fge [...] has left", "=== tim241 is now
    known as Tim241"), whatever their case, and every other place the chunk writes them as a word
    ("pnunn, no they don't"); where each utterance starts."""
    nicks: set[str] = set()
    # "* nick waves" is an action only in a log whose lines have "<nick>" speakers: elsewhere a line
    # "* make sure ..." is a list item (4 e-mails of email-ilug made "make", "mount", "su" persons)
    # a "<word>" closed somewhere by "</word>" is markup ("<title>", "<cough>...</cough>"), no nick
    lines = [m for m in _IRC_SPEAKER.finditer(text) if not (m.group(1) and f"</{m.group(1)}>" in text)]
    speakers = any(m.group(1) for m in lines)
    for m in lines:
        if not m.group(1) and not speakers:
            continue
        g = 1 if m.group(1) else 2
        nick = m.group(g)
        if _nick(nick):
            nicks.add(nick)
        out.blank.append((m.start(g) - (1 if g == 1 else 0), m.end(g) + (1 if g == 1 else 0)))
        out.utterances.append(m.end())
    for m in _IRC_EVENT.finditer(text):
        nicks.update(n for n in (m.group(1), m.group(2)) if n and _nick(n))
    for m in _IRC_EVENT_TAIL.finditer(text):
        out.blank.append(m.span())  # "has joined #ubuntu", "[~user@host]": no names of people
    taken: set[int] = set()
    for nick in sorted(nicks, key=lambda n: (-len(n), n)):  # a fixed order: "gcolley" and "GColley" alike
        for m in re.finditer(rf"(?<![\w\-@.~]){re.escape(nick)}(?![\w\-@]|\.\w)", text, _nick_case(nick)):
            if m.start() not in taken:
                taken.add(m.start())
                out._person(nick, m.start(), m.end())


def _language_glosses(text: str, out: Structure) -> None:
    """An encyclopedia's glosses of a name in other languages, "(Norman: Nourmands; French: Normands;
    Latin: Normanni)": words of those languages, not names of their own. A parenthesis whose
    "Label: word" parts include one labelled with a language is read so whole."""
    for m in _PARENTHESIS.finditer(text):
        parts = [(p.start(1) + m.start(1), p) for p in _GLOSS.finditer(m.group(1))]
        if not parts or not any(nationality_word(p.group(2).split()[-1]) for _, p in parts):
            continue
        for offset, p in parts:
            out.blank.append((offset - p.start(1) + p.start(2), offset - p.start(1) + p.end(3)))


def _binomials(text: str, out: Structure) -> None:
    """A species' scientific name quoted or in parentheses, "(Urtica dioica)", "（学名："Aburria
    jacutinga"）": a genus and a lower-case epithet that is no English word. A biological name, not
    a name of the entities the graph holds (the genus alone was read as one before)."""
    for m in _BINOMIAL.finditer(text):
        if not ordinary_word(m.group(2)):
            out.blank.append((m.start(1), m.end(2)))


def _menu_paths(text: str, out: Structure) -> None:
    """The steps of a menu path ("System -> Administration -> Services", "Edit > Preferences"):
    labels of a program's menus, no names, when every word of a step is an ordinary one (a step
    "Ubuntu Software Center" stays a name)."""
    if ">" not in text and "|" not in text and "→" not in text:
        return
    for m in _MENU_PATH.finditer(text):
        pos = m.start()
        for step in _MENU_ARROW.split(m.group(0)):
            at = text.index(step, pos)
            pos = at + len(step)
            if step.split() and all(plain_word(w) for w in step.split()):
                out.blank.append((at, at + len(step)))


# a line this long (without spaces) of which this share or more is neither a letter nor a digit
# is noise, not prose: terminal or encoding garbage ("S+#_+Å± +Ä W S_+:"), code
_GARBAGE_MIN = 12
_GARBAGE_SHARE = 0.4
_SYMBOLS_LINE = re.compile(r"(?m)^.*(?:[^\w\s]|_){3}.*$")
_SYMBOL_CHARS = re.compile(r"[^\w\s]|_")
_SPACE_CHARS = re.compile(r"\s")


def _garbage_lines(text: str, out: Structure) -> None:
    """Lines of symbols (mangled encodings, terminal dumps, code): no names are read there (an
    e-mail of them made "ÅÅÄ", "NÄ" and "Ä W" entities)."""
    for m in _SYMBOLS_LINE.finditer(text):  # only lines with a run of symbols are counted
        line = m.group(0)
        chars = len(line) - len(_SPACE_CHARS.findall(line))
        if chars >= _GARBAGE_MIN and len(_SYMBOL_CHARS.findall(line)) >= _GARBAGE_SHARE * chars:
            out.blank.append(m.span())


def _nick_case(nick: str) -> re.RegexFlag:
    """How a nick is looked for in the log's lines: people address one another in any case
    ("actionparsnip, how??" to ActionParsnip), unless the nick is a word of its own ("home", "Mate"),
    which then stands for the nick only as written."""
    word = nick.strip("_-`^|0123456789")  # "Mate_", "home2": the word under a nick's decorations
    return re.NOFLAG if len(nick) < 4 or ordinary_word(nick) or ordinary_word(word) else re.IGNORECASE


def _nick(nick: str) -> bool:
    """A speaker's nick names a person whatever word it is ("Cheery", "guest__")."""
    return len(nick) >= 2 and re.search(r"[A-Za-z]", nick) is not None


def read_structure(text: str) -> Structure:
    """The structure of ``text``: see the module docstring."""
    out = Structure()
    _irc_speakers(text, out)
    _headers(text, out)
    _first_line_subject(text, out)
    _records(text, out)
    _ordinary_labels(text, out)
    _language_glosses(text, out)
    _binomials(text, out)
    _menu_paths(text, out)
    _garbage_lines(text, out)
    for m in _REVERSED_WROTE.finditer(text):
        out._person(f"{m.group(2)} {m.group(1)}", m.start(), m.end())
    return out
