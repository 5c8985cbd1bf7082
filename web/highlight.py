"""Question words marked in text, whole words only: "is" marks "is", never the "is" of "his".

One matcher for the pages (``mark``: escaped HTML with <mark>) and the REST API's ``highlight`` field
(``em``: RAGFlow's <em> around the words, the content otherwise as stored). A word written in a script
without spaces between words (Chinese, Japanese, Thai...) has no word boundary to respect: it is
matched wherever it appears.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

from kbgraph.parse.tokenize import ENGLISH_STOP_WORDS

_WORD = re.compile(r"\w{2,}", re.UNICODE)
# scripts written without spaces between words: CJK ideographs, kana, Hangul syllables, Thai, Lao, Khmer
_UNSPACED = re.compile(r"[\u0e00-\u0eff\u1780-\u17ff\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def words_pattern(query: str, *, skip_stop_words: bool = False) -> re.Pattern[str] | None:
    """A case-insensitive pattern of the query's words (longest first), each a whole word; None when
    the query has none. ``skip_stop_words``: leave out "the", "of"... unless they are all there is."""
    found = {w.casefold() for w in _WORD.findall(query)}
    if skip_stop_words:
        found = found - ENGLISH_STOP_WORDS or found
    if not found:
        return None
    parts = [re.escape(w) if _UNSPACED.search(w) else rf"(?<!\w){re.escape(w)}(?!\w)"
             for w in sorted(found, key=len, reverse=True)]
    return re.compile("|".join(parts), re.IGNORECASE)


def mark(text: str, query: str) -> Markup:
    """``text`` escaped, with the query's words (stop words aside) wrapped in <mark>."""
    pattern = words_pattern(query, skip_stop_words=True)
    if pattern is None:
        return escape(text)
    out, last = [], 0
    for match in pattern.finditer(text):
        out.append(escape(text[last:match.start()]))
        out.append(Markup("<mark>") + escape(match.group(0)) + Markup("</mark>"))
        last = match.end()
    out.append(escape(text[last:]))
    return Markup("").join(out)


def em(text: str, query: str) -> str:
    """RAGFlow's highlight: the query's words in <em>."""
    pattern = words_pattern(query)
    return text if pattern is None else pattern.sub(lambda m: f"<em>{m.group(0)}</em>", text)
