"""Which products of a layer run smoothed in int8, and their smoothing scales (SmoothQuant).

Separate from calibration.py, which measures the activation maxima these scales are made from by
running the graph: the graph builder needs the scales, and calibration needs the graph.
"""

from __future__ import annotations

import numpy as np

from kbgraph.llm.e5.weights import WeightFile

# The products of a layer that run in int8, by the activation they read: q/k/v (the layer's input),
# the attention output (the attention context) and the feed-forward up projection (the attention
# block's output). The feed-forward down projection reads the GELU output, whose tokens' ranges
# differ most (<s> and </s> run several times the others), and stays on the exact 4-bit weights.
_SMOOTHED = ("qkv", "ao", "fi")
# SmoothQuant's migration strength: 0.6 of each input channel's range moves into the weights
_SMOOTHING_ALPHA = 0.6


def _smoothing_scales(weights: WeightFile, maxima: dict[str, np.ndarray],
                      alpha: float = _SMOOTHING_ALPHA) -> dict[str, np.ndarray]:
    """Per input channel j of each smoothed product, s_j = max|X_j|^alpha / max|W_j|^(1-alpha)
    (SmoothQuant, Xiao et al. 2022): the graph feeds X/s and multiplies W's column j by s_j.

    Activations are quantized with one range for a whole run, so a few wide channels leave the
    narrow ones a handful of levels; dividing by s evens the channels out and hands part of the
    range to the weights, which have one scale per output column and quantize well. Keyed like
    the maxima, ``l{i}.{product}``."""
    s = weights.shape
    scales: dict[str, np.ndarray] = {}
    for i in range(s.layers):
        for part in _SMOOTHED:
            key = f"l{i}.{part}"
            # q, k and v read one input, so they share one scale
            names = [f"l{i}.{c}" for c in "qkv"] if part == "qkv" else [key]
            rows = s.ffn if part == "fi" else s.hidden
            weight_peak = np.max([np.abs(weights.dequantized(n + ".w", rows)).max(axis=0) for n in names],
                                 axis=0)
            scale = np.maximum(maxima[key], 1e-5) ** alpha / np.maximum(weight_peak, 1e-5) ** (1 - alpha)
            # only ratios between channels matter; centred on 1 for tidy numbers
            scales[key] = (scale / np.exp(np.log(scale).mean())).astype(np.float32)
    return scales
