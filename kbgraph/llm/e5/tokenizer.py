"""The XLM-RoBERTa unigram tokenizer, built per batch from a memory-mapped piece table.

- ``pieces.npy`` / ``piece_ids.npy``: the vocabulary sorted as UTF-8 bytes, memory-mapped, from
  which each batch gets a unigram tokenizer (``tokenizers``, Rust) over just the pieces its words
  can hold: the same tokens as the whole vocabulary's tokenizer, whose 250k-piece lattice would
  hold ~280 MB for the life of the process;
- ``tokenizer.json``: that whole-vocabulary tokenizer, the reference the tests compare with.

The code point map (``normalize.json``) is applied before either, with ``str.translate``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from kbgraph.llm.e5.weights import WeightFile

# the SentencePiece mark for a word start
_METASPACE = "\u2581"
# what the tokenizer's normalizer does before its pre-tokenizer splits at spaces
_SPACE_RUNS = re.compile(" {2,}")
# words whose vocabulary pieces are remembered (a common word recurs in most batches); ~10 MB
_WORD_CACHE = 50_000


class _PieceIndex:
    """The vocabulary as a sorted byte-string array (``pieces.npy`` / ``piece_ids.npy``,
    memory-mapped: nothing to load), to build a small unigram tokenizer per batch from just the
    pieces its words can hold.

    Unigram segmentation only ever uses pieces that occur in the text, within one word (the
    pre-tokenizer splits at spaces), so restricting the lattice to the substrings of the batch's
    words gives the same tokens, provided the unknown-piece penalty (the lowest score minus 10)
    stays the same: the lowest-scoring piece is always kept in, and so are the special pieces.
    """

    def __init__(self, folder: Path, weights: WeightFile) -> None:
        self.weights = weights
        self.sorted = np.load(folder / "pieces.npy", mmap_mode="r")
        self.sorted_ids = np.load(folder / "piece_ids.npy", mmap_mode="r")
        self.widest = self.sorted.dtype.itemsize  # bytes of the longest piece
        sp = weights.special
        self.always = frozenset({sp.bos, sp.pad, sp.eos, sp.unk, int(np.argmin(weights.scores))})
        self.unk = sp.unk
        self.special_ids = (sp.bos, sp.pad, sp.eos, sp.unk)
        self._by_word: dict[str, tuple[int, ...]] = {}
        self._piece: dict[int, tuple[str, float]] = {}

    def ids_in(self, words: set[str]) -> set[int]:
        """Ids of every vocabulary piece inside some word (with its word-start mark)."""
        found = set(self.always)
        new = []
        for word in words:
            known = self._by_word.get(word)
            if known is None:
                new.append(word)
            else:
                found.update(known)
        if new:
            if len(self._by_word) + len(new) > _WORD_CACHE:
                self._by_word = {}
            for word, ids in zip(new, self._lookup(new)):
                self._by_word[word] = ids
                found.update(ids)
        return found

    def _lookup(self, words: list[str]) -> list[tuple[int, ...]]:
        widest = self.widest
        owners: list[int] = []
        candidates: list[bytes] = []
        for number, word in enumerate(words):
            marked = _METASPACE + word
            n = len(marked)
            substrings = {marked[start:end].encode("utf-8") for start in range(n)
                          for end in range(start + 1, min(n, start + widest) + 1)}
            fitting = [c for c in substrings if len(c) <= widest]
            candidates += fitting
            owners += [number] * len(fitting)
        if not candidates:
            return [()] * len(words)
        wanted = np.array(candidates, dtype=self.sorted.dtype)
        at = np.minimum(np.searchsorted(self.sorted, wanted), len(self.sorted) - 1)
        hit = self.sorted[at] == wanted
        ids: list[list[int]] = [[] for _ in words]
        for owner, piece in zip(np.asarray(owners)[hit].tolist(), self.sorted_ids[at[hit]].tolist()):
            ids[owner].append(piece)
        return [tuple(i) for i in ids]

    def _pieces_of(self, chosen: list[int]) -> list[tuple[str, float]]:
        missing = [i for i in chosen if i not in self._piece]
        if missing:
            scores = self.weights.scores[missing].astype(float).tolist()
            self._piece.update(zip(missing, zip(self.weights.pieces(missing), scores)))
        return [self._piece[i] for i in chosen]

    def encode(self, normalized: list[str]) -> list[list[int]]:
        """Token ids of texts already mapped through the code point table."""
        from tokenizers.models import Unigram

        words = {w for text in normalized for w in _SPACE_RUNS.sub(" ", text).split(" ")}
        chosen = sorted(self.ids_in(words))
        vocab = self._pieces_of(chosen)
        position = {piece_id: n for n, piece_id in enumerate(chosen)}
        specials = [vocab[position[i]][0] for i in self.special_ids]
        tok = _unigram_tokenizer(Unigram(vocab, unk_id=position[self.unk]), specials)
        return [[chosen[i] for i in e.ids] for e in tok.encode_batch(normalized, add_special_tokens=False)]


def _unigram_tokenizer(model: Any, special_pieces: list[str]) -> Any:
    """XLM-RoBERTa's pipeline around a unigram model; the code point map is applied before it."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers

    tok = Tokenizer(model)
    tok.normalizer = normalizers.Replace(Regex(" {2,}"), " ")
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=_METASPACE, prepend_scheme="always")
    tok.add_special_tokens(special_pieces)
    return tok


def _tokenizer_json(weights: WeightFile) -> str:
    """The XLM-RoBERTa unigram tokenizer for ``tokenizers``; normalization is done before it."""
    from tokenizers.models import Unigram

    sp = weights.special
    pieces = weights.pieces()
    model = Unigram(list(zip(pieces, weights.scores.astype(float).tolist())), unk_id=sp.unk)
    return _unigram_tokenizer(model, [pieces[i] for i in (sp.bos, sp.pad, sp.eos, sp.unk)]).to_str()


def _write_piece_table(weights: WeightFile, target: Path) -> None:
    """The pieces as UTF-8 byte strings in sorted order, with their ids, for _PieceIndex."""
    encoded = np.array([p.encode("utf-8") for p in weights.pieces()])
    order = np.argsort(encoded, kind="stable")
    np.save(target / "pieces.npy", encoded[order])
    np.save(target / "piece_ids.npy", order.astype(np.int32))
