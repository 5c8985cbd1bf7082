"""The encoder as an ONNX graph: the 12 BERT layers in onnxruntime's fused CPU operators.

Written with the protobuf encoder in onnx_proto.py, so neither the ``onnx`` package nor
onnxruntime's quantization tools are needed. Three of a layer's four matrix products run in int8;
their inputs are *smoothed* (SmoothQuant, smoothing.py) with activation ranges measured once, at
preparation (calibration.py). The feed-forward down projection runs on the file's exact 4-bit
weights.

The nodes and initializers are written in a fixed order, so the same weights and ranges always
give the same bytes: the prepared cache (preparation.py) is keyed by the weights and the format
number, not by the graph's bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import kbgraph.llm.e5.onnx_proto as proto
from kbgraph.llm.e5.smoothing import _SMOOTHED, _smoothing_scales
from kbgraph.llm.e5.weights import _QK, WeightFile, _int8_columns, _nbits_blocks


class _GraphWriter:
    """The nodes and initializers written so far, in the order written, and how a product is
    written: ``exact`` (fp32 MatMul) or int8, smoothed by ``scales``, with each smoothed product's
    input added as an output when ``capture``."""

    def __init__(self, weights: WeightFile, scales: dict[str, np.ndarray], *, exact: bool,
                 capture: bool) -> None:
        self.weights = weights
        self.scales = scales
        self.exact = exact
        self.capture = capture
        self.nodes: list[proto.Node] = []
        self.inits: list[bytes] = []

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(proto.tensor(name, value))
        return name

    def node(self, op: str, inputs: list[str], output: str, domain: str = "com.microsoft", **attrs: Any) -> str:
        self.nodes.append(proto.Node(op, inputs, [output], domain, attrs))
        return output

    def matmul(self, x: str, prefix: str, rows: int, scale: np.ndarray | None, *, with_bias: bool,
               out_scale: np.ndarray | None = None) -> str:
        """x · W^T (+ bias) for the (rows, in) weight ``prefix``. ``x`` arrives divided by ``scale``
        per input channel, so W's columns are multiplied by it; ``out_scale`` divides the output
        channels (and the bias), folding the next product's smoothing in."""
        weight = self.weights.dequantized(prefix + ".w", rows)
        b = self.weights.floats(prefix + ".b") if with_bias else None
        if scale is not None:
            weight = weight * scale[None, :]
        if out_scale is not None:
            weight = weight / out_scale[:, None]
            b = b / out_scale if b is not None else None
        if self.exact:
            out = self.node("MatMul", [x, self.const(prefix + ".wt", np.ascontiguousarray(weight.T))],
                            prefix + ".mm", "")
            if b is None:
                return out
            return self.node("Add", [out, self.const(prefix + ".b", b.astype(np.float32))], prefix + ".out", "")
        quantized, column_scales = _int8_columns(weight)
        inputs = [x, self.const(prefix + ".wq", quantized), self.const(prefix + ".ws", column_scales), ""]
        if b is not None:
            inputs.append(self.const(prefix + ".b", b.astype(np.float32)))
        return self.node("DynamicQuantizeMatMul", inputs, prefix + ".out")

    def exact_matmul(self, x: str, prefix: str, rows: int) -> str:
        blocks = self.weights.q4_blocks(prefix + ".w", rows)
        packed, block_scales = _nbits_blocks(blocks)
        return self.node("MatMulNBits", [x, self.const(prefix + ".wq", packed), self.const(prefix + ".ws", block_scales)],
                         prefix + ".out", K=blocks.shape[1] * _QK, N=rows, bits=4, block_size=_QK,
                         accuracy_level=0)

    def smoothed(self, x: str, key: str) -> tuple[str, np.ndarray | None]:
        """``x`` divided by the smoothing scale of the product(s) ``key`` reads it with."""
        if self.capture:
            self.node("Identity", [x], key + ".in", "")
        scale = self.scales.get(key)
        if scale is None:
            return x, None
        inverse = self.const(key + ".inv", (1.0 / scale).astype(np.float32))
        return self.node("Mul", [x, inverse], key + ".smooth", ""), scale

    def bias(self, prefix: str) -> str:
        return self.const(prefix + ".b", self.weights.floats(prefix + ".b"))

    def norm(self, prefix: str) -> list[str]:
        return [self.const(prefix + ".gamma", self.weights.floats(prefix + ".w")), self.bias(prefix)]


def _attention_block(g: _GraphWriter, x: str, p: str) -> str:
    """Layer ``p``'s self-attention, then residual + layer norm."""
    s = g.weights.shape
    xs, scale = g.smoothed(x, p + ".qkv")
    # the attention output's smoothing is folded into v: the context is a mix of v's rows
    q, k, v = [g.matmul(xs, f"{p}.{part}", s.hidden, scale, with_bias=True,
                        out_scale=g.scales.get(p + ".ao") if part == "v" else None) for part in "qkv"]
    context = g.node("MultiHeadAttention", [q, k, v], p + ".ctx", num_heads=s.heads)
    if g.capture:
        g.node("Identity", [context], p + ".ao.in", "")
    attended = g.matmul(context, p + ".ao", s.hidden, g.scales.get(p + ".ao"), with_bias=False)
    # the attention output's bias goes in after the product, so it takes no smoothing
    return g.node("SkipLayerNormalization", [attended, x, *g.norm(p + ".aln"), g.bias(p + ".ao")], p + ".x1",
                  epsilon=s.eps)


def _feed_forward_block(g: _GraphWriter, x: str, p: str) -> str:
    """Layer ``p``'s feed-forward network, then residual + layer norm."""
    s = g.weights.shape
    xs, scale = g.smoothed(x, p + ".fi")
    # exact (erf) GELU, as the model was trained
    inner = g.node("BiasGelu", [g.matmul(xs, p + ".fi", s.ffn, scale, with_bias=False), g.bias(p + ".fi")],
                   p + ".gelu")
    return g.node("SkipLayerNormalization", [g.exact_matmul(inner, p + ".fo", s.hidden), x,
                                             *g.norm(p + ".oln"), g.bias(p + ".fo")], p + ".x2", epsilon=s.eps)


def _bert_graph(weights: WeightFile, maxima: dict[str, np.ndarray] | None = None, *,
                exact: bool = False, capture: bool = False) -> bytes:
    """The encoder as a serialized ONNX model: the embeddings of windows of one length in (word
    rows already added), their mean-pooled vectors out.

    There is no padding and so no mask: onnxruntime's MultiHeadAttention takes its fused kernel
    only without a key padding mask (about half the attention's time), and a run of windows of one
    length needs none.

    It is written with onnxruntime's fused CPU operators (com.microsoft domain): one
    MultiHeadAttention per layer, SkipLayerNormalization for residual + layer norm, BiasGelu for
    bias + exact GELU. The feed-forward down projection is MatMulNBits on the file's exact 4-bit
    weights with fp32 activations. The other products are

    - in the prepared graph: DynamicQuantizeMatMul (activations quantized to uint8 per run with one
      range, weights int8 with one scale per output column), *smoothed* with the activation
      ``maxima`` (see _smoothing_scales): cosine to the exact model 0.9997 min on MuSiQue passages,
      closer than the same graph with all feed-forward products exact and nothing smoothed, at
      1.3 times its speed (bench/README.md);
    - with ``exact`` (the reference, and the graph that measures the maxima): fp32 MatMul on the
      file's dequantized 4-bit weights, the model exactly; with ``maxima`` the same smoothing
      rewrites it (an identity in exact arithmetic, which a test checks).

    ``capture`` adds each smoothed product's input as a graph output (``l{i}.{product}.in``).
    """
    s = weights.shape
    scales = _smoothing_scales(weights, maxima) if maxima is not None else {}
    g = _GraphWriter(weights, scales, exact=exact, capture=capture)
    x = g.node("LayerNormalization", ["embeddings", *g.norm("emb.ln")], "emb.ln.out", "", axis=-1,
               epsilon=s.eps)
    for i in range(s.layers):
        x = _attention_block(g, x, f"l{i}")
        x = _feed_forward_block(g, x, f"l{i}")
    g.node("ReduceMean", [x], "pooled", "", axes=[1], keepdims=0)
    outputs = [proto.value_info("pooled", proto.FLOAT, ["batch", s.hidden])]
    if capture:
        outputs += [proto.value_info(f"l{i}.{part}.in", proto.FLOAT, ["batch", "tokens", s.hidden])
                    for i in range(s.layers) for part in _SMOOTHED]
    return proto.model(
        g.nodes, g.inits,
        [proto.value_info("embeddings", proto.FLOAT, ["batch", "tokens", s.hidden])],
        outputs, opsets={"": 17, "com.microsoft": 1}, name="e5_encoder")
