"""The one full-text tokenizer, used both for indexing and for queries.

Tokens are stored space-joined in ``*_ltks`` fields, so whatever engine indexes them (SQLite FTS5,
Elasticsearch's whitespace analyzer) sees exactly the tokens produced here; CJK works because
segmentation happens in Python with jieba rather than in the engine. Every token consists only of
letters, digits and CJK characters, so it is a valid FTS5 bareword and never needs escaping.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["tokenize", "tokenize_query", "token_string", "token_string_of", "ENGLISH_STOP_WORDS", "CHINESE_STOP_WORDS"]

# Han ideographs (incl. extension A and compatibility forms) and kana go to jieba; everything
# else that is a letter or digit is split on non-word characters like ordinary Latin text.
_CJK_CLASS = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_WORD = re.compile(f"[{_CJK_CLASS}]+|[^\\W_{_CJK_CLASS}]+")
# The possessive goes before splitting, else "marley's" would leave a stray "s" token; other inner
# apostrophes join their word ("don't" -> "dont") so contractions stay one token.
# One pass for both, and starting with the apostrophe so the regex engine can skip to the next one
# instead of trying a look-behind at every character.
_APOSTROPHE = re.compile(r"['\u2019](?<=\w['\u2019])(?:s\b|(?=\w))")
# Without CJK in the text, a word is just a run of letters and digits.
_PLAIN_WORD = re.compile(r"[^\W_]+")
# Every ASCII character that is not a letter or digit, and the non-ASCII punctuation common in
# English prose, becomes a space: text that is ASCII after that splits into the same words as
# _PLAIN_WORD finds, several times faster.
_COMMON_PUNCTUATION = "\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u2013\u2014\u2015\u2026\u00ab\u00bb\u00b7\u2022\u2032\u2033"
_TO_SPACE = str.maketrans({c: " " for c in [chr(i) for i in range(128) if not chr(i).isalnum()]
                           + list(_COMMON_PUNCTUATION)})

_ENGLISH_STOP_RAW = (
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing dont down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves tell give show find
    please""".split()
)
# Function words and question words: they carry no topic, and in a query they only add noise.
CHINESE_STOP_WORDS: frozenset[str] = frozenset(
    """的 了 是 在 和 与 及 或 并 而 也 都 就 还 又 被 把 将 对 从 向 于 以 为 由 之 其 这 那 这个 那个
    这些 那些 一个 有 没有 吗 呢 吧 啊 么 什么 谁 哪 哪个 哪些 哪里 哪儿 怎么 怎样 如何 为什么 多少 几 是否
    请 请问 我 你 他 她 它 我们 你们 他们 她们 它们 个 位 着 过 得 地 所 等""".split()
)

_jieba_lock = threading.Lock()
_jieba_cut = None


def _cut_cjk(run: str) -> list[str]:
    global _jieba_cut
    if _jieba_cut is None:
        # jieba builds its prefix dictionary on first use (~0.7 s); pay that only when CJK appears.
        with _jieba_lock:
            if _jieba_cut is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba_cut = jieba.lcut
    return _jieba_cut(run)


_VOWELS = frozenset("aeiou")


def _is_consonant(word: str, i: int) -> bool:
    ch = word[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _is_consonant(word, i - 1)
    return True


def _has_vowel(stem: str) -> bool:
    return any(not _is_consonant(stem, i) for i in range(len(stem)))


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences."""
    pattern = "".join("c" if _is_consonant(stem, i) else "v" for i in range(len(stem)))
    return len(re.findall("v+c+", pattern))


def _ends_cvc(stem: str) -> bool:
    if len(stem) < 3:
        return False
    return (
        _is_consonant(stem, len(stem) - 3)
        and not _is_consonant(stem, len(stem) - 2)
        and _is_consonant(stem, len(stem) - 1)
        and stem[-1] not in "wxy"
    )


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    """Conservative English suffix stripping (plurals, -ed, -ing), modelled on Porter's step 1.

    Only plain ASCII words of four or more letters are touched, and words ending in -ss/-us/-is
    keep their s ("class", "status", "analysis"), so short and foreign words pass through as is.
    """
    if len(word) < 4 or not word.isascii() or not word.isalpha():
        return word
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ies"):
        word = word[:-3] + ("y" if len(word) > 4 else "ie")
    elif word.endswith(("ches", "shes", "xes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]

    if word.endswith("eed"):
        if _measure(word[:-3]) > 0:
            word = word[:-1]
        return word
    for suffix in ("ing", "ed"):
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            if len(stem) >= 2 and _has_vowel(stem):
                return _tidy_stem(stem)
            return word
    return word


def _tidy_stem(stem: str) -> str:
    # After -ed/-ing, undo spelling changes so "running"/"run" and "making"/"make" meet.
    if stem.endswith(("at", "bl", "iz")):
        return stem + "e"
    if len(stem) >= 2 and stem[-1] == stem[-2] and _is_consonant(stem, len(stem) - 1) and stem[-1] not in "lsz":
        return stem[:-1]
    if _measure(stem) == 1 and _ends_cvc(stem):
        return stem + "e"
    return stem


# Queries are stemmed before the stop-word check, so the list holds both forms ("doing" -> "do").
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(_ENGLISH_STOP_RAW) | frozenset(map(_stem, _ENGLISH_STOP_RAW))


def tokenize(text: str) -> list[str]:
    """Split ``text`` into normalized full-text tokens (lower-cased, stemmed, CJK segmented)."""
    if not text:
        return []
    text = unicodedata.normalize("NFKC", text).casefold()
    if "'" in text or "\u2019" in text:
        text = _APOSTROPHE.sub("", text)
    spaced = text.translate(_TO_SPACE)
    if spaced.isascii():  # the most common case, split without a regular expression
        return list(map(_stem, spaced.split()))
    if _CJK_RUN.search(text) is None:  # every word is stemmed, none segmented
        return list(map(_stem, _PLAIN_WORD.findall(text)))
    tokens: list[str] = []
    for match in _WORD.finditer(text):
        piece = match.group()
        if _CJK_RUN.fullmatch(piece):
            # the CJK ranges hold unassigned code points too (U+FADA...), which are no letters:
            # keep only the word characters of what jieba returns
            tokens.extend(word for tok in _cut_cjk(piece) for word in _PLAIN_WORD.findall(tok))
        else:
            tokens.append(_stem(piece))
    return tokens


def tokenize_query(text: str) -> list[str]:
    """Tokens of a search query: stop words dropped, duplicates removed, order kept.

    A query made only of stop words keeps them rather than becoming empty, so "The Who" still
    searches for something.
    """
    tokens = tokenize(text)
    content = [t for t in tokens if t not in ENGLISH_STOP_WORDS and t not in CHINESE_STOP_WORDS]
    return list(dict.fromkeys(content or tokens))


def token_string(text: str) -> str:
    """The value stored in ``*_ltks`` fields."""
    return " ".join(tokenize(text))


@lru_cache(maxsize=32_768)
def _part_tokens(text: str) -> str:
    return token_string(text)


def token_string_of(parts: Iterable[str]) -> str:
    """``token_string(" ".join(parts))``, from each part's own (cached) tokens: tokens never span
    a space (normalization, the possessive rule, word runs and CJK segmentation all stop at one),
    so the parts tokenize alone to the same. Graph rows are made of the same few names and
    descriptions over and over (MuSiQue: 37k rows, 8k distinct descriptions)."""
    return " ".join(tokens for tokens in map(_part_tokens, parts) if tokens)
