"""Prompt templates (jinja2, one .j2 file per prompt) and their versions.

A prompt's version is a short hash of its template text, so editing a template changes the LLM
cache key and old cached answers are not reused for the new prompt.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

PROMPT_DIR = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    # jinja2 (~20 ms) is imported by the first render, not by every module that names a prompt: a
    # query without an LLM renders none
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPT_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        # templates ship with the package and prompt_version() is cached per process, so a
        # template edited at run time must not be picked up either: no stat() per render
        auto_reload=False,
    )


def render(name: str, **variables: Any) -> str:
    """Render ``<name>.j2`` with the given variables; a missing variable is an error."""
    return _environment().get_template(f"{name}.j2").render(**variables)


@lru_cache(maxsize=None)
def prompt_version(name: str) -> str:
    text = (PROMPT_DIR / f"{name}.j2").read_bytes()
    return f"{name}@{hashlib.sha256(text).hexdigest()[:12]}"
