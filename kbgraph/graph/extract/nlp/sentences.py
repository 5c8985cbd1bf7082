"""A chunk's sentences, as the nlp extractor counts them: where each starts and ends, which are title
lines, which are licence or table-of-contents boilerplate to leave out of the name search, and the
excerpt of one cut around a mention (what descriptions are made of).
"""

from __future__ import annotations

import re

from kbgraph.graph.extract.nlp.words import _ABBREVIATIONS

MAX_DESCRIPTION_CHARS = 300
# the sentence is licence, legal or distribution boilerplate (a book's licence, a site's footer) when it
# holds two of these: its names (the licensor, the foundation) would otherwise become top entities
_BOILERPLATE = re.compile(
    r"licen[cs]e|copyright|warrant|trademark|liabilit|redistribut|royalt|donation|terms of use|"
    r"all rights reserved|e-?books?\b|e-?text|project gutenberg|https?://|www\.|public domain|disclaim|"
    r"permission|refund|electronic works?", re.I)
# a table-of-contents line: a chapter word, then a title, then a page number or dotted leader
_CONTENTS_LINE = re.compile(r"(?im)^[ \t]*(?:chapter|stave|part|book|section|appendix|[ivxlc]+\.)\b[^\n]{0,80}"
                            r"(?:\.{3,}|\s\d{1,4})[ \t]*$")
_HEADING_MAX_WORDS = 8
_LATIN = "A-Za-zÀ-ÖØ-öø-ÿĀ-ɏ"
_CJK_CHAR = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf]")
# a blank line, a sentence end, or the end of a heading/title line (a short line with no closing
# punctuation, e.g. "Bubye River\nThe Bubye River is..."), so a title never runs into its text;
# hard-wrapped prose lines are longer and keep joining ("Ebenezer\nScrooge")
_BOUNDARY = re.compile(r"\n[ \t]*\n|\n(?=[ \t]*(?:\[[^\]\n]{1,30}\][ \t]*)?<?[A-Z][\w'’.\-]*(?:[ \t][A-Z][\w'’.\-]*){0,2}>?:[ \t])"
                       # a chat log's line: a time stamp, an IRC "<nick>", an action or a channel event
                       r"|\n(?=[ \t]*(?:\[\d{1,2}:\d{2}(?::\d{2})?\]|<[@+%&~]?[^\s<>]{2,30}>[ \t]|\*[ \t]+\S|===|\*\*\*|-->|<--|-!-))"
                       r"|(?m:^\S[^\n]{0,59}(?<![.,;:!?\-—–\s])(?=\n[ \t]*[\"'“‘(#*]*[A-Z\d\u4e00-\u9fff]))"
                       r"|[.!?…]+[\"'”’)\]_]*(?=\s|$)|[。！？；]+[”’」』\"]*")
_SPACES = re.compile(r"\s+")


def _heading_lines(text: str, spans: list[tuple[int, int]]) -> list[int]:
    """The sentences that are title lines: a short line of its own with no closing punctuation."""
    out = []
    for si, (start, end) in enumerate(spans):
        line = text[start:end].strip()
        if (line and "\n" not in line and len(line.split()) <= _HEADING_MAX_WORDS and line[-1] not in ".!?…:;,"
                and text[end:end + 1] == "\n" and (start == 0 or text[start - 1] == "\n")):
            out.append(si)
    return out


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
