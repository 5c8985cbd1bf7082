"""The full-text tokenizer: normalization, stemming, CJK segmentation, query handling, safety."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbgraph.parse import token_string, tokenize, tokenize_query
from kbgraph.parse.tokenize import token_string_of

BOOK = Path("/work/shared/data/christmas-carol/book.txt")
# Letters, digits and CJK only: valid FTS5 barewords and single whitespace-analyzer tokens.
SAFE_TOKEN = re.compile(r"[^\W_]+")


def test_english_words_are_lowercased_and_split() -> None:
    assert tokenize("The Glass Tower, in VARROW!") == ["the", "glass", "tower", "in", "varrow"]


def test_full_width_is_normalized() -> None:
    assert tokenize("ＡＢＣ　１２３ Ｔｏｗｅｒ") == ["abc", "123", "tower"]


@pytest.mark.parametrize(
    "word,stem",
    [
        ("marley's", "marley"),
        ("Marley’s", "marley"),
        ("companies", "company"),
        ("ships", "ship"),
        ("classes", "class"),
        ("churches", "church"),
        ("boxes", "box"),
        ("running", "run"),
        ("making", "make"),
        ("founded", "found"),
        ("agreed", "agree"),
        ("charted", "chart"),
        ("buildings", "build"),
        # left alone: short words, -ss/-us/-is endings, words whose stem would have no vowel
        ("class", "class"),
        ("status", "status"),
        ("analysis", "analysis"),
        ("was", "was"),
        ("sing", "sing"),
        ("thing", "thing"),
        ("red", "red"),
        ("need", "need"),
        ("café", "café"),
    ],
)
def test_light_stemming(word: str, stem: str) -> None:
    assert tokenize(word) == [stem]


def test_singular_and_plural_meet() -> None:
    assert tokenize("harbor pilots charting coasts") == tokenize("harbors pilot charted coast")


def test_punctuation_and_special_characters_dropped() -> None:
    tokens = tokenize('"quoted" *star* ^caret col:on (paren) [x] {y} a+b a|b 50% #tag @user ~~ -- ... ?!')
    assert tokens == ["quot", "star", "caret", "col", "on", "paren", "x", "y", "a", "b", "a", "b", "50", "tag", "user"]
    assert tokenize("!!! ... --- ，。？") == []


def test_hyphens_underscores_and_decimals_split() -> None:
    assert tokenize("well-known snake_case 3.14") == ["well", "known", "snake", "case", "3", "14"]


def test_contractions_stay_one_token() -> None:
    assert tokenize("don't won’t") == ["dont", "wont"]


def test_chinese_sentence_is_segmented_into_words() -> None:
    tokens = tokenize("青岚书院位于江宁城外的青岚山下，以算学、天文和航海之学闻名。")
    assert {"书院", "位于", "江宁", "天文", "航海", "闻名"} <= set(tokens)
    assert all(len(t) < 6 for t in tokens)
    assert "，" not in tokens and "。" not in tokens


def test_mixed_chinese_and_latin() -> None:
    assert tokenize("最重要的航线通往Varrow港口") == ["最", "重要", "的", "航线", "通往", "varrow", "港口"]


def test_chinese_query_matches_document_tokens() -> None:
    document = tokenize("青岚书院的现任院长是韩子墨，他是一位精通历法的学者，主持书院已经十五年。")
    query = tokenize_query("青岚书院的院长是谁？")
    assert query == ["青岚", "书院", "院长"]
    assert set(query) <= set(document)


def test_english_query_drops_stop_words_and_duplicates() -> None:
    query = tokenize_query("Who founded the guild that is headquartered in the Glass Tower, the tower?")
    assert query == ["found", "guild", "headquarter", "glass", "tower"]
    assert set(query) <= set(tokenize("Mira Castell founded the guilds; their headquarters is the glass towers"))


def test_query_of_only_stop_words_is_kept() -> None:
    assert tokenize_query("The Who") == ["the", "who"]
    assert tokenize_query("") == []


def test_chinese_function_words_dropped_from_queries() -> None:
    assert tokenize_query("沈若溪在哪个天文台工作？") == ["沈若溪", "天文台", "工作"]


def test_token_string() -> None:
    assert token_string("Varrow's harbors 港口") == "varrow harbor 港口"
    assert token_string("") == ""


def test_book_tokens_are_safe() -> None:
    text = BOOK.read_text(encoding="utf-8")
    tokenize("warm up")
    tokens = tokenize(text)
    assert len(tokens) > 25_000
    assert all(SAFE_TOKEN.fullmatch(t) for t in tokens)
    assert "scrooge" in tokens and "marley" in tokens


def test_unassigned_code_points_in_cjk_ranges_are_no_tokens() -> None:
    # U+FADA lies in the CJK compatibility block but is unassigned: not a letter, so no token
    assert tokenize("a\ufadab \ufada 豈") == ["a", "b", "豈"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_tokens_never_hold_whitespace_or_fts_syntax(text: str) -> None:
    for token in tokenize(text):
        assert SAFE_TOKEN.fullmatch(token), repr(token)
    assert tokenize(text) == tokenize(text)
    assert token_string(text).split() == tokenize(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(list("abcXYZ019 _-.,;:!?'\"()[]{}<>/\\@#$%^&*+=~`|\n\t")
                                + ["\u2019", "\u201c", "\u201d", "\u2014", "\u2026", "\u00e9", "\u00df", "\u0130",
                                   "\u00a0", "\uff21", "\u00bd", "\u00b2", "\u2160", "\u0663", "\u00b7", "\u2022",
                                   "Marley's", "running", "don't"]), max_size=40).map("".join))
def test_ascii_split_matches_the_word_pattern(text: str) -> None:
    # the fast split of mostly-ASCII text must find exactly the words the pattern finds
    import unicodedata

    from kbgraph.parse.tokenize import _APOSTROPHE, _PLAIN_WORD, _stem

    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = _APOSTROPHE.sub("", folded)
    assert tokenize(text) == list(map(_stem, _PLAIN_WORD.findall(folded)))


_PIECES = st.sampled_from(["Marley's", "don't", "北京大学", "Ｆｕｌｌ", "ﬁne", "e\u0301", "\u0301x", "Straße", "a_b",
                           "running", "cats", "—", "’s", "x’", "東京タワー", "İstanbul", "٣", "", " ", "\u00a8",
                           "O'Neil"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_PIECES | st.text(max_size=6), max_size=4).map("".join), max_size=5))
def test_token_string_of_parts_equals_the_joined_text(parts: list[str]) -> None:
    assert token_string_of(parts) == token_string(" ".join(parts))
