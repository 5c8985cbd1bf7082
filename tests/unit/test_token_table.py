"""The tiktoken encoding rebuilt from the prepared token table is tiktoken's own encoding."""

from __future__ import annotations

from pathlib import Path

import pytest
import tiktoken

from kbgraph.parse import token_table
from kbgraph.parse.token_count import ENCODING_NAME

TEXTS = [
    "The Lumen Cartographers Guild was founded in 812 by Mira Castell.\n\nIt kept the charts of Varrow.",
    "沈若溪是一位天文学家，出生于临川的一个书香人家。八二四年，她乘坐商船远渡西海。",
    "emoji 🚢⚓ and accents: café, naïve, Ærø; numbers 1234567 and 3.14159; tabs\tand  spaces   ",
    "text that looks special: <|endoftext|> <|fim_prefix|> stays ordinary text",
    "x" * 300 + " " + "ab" * 200,
]


def test_the_table_gives_tiktokens_encoding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = tiktoken.get_encoding(ENCODING_NAME)
    first = token_table.load_encoding(ENCODING_NAME, root=tmp_path)  # tiktoken's load, then the table
    tables = list(tmp_path.glob("*.npz"))
    assert len(tables) == 1

    def no_parse(name: str) -> tiktoken.Encoding:
        raise AssertionError("the encoding was parsed again instead of read from the table")

    monkeypatch.setattr(token_table.tiktoken, "get_encoding", no_parse)
    second = token_table.load_encoding(ENCODING_NAME, root=tmp_path)
    assert second.name == reference.name and second.n_vocab == reference.n_vocab
    assert second._mergeable_ranks == reference._mergeable_ranks
    assert second._special_tokens == reference._special_tokens and second._pat_str == reference._pat_str
    for text in TEXTS:
        assert second.encode_ordinary(text) == first.encode_ordinary(text) == reference.encode_ordinary(text)
    assert second.encode("<|endoftext|>", allowed_special="all") == reference.encode("<|endoftext|>",
                                                                                        allowed_special="all")


def test_a_damaged_table_is_replaced(tmp_path: Path) -> None:
    token_table.load_encoding(ENCODING_NAME, root=tmp_path)
    (table,) = tmp_path.glob("*.npz")
    table.write_bytes(b"not a table")
    encoding = token_table.load_encoding(ENCODING_NAME, root=tmp_path)
    assert encoding.encode_ordinary(TEXTS[0]) == tiktoken.get_encoding(ENCODING_NAME).encode_ordinary(TEXTS[0])
    assert table.stat().st_size > 1_000_000  # written anew
    assert token_table.load_encoding(ENCODING_NAME, root=tmp_path).n_vocab == encoding.n_vocab
