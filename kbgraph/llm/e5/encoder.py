"""The runtime encoder: token ids in, one mean-pooled vector per window out, one per process.

It opens the prepared files (preparation.py prepares them when missing): the ONNX graph in an
onnxruntime session, the code point map, the piece table for the tokenizer; the 250k-row
word-embedding table stays in the weight file (memory-mapped) and is dequantized per batch, so a
process opens in a tenth of a second.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from kbgraph.llm.e5.preparation import default_cache_root, prepared_dir
from kbgraph.llm.e5.runtime import _EmbeddingTable, _runs_of_one_length, _session
from kbgraph.llm.e5.tokenizer import _PieceIndex
from kbgraph.llm.e5.weights import WeightFile, bundled_weights


class E5Encoder:
    """multilingual-e5-small on onnxruntime: token ids in, one mean-pooled vector per window out.

    ``threads`` is the number of cores one call may use (onnxruntime's intra-op pool); more than
    the cores a process really has makes every call slower, not faster.
    """

    model_name = "multilingual-e5-small"
    query_prefix = "query: "
    passage_prefix = "passage: "

    def __init__(self, weights_path: Path, cache_root: Path, threads: int = 1) -> None:
        self.weights = WeightFile(weights_path)
        shape = self.weights.shape
        self.dim = shape.hidden
        self.special = self.weights.special
        self.max_tokens = shape.max_positions
        folder = prepared_dir(weights_path, cache_root)
        self._pieces: _PieceIndex | None = None
        self._pieces_lock = threading.Lock()
        self._folder = folder
        raw = json.loads((folder / "normalize.json").read_text(encoding="utf-8"))
        self._normalize = str.maketrans({int(cp): out or None for cp, out in raw.items()})
        self.session = _session(str(folder / "encoder.onnx"), threads)
        self._embeddings = _EmbeddingTable(self.weights)

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Content token ids (no <s> / </s>) of each text."""
        return self.pieces().encode([t.translate(self._normalize) for t in texts])

    def pieces(self) -> _PieceIndex:
        with self._pieces_lock:
            if self._pieces is None:
                self._pieces = _PieceIndex(self._folder, self.weights)
            return self._pieces

    def full_tokenizer(self) -> Any:
        """The whole vocabulary's tokenizer (~280 MB), which ``token_ids`` must equal (tests)."""
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(self._folder / "tokenizer.json"))

    def forward(self, windows: list[list[int]]) -> np.ndarray:
        """(len(windows), dim) mean-pooled, not normalized; each window gets <s> ... </s>.

        The graph has no padding mask, so each window length is one onnxruntime run: callers
        that batch windows of one length together get one run per batch."""
        pooled = np.zeros((len(windows), self.dim), dtype=np.float32)
        for run in _runs_of_one_length(windows):
            embeddings = self._embeddings.inputs([windows[i] for i in run])
            pooled[run] = self.session.run(["pooled"], {"embeddings": embeddings})[0]
        return pooled


_ENCODERS: dict[tuple[str, str, int], E5Encoder] = {}
_ENCODERS_LOCK = threading.Lock()


def shared_encoder(cache_root: Path | None = None, threads: int = 1) -> E5Encoder:
    """One encoder per process (per cache and thread count): loading it is the expensive part."""
    root = cache_root or default_cache_root()
    weights = bundled_weights()
    key = (str(weights), str(root), threads)
    with _ENCODERS_LOCK:
        if key not in _ENCODERS:
            _ENCODERS[key] = E5Encoder(weights, root, threads)
        return _ENCODERS[key]


__all__ = ["E5Encoder", "shared_encoder"]
