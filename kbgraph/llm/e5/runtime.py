"""Running the encoder graph: the onnxruntime session, the model's input embeddings, and windows
grouped by length (the graph takes windows of one length per run).

Shared by calibration.py (which runs the exact graph once, at preparation) and encoder.py (which
runs the prepared graph for every batch), so neither imports the other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kbgraph.llm.e5.weights import WeightFile, dequantize_q4


def _session(model: str | bytes, threads: int = 1) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


class _EmbeddingTable:
    """The model's input embeddings: word rows (4-bit, memory-mapped in the weight file) plus
    positions plus the token type, for windows given as token ids."""

    def __init__(self, weights: WeightFile) -> None:
        shape = weights.shape
        self.special = weights.special
        self.dim = shape.hidden
        self.word = weights.q4_blocks("emb.word", shape.vocab)
        self.positions = weights.floats("emb.pos").reshape(shape.max_positions, shape.hidden)
        self.token_type = weights.floats("emb.type")[:shape.hidden]

    def inputs(self, windows: list[list[int]]) -> np.ndarray:
        """(len(windows), length + 2, dim): windows of one length as <s> ... </s> embeddings."""
        sp = self.special
        ids = np.array([[sp.bos, *window, sp.eos] for window in windows], dtype=np.int64)
        embeddings = dequantize_q4(self.word[ids.ravel()]).reshape(*ids.shape, self.dim)
        embeddings += self.positions[:ids.shape[1]]
        embeddings += self.token_type
        return embeddings


def _runs_of_one_length(windows: list[list[int]]) -> list[list[int]]:
    """The indices of ``windows`` grouped by window length."""
    runs: dict[int, list[int]] = {}
    for i, window in enumerate(windows):
        runs.setdefault(len(window), []).append(i)
    return list(runs.values())
