"""The root of the `kbgraph` command and what every command shares to run and to exit.

Exit codes: 0 success; 1 the work ran but something failed (a document could not be indexed,
the model could not answer, nothing was found, a confirmation was declined); 2 the command cannot
run as given (an unknown knowledge base, document or entity, a bad option or setting, no model
configured where one is needed), with a message saying what to change.

The commands live in their sibling modules and register on `main` here; this module imports none
of them (they import it), and kbgraph/cli/__init__.py imports them all.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import click

from kbgraph.config import ConfigError, Settings, load_settings
from kbgraph.meta.schemas import MetaError
from kbgraph.store.base import StoreError


def fail(message: str, code: int = 2) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def exit_after(code: int) -> None:
    if code:
        sys.exit(code)


@contextmanager
def open_engine(ctx: click.Context) -> Iterator[Any]:
    from kbgraph.engine import Engine, KBGraphError
    from kbgraph.llm.base import LLMError, LLMNotConfigured

    settings: Settings = ctx.obj["settings"]
    engine = None
    try:
        engine = Engine.open(settings)
        yield engine
    except (KBGraphError, MetaError, ConfigError, ValueError, LLMNotConfigured) as exc:
        fail(str(exc))
    except LLMError as exc:  # the model was asked and failed: the command ran, and failed
        fail(str(exc), code=1)
    except StoreError as exc:
        fail(f"storage: {exc}")
    finally:
        if engine is not None:
            engine.close()


@click.group()
@click.option("--data-dir", type=click.Path(path_type=Path), help="Where kbgraph keeps its data (KBGRAPH_DATA_DIR).")
@click.option("--config", "config_file", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="A TOML settings file (KBGRAPH_CONFIG).")
@click.option("--tenant", help="Act for this tenant of a service's data (KBGRAPH_TENANT; default: `default`).")
@click.pass_context
def main(ctx: click.Context, data_dir: Path | None, config_file: Path | None, tenant: str | None) -> None:
    """kbgraph: knowledge bases with a knowledge graph, from the command line.

    The data folder, unless --data-dir or KBGRAPH_DATA_DIR names one, is the nearest .kbgraph folder
    of the current directory and its parents (./.kbgraph when there is none)."""
    overrides: dict[str, Any] = {"data_dir": data_dir} if data_dir else {}
    if tenant is not None:
        overrides["tenant"] = tenant
    try:
        ctx.obj = {"settings": load_settings(config_file, **overrides)}
    except ConfigError as exc:
        fail(str(exc))
