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


FOUND_HOW = ("the data folder is the nearest .kbgraph of this folder and its parents; --data-dir or "
             "KBGRAPH_DATA_DIR names another")


def no_data_folder(settings: Settings) -> bool:
    """Whether the knowledge bases would be in a data folder that does not exist (so there are none)."""
    return not settings.database_url and not settings.data_dir.exists()


@contextmanager
def open_engine(ctx: click.Context, *, creates: bool = False) -> Iterator[Any]:
    """The engine a command runs with, its errors turned into exit codes. A command that may make a
    knowledge base (``creates``) makes the data folder when there is none; the others say there is
    none instead of leaving an empty one behind, which every folder below it would then find."""
    from kbgraph.engine import Engine, KBGraphError
    from kbgraph.llm.base import LLMError, LLMNotConfigured

    settings: Settings = ctx.obj["settings"]
    if not creates and no_data_folder(settings):
        asked = ctx.params.get("kb_name") or ctx.params.get("kb_names") or ctx.params.get("name")
        named = ", ".join(repr(n) for n in ([asked] if isinstance(asked, str) else asked or []))
        fail(f"no knowledge base{' named ' + named if named else 's'} in {settings.data_dir.absolute()}: there is no "
             f"data folder there ({FOUND_HOW}); `kbgraph kb create NAME` or `kbgraph index PATH --kb NAME` makes one")
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
