"""Entity keys: stable, idempotent, width- and case-insensitive."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbgraph.graph.keys import clean_name, normalize_key


@pytest.mark.parametrize(("raw", "key"), [
    ("Ebenezer Scrooge", "ebenezer scrooge"),
    ('  "EBENEZER   SCROOGE" ', "ebenezer scrooge"),
    ("Scrooge's", "scrooge"),
    ("Scrooge’s", "scrooge"),
    ("**Bob Cratchit**", "bob cratchit"),
    ("(Scrooge)", "scrooge"),
    ("Bank of England.", "bank of england"),
    ("ＡＢＣ　Ｃｏｒｐ", "abc corp"),  # full width letters and space
    ("清华 大学", "清华大学"),  # spaces between CJK characters do not matter
    ("《红楼梦》", "红楼梦"),
    ("「北京」。", "北京"),
    ("C#", "c#"),
    ("C++", "c++"),
    ("apple (company)", "apple (company)"),
    ("(R)-ketamine", "(r)-ketamine"),
    ("Straße", "strasse"),
    ("zero\u200bwidth", "zerowidth"),
    ("...", ""),
    ("", ""),
    ("   ", ""),
])
def test_examples(raw: str, key: str) -> None:
    assert normalize_key(raw) == key


def test_article_is_kept() -> None:
    # predictable on purpose: "The Hague" and "Hague" are different keys
    assert normalize_key("The Hague") == "the hague"


def test_clean_name_keeps_case() -> None:
    assert clean_name('  "Mrs. Cratchit’s" ') == "Mrs. Cratchit"
    assert clean_name("**London**") == "London"


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=40))
def test_idempotent(text: str) -> None:
    once = normalize_key(text)
    assert normalize_key(once) == once


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(categories=["L", "N", "Zs", "P"]), max_size=30))
def test_no_surrounding_space_or_double_space(text: str) -> None:
    key = normalize_key(text)
    assert key == key.strip() and "  " not in key
