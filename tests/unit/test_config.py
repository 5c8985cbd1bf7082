"""Settings: bad values fail with a message that names the setting."""

from __future__ import annotations

import pytest

from kbgraph.config import ConfigError, Settings, load_settings


@pytest.mark.parametrize("name", ["llm_concurrency", "embedding_concurrency", "embedding_batch_size"])
def test_counts_below_one_are_refused(name: str, tmp_path) -> None:
    with pytest.raises(ConfigError, match=name):
        load_settings(None, data_dir=tmp_path, **{name: 0})
    assert getattr(load_settings(None, data_dir=tmp_path, **{name: 2}), name) == 2


def test_environment_values_are_read_and_checked(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBGRAPH_EMBEDDING_CONCURRENCY", "3")
    assert load_settings(None, data_dir=tmp_path).embedding_concurrency == 3
    monkeypatch.setenv("KBGRAPH_EMBEDDING_CONCURRENCY", "three")
    with pytest.raises(ConfigError, match="embedding_concurrency"):
        load_settings(None, data_dir=tmp_path)


def test_overlap_must_be_smaller_than_chunk(tmp_path) -> None:
    with pytest.raises(ConfigError, match="chunk_overlap"):
        load_settings(None, data_dir=tmp_path, chunk_tokens=100, chunk_overlap=100)


def test_vector_weight_defaults_to_the_embedders_own(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KBGRAPH_VECTOR_SIMILARITY_WEIGHT", raising=False)
    assert load_settings(None, data_dir=tmp_path).hybrid_vector_weight == 0.7  # the bundled e5
    hashed = load_settings(None, data_dir=tmp_path, embedding_provider="hash")
    assert hashed.vector_similarity_weight is None and hashed.hybrid_vector_weight == 0.3
    assert load_settings(None, data_dir=tmp_path, embedding_provider="openai").hybrid_vector_weight == 0.3
    # a chosen weight wins over any embedder's, from the environment as from code
    monkeypatch.setenv("KBGRAPH_VECTOR_SIMILARITY_WEIGHT", "0.45")
    assert load_settings(None, data_dir=tmp_path, embedding_provider="hash").hybrid_vector_weight == 0.45
    monkeypatch.setenv("KBGRAPH_VECTOR_SIMILARITY_WEIGHT", "")
    assert load_settings(None, data_dir=tmp_path).vector_similarity_weight is None
    monkeypatch.delenv("KBGRAPH_VECTOR_SIMILARITY_WEIGHT")
    assert load_settings(None, data_dir=tmp_path, vector_similarity_weight=0.0).hybrid_vector_weight == 0.0
    with pytest.raises(ConfigError, match="vector_similarity_weight"):
        load_settings(None, data_dir=tmp_path, vector_similarity_weight=1.5)


@pytest.mark.parametrize("setting, made_from_chunks, chunk_value", [
    ("relation_vectors", "relation_vectors_from_chunks", "chunks"),
    ("entity_vectors", "entity_vectors_from_chunk", "chunk"),
])
def test_auto_makes_graph_row_vectors_from_chunks_for_the_local_embedder_only(setting: str, made_from_chunks: str,
                                                                               chunk_value: str) -> None:
    def chosen(provider: str, value: str = "auto") -> bool:
        return getattr(Settings(embedding_provider=provider, **{setting: value}), made_from_chunks)

    assert chosen("local")
    assert not chosen("openai") and not chosen("hash")
    assert chosen("openai", chunk_value)
    assert not chosen("local", "text")


@pytest.mark.parametrize("changes, setting", [
    ({"blob_store": "nfs"}, "blob_store"),
    ({"blob_store": "s3", "s3_bucket": "ab"}, "s3_bucket"),  # bucket names need 3 characters or more
    ({"blob_store": "s3", "s3_bucket": "Upper_Case"}, "s3_bucket"),
    ({"blob_store": "s3", "s3_prefix": "no-slash"}, "s3_prefix"),
    ({"blob_store": "s3", "s3_prefix": "../up/"}, "s3_prefix"),
    ({"blob_store": "s3", "s3_addressing_style": "dns"}, "s3_addressing_style"),
])
def test_blob_store_settings_are_checked(changes: dict[str, str], setting: str, tmp_path) -> None:
    with pytest.raises(ConfigError, match=setting):
        load_settings(data_dir=tmp_path, **changes)


def test_the_local_blob_store_defaults_to_the_data_dir(tmp_path) -> None:
    assert load_settings(data_dir=tmp_path).blob_path == tmp_path / "uploads"
    assert load_settings(data_dir=tmp_path, blob_dir=tmp_path / "elsewhere").blob_path == tmp_path / "elsewhere"
    assert load_settings(data_dir=tmp_path, blob_store="s3", s3_prefix="kbgraph/files/").s3_prefix == "kbgraph/files/"


@pytest.mark.parametrize("interval", ["-1", "0s", "soon", "1 s"])
def test_an_elasticsearch_refresh_interval_that_cannot_work_is_refused_at_start(interval: str, tmp_path) -> None:
    with pytest.raises(ConfigError, match="es_refresh_interval.*never"):
        load_settings(data_dir=tmp_path, store="elasticsearch", es_url="http://127.0.0.1:9", es_refresh_interval=interval)


@pytest.mark.parametrize("interval", ["1s", "250ms", "30s", "2m"])
def test_any_positive_refresh_interval_is_accepted(interval: str, tmp_path) -> None:
    # writes that must be visible refresh the index themselves: a long interval delays only what
    # other processes see of unrefreshed rows, it never makes a write time out
    settings = load_settings(data_dir=tmp_path, store="elasticsearch", es_url="http://127.0.0.1:9",
                             es_refresh_interval=interval)
    assert settings.es_refresh_interval == interval
