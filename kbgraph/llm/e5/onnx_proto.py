"""Writing an ONNX model file without the ``onnx`` package.

An ONNX file is one protobuf message (``ModelProto``). kbgraph writes exactly one graph, once per
machine (kbgraph/llm/e5/graph.py), and needs only a handful of its fields, so it encodes them
directly in protobuf's wire format instead of installing ``onnx`` (~28 MB with ml_dtypes) for it.
Field numbers are those of onnx.proto (github.com/onnx/onnx/blob/main/onnx/onnx.proto); onnxruntime
parses the result, which is what checks it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

# TensorProto.DataType
FLOAT, UINT8, INT8, INT32, INT64 = 1, 2, 3, 6, 7
_DATA_TYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.uint8): UINT8, np.dtype(np.int8): INT8,
               np.dtype(np.int32): INT32, np.dtype(np.int64): INT64}
# AttributeProto.AttributeType
_ATTR_FLOAT, _ATTR_INT, _ATTR_STRING, _ATTR_INTS = 1, 2, 3, 7

_VARINT, _FIXED32, _LENGTH = 0, 5, 2


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s take ten bytes, as two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _int(number: int, value: int) -> bytes:
    return _key(number, _VARINT) + _varint(value)


def _float(number: int, value: float) -> bytes:
    return _key(number, _FIXED32) + struct.pack("<f", value)


def _bytes(number: int, value: bytes | str) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return _key(number, _LENGTH) + _varint(len(data)) + data


def _messages(number: int, messages: Iterable[bytes]) -> bytes:
    return b"".join(_bytes(number, m) for m in messages)


def tensor(name: str, value: np.ndarray) -> bytes:
    """TensorProto: dims 1, data_type 2, name 8, raw_data 9 (little-endian)."""
    array = np.ascontiguousarray(value)
    kind = _DATA_TYPES.get(array.dtype)
    if kind is None:
        raise TypeError(f"no ONNX tensor type for {array.dtype}")
    return (b"".join(_int(1, d) for d in array.shape) + _int(2, kind) + _bytes(8, name)
            + _bytes(9, array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()))


def _attribute(name: str, value: int | float | str | Sequence[int]) -> bytes:
    """AttributeProto: name 1, f 2, i 3, s 4, ints 8, type 20."""
    if isinstance(value, bool) or isinstance(value, int):
        return _bytes(1, name) + _int(3, int(value)) + _int(20, _ATTR_INT)
    if isinstance(value, float):
        return _bytes(1, name) + _float(2, value) + _int(20, _ATTR_FLOAT)
    if isinstance(value, str):
        return _bytes(1, name) + _bytes(4, value) + _int(20, _ATTR_STRING)
    return _bytes(1, name) + b"".join(_int(8, int(v)) for v in value) + _int(20, _ATTR_INTS)


@dataclass
class Node:
    op: str
    inputs: list[str]
    outputs: list[str]
    domain: str = ""
    attributes: dict[str, int | float | str | Sequence[int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        """NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7."""
        return (b"".join(_bytes(1, i) for i in self.inputs) + b"".join(_bytes(2, o) for o in self.outputs)
                + _bytes(3, self.outputs[0]) + _bytes(4, self.op)
                + _messages(5, (_attribute(k, v) for k, v in self.attributes.items()))
                + (_bytes(7, self.domain) if self.domain else b""))


def value_info(name: str, elem_type: int, dims: Sequence[int | str]) -> bytes:
    """ValueInfoProto (name 1, type 2) of a tensor: TypeProto.tensor_type 1 -> elem_type 1,
    shape 2 -> dim 1 -> dim_value 1 | dim_param 2."""
    dimensions = [_int(1, d) if isinstance(d, int) else _bytes(2, d) for d in dims]
    tensor_type = _int(1, elem_type) + _bytes(2, _messages(1, dimensions))
    return _bytes(1, name) + _bytes(2, _bytes(1, tensor_type))


def model(nodes: Sequence[Node], initializers: Sequence[bytes], inputs: Sequence[bytes],
          outputs: Sequence[bytes], *, opsets: dict[str, int], name: str, ir_version: int = 8) -> bytes:
    """ModelProto (ir_version 1, producer_name 2, graph 7, opset_import 8) around one GraphProto
    (node 1, name 2, initializer 5, input 11, output 12)."""
    graph = (_messages(1, (n.encode() for n in nodes)) + _bytes(2, name) + _messages(5, initializers)
             + _messages(11, inputs) + _messages(12, outputs))
    opset_ids = (_bytes(1, domain) + _int(2, version) if domain else _int(2, version)
                 for domain, version in opsets.items())
    return (_int(1, ir_version) + _bytes(2, "kbgraph") + _bytes(7, graph) + _messages(8, opset_ids))
