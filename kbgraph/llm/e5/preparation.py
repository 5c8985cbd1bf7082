"""Preparing the model once per machine, into a per-user cache shared by every installation.

From the weight file it writes ``encoder.onnx`` (graph.py, smoothed with calibration.py's ranges),
the piece table and ``tokenizer.json`` (tokenizer.py) and ``normalize.json`` (the code point map).
Preparing takes about five seconds and happens in a per-user cache (``embedding_model_cache``),
under a file lock so concurrent processes prepare it once, in a folder named by the weights'
contents and ``_FORMAT``: every installation of the same package shares it
(kbgraph/utils/user_cache.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from kbgraph.llm.e5.calibration import _activation_maxima
from kbgraph.llm.e5.graph import _bert_graph
from kbgraph.llm.e5.tokenizer import _PieceIndex, _tokenizer_json, _write_piece_table
from kbgraph.llm.e5.weights import WeightFile
from kbgraph.utils.user_cache import cache_dir, content_key, mark_used, prune_unused

# bump when the prepared files change shape, so an old cache is never read by new code
# (3: the graph takes an int32 mask and is written with onnxruntime's fused int8 operators;
#  4: the feed-forward products are MatMulNBits on the file's own 4-bit weights, fp32 activations;
#  7: no padding mask, one window length per run; 5 and 6 were experiments: never reuse them;
#  8: q/k/v, attention output and feed-forward up projection int8, smoothed with calibrated ranges)
_FORMAT = 8


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


__all__ = ["default_cache_root", "prepare", "prepared_dir"]
