"""The README's speed figure for the local embedder agrees with itself and with the estimate that
`kbgraph index` prints (kbgraph/index/estimate.py); bench/README.md has the measurement."""

from __future__ import annotations

import re
from pathlib import Path

from kbgraph.config import load_settings
from kbgraph.index.context import KBContext
from kbgraph.index.estimate import estimate_run
from kbgraph.llm.embedders import HashEmbedder
from kbgraph.meta.schemas import GraphConfig

ROOT = Path(__file__).resolve().parents[2]
# the estimate's own assumption (a token is ~4 bytes of text)
_TOKENS_PER_MB = 1_000_000 / 4


def _readme_figures() -> tuple[float, float]:
    """(ms of a core per token, minutes of a core per MB) as the README states them."""
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    per_token = re.search(r"the local one reads every chunk: ~([\d.]+) ms of a core per token", text)
    per_mb = re.search(r"so about (a|[\d.]+) minutes? of a core per MB of text", text)
    assert per_token and per_mb, "the README's speed figure for the local embedder moved: update this test"
    return float(per_token.group(1)), 1.0 if per_mb.group(1) == "a" else float(per_mb.group(1))


def test_the_per_token_and_per_mb_figures_agree() -> None:
    per_token_ms, per_mb_minutes = _readme_figures()
    implied = per_token_ms * _TOKENS_PER_MB / 1000 / 60
    assert 0.6 <= implied / per_mb_minutes <= 1.5, (per_token_ms, per_mb_minutes, implied)


def test_the_readme_figure_is_within_the_estimates_margin(tmp_path: Path) -> None:
    per_mb_minutes = _readme_figures()[1]
    settings = load_settings(None, data_dir=tmp_path, embedding_provider="local", embedding_threads=1)
    ctx = KBContext(store=None, tenant="t", kb_id="k", settings=settings, embedder=HashEmbedder(8),  # type: ignore[arg-type]
                    graph=GraphConfig(enabled=False))
    estimated_minutes = estimate_run(ctx, [1_000_000]).seconds / 60
    # the estimate errs long on purpose (its per-token cost was measured on an earlier model), never
    # by more than this
    assert per_mb_minutes <= estimated_minutes <= 2.5 * per_mb_minutes, (per_mb_minutes, estimated_minutes)
