"""Measuring the activation ranges the int8 graph is smoothed with, once, at preparation.

The calibration texts (kbgraph/data/embedder_calibration.json) run through the exact graph with
every smoothed product's input captured as an output; the per-channel maxima become the smoothing
scales (smoothing.py) of the prepared graph.
"""

from __future__ import annotations

import json

import numpy as np

from kbgraph.llm.e5.graph import _bert_graph
from kbgraph.llm.e5.runtime import _EmbeddingTable, _runs_of_one_length, _session
from kbgraph.llm.e5.smoothing import _SMOOTHED
from kbgraph.llm.e5.tokenizer import _PieceIndex
from kbgraph.llm.e5.weights import WeightFile

_CALIBRATION = "embedder_calibration.json"


def _activation_maxima(weights: WeightFile, pieces: _PieceIndex, normalize: dict[int, str | None]
                       ) -> dict[str, np.ndarray]:
    """max |x| per input channel of every smoothed product, over the tokens of the calibration
    texts (kbgraph/data/embedder_calibration.json: English, Chinese and a little else) run through
    the exact graph. A few thousand tokens settle them."""
    from importlib.resources import files

    texts = json.loads(files("kbgraph").joinpath("data", _CALIBRATION).read_text(encoding="utf-8"))["texts"]
    prefixed = [("query: " if t.rstrip().endswith(("?", "？")) else "passage: ") + t.translate(normalize)
                for t in texts]
    width = weights.shape.max_positions - 2
    windows = [ids[:width] for ids in pieces.encode(prefixed)]
    session = _session(_bert_graph(weights, exact=True, capture=True))
    names = [f"l{i}.{part}.in" for i in range(weights.shape.layers) for part in _SMOOTHED]
    table = _EmbeddingTable(weights)
    maxima: dict[str, np.ndarray] = {}
    for run in _runs_of_one_length(windows):
        values = session.run(names, {"embeddings": table.inputs([windows[i] for i in run])})
        for name, value in zip(names, values):
            peak = np.abs(value).max(axis=(0, 1))
            key = name.removesuffix(".in")
            maxima[key] = np.maximum(maxima[key], peak) if key in maxima else peak
    return maxima
