"""kbgraph's own ONNX writer (kbgraph/llm/e5/onnx_proto.py), checked by the parser that matters:
onnxruntime loads what it writes and computes with it."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import kbgraph.llm.e5.onnx_proto as proto


def session(model: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def test_a_small_graph_with_every_field_kind_runs() -> None:
    # int64 initializers with negative values (ten-byte varints), float / int / ints attributes,
    # a symbolic and a fixed dimension, two outputs
    nodes = [
        proto.Node("Mul", ["x", "two"], ["doubled"]),
        proto.Node("Reshape", ["doubled", "shape"], ["flat"]),
        proto.Node("LayerNormalization", ["x", "gamma", "beta"], ["normed"], "",
                   {"axis": -1, "epsilon": 1e-5}),
        proto.Node("Transpose", ["normed"], ["turned"], "", {"perm": [1, 0]}),
    ]
    inits = [proto.tensor("two", np.array(2.0, dtype=np.float32)),
             proto.tensor("shape", np.array([-1], dtype=np.int64)),
             proto.tensor("gamma", np.array([1.0, 2.0, 3.0], dtype=np.float32)),
             proto.tensor("beta", np.zeros(3, dtype=np.float32))]
    model = proto.model(nodes, inits, [proto.value_info("x", proto.FLOAT, ["rows", 3])],
                        [proto.value_info("flat", proto.FLOAT, ["n"]),
                         proto.value_info("turned", proto.FLOAT, [3, "rows"])],
                        opsets={"": 17}, name="check")
    x = np.array([[1.0, 2.0, 3.0], [4.0, 4.0, 4.0]], dtype=np.float32)
    flat, turned = session(model).run(["flat", "turned"], {"x": x})
    assert flat.tolist() == [2.0, 4.0, 6.0, 8.0, 8.0, 8.0]
    row = (x[0] - x[0].mean()) / np.sqrt(x[0].var() + 1e-5) * [1.0, 2.0, 3.0]
    assert np.allclose(turned[:, 0], row, atol=1e-5) and np.allclose(turned[:, 1], 0.0)


def test_int8_weights_in_a_contrib_operator() -> None:
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((8, 4)).astype(np.float32)  # (in, out)
    # 7-bit weights: on a CPU without VNNI (AVX2 only), onnxruntime's u8 x s8 kernel adds pairs of
    # products in 16 bits, which 8-bit weights of random data overflow (onnxruntime's reduce_range);
    # this test is about the writer, not that kernel. The embedder's own 8-bit weights meet smoothed
    # activations (tests/unit/test_embedders.py holds it to the reference engine)
    scales = (np.abs(weights).max(axis=0) / 63).astype(np.float32)
    quantized = np.rint(weights / scales).astype(np.int8)
    model = proto.model(
        [proto.Node("DynamicQuantizeMatMul", ["x", "w", "s", "", "b"], ["y"], "com.microsoft")],
        [proto.tensor("w", quantized), proto.tensor("s", scales),
         proto.tensor("b", np.arange(4, dtype=np.float32))],
        [proto.value_info("x", proto.FLOAT, ["rows", 8])], [proto.value_info("y", proto.FLOAT, ["rows", 4])],
        opsets={"": 17, "com.microsoft": 1}, name="int8")
    x = rng.standard_normal((5, 8)).astype(np.float32)
    (y,) = session(model).run(["y"], {"x": x})
    assert np.allclose(y, x @ weights + np.arange(4), atol=0.1)


def test_unsupported_tensor_types_are_refused() -> None:
    with pytest.raises(TypeError, match="no ONNX tensor type"):
        proto.tensor("t", np.array([1.0], dtype=np.float64))
