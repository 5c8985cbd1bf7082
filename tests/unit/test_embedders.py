"""Embedders: hashing, OpenAI protocol (over the scripted scripted_llm), the local model, the cache."""

from __future__ import annotations


import numpy as np
import pytest
from support.scripted_llm import ScriptedError, ScriptedLLM  # tests/ is on sys.path (conftest)

from kbgraph.config import Settings
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
def test_local_loads_offline(local: LocalEmbedder) -> None:
    import os

    vecs = local.embed(["hello world", "a second sentence"])
    assert vecs.shape == (2, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    # a short text gives exactly what sentence-transformers itself computes
    ref = local.model.encode(["hello world"], normalize_embeddings=True)[0]
    assert np.allclose(vecs[0], ref, atol=1e-5)


@pytest.mark.slow
def test_local_long_text_uses_windows(local: LocalEmbedder) -> None:
    first = ("The harbour town lived on fishing; boats left before dawn and came back at noon "
             "with cod and herring for the market by the old stone church. ") * 10
    second = ("Meanwhile the university laboratory studied superconducting materials, cooling "
              "ceramic samples with liquid nitrogen and measuring their resistance. ") * 10
    tok = local.model.tokenizer
    n_first = len(tok(first, add_special_tokens=False)["input_ids"])
    n_all = len(tok(first + second, add_special_tokens=False)["input_ids"])
    assert n_first > 254 and n_all > 450
    whole, head, tail = local.embed([first + second, first, second])
    # one pass would truncate to the first 254 pieces and equal `head`; windows see the tail too
    assert cos(whole, head) < 0.97
    assert cos(whole, tail) > 0.5
    truncated = local.model.encode([first + second], normalize_embeddings=True)[0]
    assert cos(truncated, head) > cos(whole, head)


@pytest.mark.slow
def test_local_semantic_sanity(local: LocalEmbedder) -> None:
    q, para, other = local.embed([
        "How do I reset my password?",
        "What are the steps to change a forgotten login password?",
        "The recipe needs two cups of flour and an egg.",
    ])
    assert cos(q, para) > cos(q, other) + 0.3


@pytest.mark.slow
def test_local_through_cache(settings: Settings, local: LocalEmbedder) -> None:
    emb = CachedEmbedder(local, settings.cache_path)
    a = emb.embed(["cached text", "another"])
    b = emb.embed(["another", "cached text"])
    assert np.allclose(a[::-1], b)
