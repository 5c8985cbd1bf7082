"""What the words around a Latin-script name add to it or take from it: a version or legal form
after it ("Red Hat 7.3", "Sky plc"), a lower-case head that makes an event of it ("the Paris
agreement", "the treaty of Saint-Clair-sur-Epte"), and a hyphenated participle that makes a modifier
of it ("the Oscar-winning Gravity": Oscar, then Gravity). names.py asks these of each run of
capitalized words."""

from __future__ import annotations

import re

# a company's legal form written in lower case after its name: "British Sky Broadcasting Group plc";
# the short ones that are also words ("as", "co", "sa") only as a legal form writes them ("AS", "Co")
LEGAL_FORM_AFTER = re.compile(r" (plc|ltd|inc|llc|gmbh|AG|SA|BV|NV|Oy|AB|AS|Co)\b\.?")
# a lower-case head after a name, or before it with "of", makes one event of both ("the Paris
# agreement", "the Victorian gold rush", "the treaty of Saint-Clair-sur-Epte")
_EVENT_AFTER = re.compile(r" (agreement|accords?|referendum|protocol|gold rush)\b(?!-)")
_EVENT_BEFORE = re.compile(r"\b(?:treaty|battle|siege) of $")
# a model number or version right after a name: "Zyxel 643", "Redhat 7.3", "Channel 4" (not a year,
# not a time of day)
_VERSION_AFTER = re.compile(r" (\d{1,3}(?:\.\d+)*|\d+(?:\.\d+)+)(?![\d:.,]\d|[\w])")
# a name made a modifier by a participle or like word after its hyphen ("Oscar-winning",
# "Harvard-educated", "London-based", "Soviet-era"); a closed list, since a romanized name writes its
# syllables so too ("Kim Jong-un", "Chiu Man-cheuk")
MODIFIER = re.compile(r"^[A-Z][\w'’]*-(?:based|born|bred|winning|nominated|led|backed|owned|run|made|built|"
                      r"educated|trained|funded|sponsored|controlled|held|dominated|occupied|ruled|style|era|"
                      r"speaking|headquartered|registered|listed|affiliated|centred|centered|focused|"
                      r"oriented|inspired|themed|related|like|bound|wide)$")


def widened(text: str, start: int, end: int) -> tuple[int, int, bool]:
    """A name's span with what the words around it add: a version or legal form after it ("Red Hat
    7.3", "Sky plc"), or a lower-case head that makes an event of it ("the Paris agreement", "the
    treaty of Saint-Clair-sur-Epte"); and whether it is such an event."""
    after = _VERSION_AFTER.match(text, end) or LEGAL_FORM_AFTER.match(text, end)
    if after:
        return start, after.end(1), False
    event_after = _EVENT_AFTER.match(text, end)
    if event_after:
        return start, event_after.end(1), True
    event_before = _EVENT_BEFORE.search(text, max(0, start - 12), start)
    if event_before:
        return event_before.start(), end, True
    return start, end, False
