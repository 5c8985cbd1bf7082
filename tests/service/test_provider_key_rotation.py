"""Rotating ``provider_key_secret``: keys sealed with the previous secret stay readable while it is
listed in ``provider_key_previous_secrets``; ``kbgraph-web providers reseal`` seals them with the new
one, after which the previous one can go; a secret that opens nothing gives a clear error naming the
setting, never a traceback. Real processes (the ``kbgraph`` and ``kbgraph-web`` commands) against a
knowledge base that embeds with a provider (a scripted OpenAI-compatible server over real HTTP)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.engine import Engine
from kbgraph.engine.providers import seal_key, unseal_key
from kbgraph.llm.base import LLMError, Message
from kbgraph.meta import DEFAULT_TENANT
from support.scripted_llm import ScriptedLLM

KEY = "sk-rotating-key-7781"
MODEL = "acme-embed"


@pytest.fixture
def acme() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(embedding_dim=48) as server:
        yield server


def _env(data_dir: Path, secret: str, previous: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBGRAPH_")}
    return {**env, "KBGRAPH_DATA_DIR": str(data_dir), "KBGRAPH_EMBEDDING_PROVIDER": "hash",
            "KBGRAPH_EMBEDDING_DIM": "64", "KBGRAPH_STORE": "sqlite", "KBGRAPH_PROVIDER_KEY_SECRET": secret,
            "KBGRAPH_PROVIDER_KEY_PREVIOUS_SECRETS": previous}


def _run(module: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", module, *args], env=env, capture_output=True, text=True, timeout=180)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


def _query(data_dir: Path, question: str, secret: str, previous: str = "") -> subprocess.CompletedProcess[str]:
    return _run("kbgraph.cli", ["query", question, "--kb", "lore", "--mode", "naive"], _env(data_dir, secret, previous))


def _reseal(data_dir: Path, secret: str, previous: str = "") -> subprocess.CompletedProcess[str]:
    return _run("web.cli", ["providers", "reseal"], _env(data_dir, secret, previous))


@pytest.fixture
def data_dir(tmp_path: Path, acme: ScriptedLLM) -> Path:
    """A knowledge base indexed with a provider's embedding model, its key sealed with secret "first"."""
    settings = load_settings(data_dir=tmp_path / "data", embedding_provider="hash", embedding_dim=64, store="sqlite",
                             provider_key_secret="first")
    with Engine.open(settings) as engine:
        engine.meta.add_provider(DEFAULT_TENANT, "acme", acme.base_url, seal_key(settings, KEY),
                                 embedding_models=[MODEL])
        engine.create_kb("lore", embedding_model=f"{MODEL}@acme")
        engine.index_paths("lore", [SAMPLE_CORPUS_DIR / "mira_castell.md"])
    return settings.data_dir


def _keys_sent(acme: ScriptedLLM, since: int) -> set[str | None]:
    return {r["authorization"] for r in acme.requests[since:] if r["kind"] == "embeddings"}


def test_a_secret_rotation_keeps_the_keys_readable(data_dir: Path, acme: ScriptedLLM) -> None:
    # the secret changed and the old one is not listed: a clear error naming the setting
    lost = _query(data_dir, "Who is Mira Castell?", "second")
    assert lost.returncode != 0
    assert "provider_key_secret" in lost.stderr and "provider_key_previous_secrets" in lost.stderr, lost.stderr

    # the old one listed: readable, the provider gets its key
    before = len(acme.requests)
    kept = _query(data_dir, "Where was Mira Castell born?", "second", previous="zeroth, first")
    assert kept.returncode == 0, kept.stderr
    assert _keys_sent(acme, before) == {f"Bearer {KEY}"}

    resealed = _reseal(data_dir, "second", previous="first")
    assert resealed.returncode == 0, resealed.stderr
    assert "1 provider key(s) sealed again" in resealed.stdout

    # the previous secret dropped: the new one alone opens the key; the old one alone no longer does
    before = len(acme.requests)
    after = _query(data_dir, "What did Mira Castell found?", "second")
    assert after.returncode == 0, after.stderr
    assert _keys_sent(acme, before) == {f"Bearer {KEY}"}
    assert _query(data_dir, "Mira Castell's guild?", "first").returncode != 0


def test_resealing_with_a_wrong_secret_names_what_it_could_not_open(data_dir: Path) -> None:
    failed = _reseal(data_dir, "third", previous="not it")
    assert failed.returncode == 1
    assert f"{DEFAULT_TENANT}/acme" in failed.stderr and "provider_key_previous_secrets" in failed.stderr
    # nothing was changed: the right secret still opens the key
    assert _query(data_dir, "Who is Mira Castell?", "first").returncode == 0


def test_a_generated_secret_keeps_working_once_one_is_set(tmp_path: Path) -> None:
    unset = load_settings(data_dir=tmp_path / "data", embedding_provider="hash")
    sealed = seal_key(unset, KEY)  # with the secret made for the data folder
    assert (unset.data_dir / "provider_key_secret").exists()
    assert unseal_key(unset.replace(provider_key_secret="chosen by the operator"), sealed) == KEY


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_resealing_moves_every_tenants_keys_on_both_metadata_databases(tmp_path: Path, database: str) -> None:
    from contextlib import nullcontext

    from conftest import scratch_postgres_database
    from kbgraph.engine.providers import reseal_keys
    from kbgraph.meta import MetaDB

    scratch = scratch_postgres_database() if database == "postgresql" else nullcontext(f"sqlite:///{tmp_path}/meta.db")
    old = load_settings(data_dir=tmp_path / "data", embedding_provider="hash", provider_key_secret="old")
    new = old.replace(provider_key_secret="new")
    with scratch as url, MetaDB.open(url) as meta:
        for tenant in ("north", "south"):
            meta.ensure_tenant(tenant)
            meta.add_provider(tenant, "acme", "http://127.0.0.1:9/v1", seal_key(old, f"key-of-{tenant}"))
            meta.add_provider(tenant, "keyless", "http://127.0.0.1:9/v1", "")
        assert reseal_keys(new.replace(provider_key_previous_secrets="old"), meta) == (2, [])
        for tenant in ("north", "south"):
            found = meta.find_provider(tenant, "acme")
            assert found is not None and unseal_key(new, found.api_key_sealed) == f"key-of-{tenant}"


def test_the_cli_moves_a_knowledge_base_between_models(data_dir: Path, acme: ScriptedLLM) -> None:
    env = _env(data_dir, "first")
    moved = _run("kbgraph.cli", ["kb", "reembed", "lore", "--model", "hash-64"], env)
    assert moved.returncode == 0 and f"{MODEL}@acme -> hash-64" in moved.stdout, moved.stderr
    unknown = _run("kbgraph.cli", ["kb", "reembed", "lore", "--model", "nope@acme"], env)
    assert unknown.returncode != 0 and f"{MODEL}@acme" in unknown.stderr, unknown.stderr  # the choices
    before = len(acme.requests)
    back = _run("kbgraph.cli", ["kb", "reembed", "lore", "--model", f"{MODEL}@acme"], env)
    assert back.returncode == 0 and f"hash-64 -> {MODEL}@acme" in back.stdout, back.stderr
    assert _keys_sent(acme, before) in (set(), {f"Bearer {KEY}"})  # its vectors may all be in the cache


def test_the_cli_creates_a_knowledge_base_on_a_providers_embedding_model(data_dir: Path, acme: ScriptedLLM) -> None:
    env = _env(data_dir, "first")
    unknown = _run("kbgraph.cli", ["kb", "create", "elsewhere", "--embedding-model", "nope@acme"], env)
    assert unknown.returncode != 0 and f"{MODEL}@acme" in unknown.stderr, unknown.stderr  # the choices
    created = _run("kbgraph.cli", ["kb", "create", "elsewhere", "--embedding-model", f"{MODEL}@acme"], env)
    assert created.returncode == 0 and f"embeddings {MODEL}@acme" in created.stdout, created.stderr


def test_an_unreachable_provider_is_named_not_the_servers_setting(tmp_path: Path) -> None:
    # a provider whose endpoint nothing answers: the message points at the provider the user added
    # (its base URL on the settings page), not at the server's llm_base_url / embedding_base_url
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    settings = load_settings(data_dir=tmp_path / "data", embedding_provider="hash", embedding_dim=64, store="sqlite",
                             provider_key_secret="first")
    with Engine.open(settings) as engine:
        engine.meta.add_provider(DEFAULT_TENANT, "gone", dead, seal_key(settings, KEY), chat_models=["talk"],
                                 embedding_models=[MODEL])
        engine.create_kb("lore", embedding_model=f"{MODEL}@gone")
    env = _env(settings.data_dir, "first")
    failed = _run("kbgraph.cli", ["index", str(SAMPLE_CORPUS_DIR / "mira_castell.md"), "--kb", "lore"], env)
    said = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "connection refused" in said, said
    assert "model provider 'gone'" in said and "embedding_base_url" not in said, said

    with Engine.open(settings) as engine:
        engine.create_kb("notes")
        engine.index_paths("notes", [SAMPLE_CORPUS_DIR / "mira_castell.md"])
        chat = engine.chat_for(engine.meta.get_kb_by_name(DEFAULT_TENANT, "notes"), "talk@gone")
        assert chat is not None
        with pytest.raises(LLMError) as raised:
            chat.chat([Message("user", "Who is Mira Castell?")])
    assert "model provider 'gone'" in str(raised.value) and "llm_base_url" not in str(raised.value), raised.value
