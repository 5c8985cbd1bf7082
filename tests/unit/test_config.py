"""Settings: bad values fail with a message that names the setting."""

from __future__ import annotations

import pytest

from kbgraph.config import ConfigError, load_settings


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
