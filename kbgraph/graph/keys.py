"""Entity keys: the normalized name that decides which mentions are the same entity.

The key feeds deterministic ids (``records.entity_id``), so it must be stable across runs and
idempotent. It is deliberately predictable rather than clever: no article stripping, no stemming,
no alias tables. Entity resolution is a separate, optional phase.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_WS = re.compile(r"\s+")
# LLMs and PDF text put spaces between CJK characters ("清华 大学"); a key should not care.
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_GAP = re.compile(rf"(?<=[{_CJK}]) (?=[{_CJK}])")
_POSSESSIVE = re.compile(r"(?<=\w)'s$")
# Kept at the end of a key because they are part of names: "C#", "100%". "+" is a symbol, never trimmed.
_KEEP_TRAILING = frozenset("#%")
_BRACKETS = {"(": ")", "[": "]", "{": "}", "（": "）", "【": "】", "《": "》", "「": "」", "『": "』"}
_CLOSERS = {v: k for k, v in _BRACKETS.items()}
# Symbols (not punctuation in Unicode terms) that markdown and table output leave around names.
_EDGE_SYMBOLS = frozenset("`~|<>=^+*•·")
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "`": "'"})


def _trimmable(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch).startswith("P")


def _wraps_all(s: str) -> bool:
    """True when s opens with a bracket whose first closer is s's last character: "(Scrooge)"."""
    closer = _BRACKETS[s[0]]
    return s.find(closer, 1) == len(s) - 1


def _trim(s: str) -> str:
    while s:
        first = s[0]
        if first in _BRACKETS and _BRACKETS[first] in s[1:] and not _wraps_all(s):
            break  # a balanced "(...)" at the start is content: "(R)-ketamine"
        if _trimmable(first) or (first in _EDGE_SYMBOLS and first != "+"):
            s = s[1:]
            continue
        break
    while s:
        last = s[-1]
        if last in _KEEP_TRAILING or last == "+":
            break
        if last in _CLOSERS and _CLOSERS[last] in s[:-1]:
            break  # "apple (company)" keeps its parenthesis
        if _trimmable(last) or last in _EDGE_SYMBOLS:
            s = s[:-1]
            continue
        break
    return s


def _once(name: str) -> str:
    s = unicodedata.normalize("NFKC", name)
    s = "".join(ch for ch in s if unicodedata.category(ch) not in ("Cc", "Cf") or ch.isspace())
    s = unicodedata.normalize("NFKC", s.casefold().translate(_APOSTROPHES))
    s = _WS.sub(" ", s).strip()
    s = _CJK_GAP.sub("", s)
    s = _trim(s)
    s = _POSSESSIVE.sub("", s)
    return _trim(s)


# extraction output names the same entities over and over (every relation repeats two names)
@lru_cache(maxsize=65536)
def normalize_key(name: str) -> str:
    """The key of an entity name: NFKC, casefolded, one space between words, no surrounding
    punctuation or quotes, no trailing possessive "'s"; "" when nothing is left.

    Iterated to a fixed point so that normalize_key(normalize_key(x)) == normalize_key(x) holds
    even for the rare strings where casefolding or trimming exposes more to normalize.
    """
    s = name or ""
    for _ in range(8):
        nxt = _once(s)
        if nxt == s:
            break
        s = nxt
    return s


@lru_cache(maxsize=65536)
def clean_name(name: str) -> str:
    """A display name: surrounding quotes, markup and whitespace removed, case kept."""
    s = unicodedata.normalize("NFKC", name or "")
    s = "".join(ch for ch in s if unicodedata.category(ch) not in ("Cc", "Cf") or ch.isspace())
    s = _WS.sub(" ", s).strip()
    s = _CJK_GAP.sub("", s)
    s = _trim(s)
    return re.sub(r"(?<=\w)['’]s$", "", s).strip()
