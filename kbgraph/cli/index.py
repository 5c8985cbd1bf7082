"""`kbgraph index`: files and folders indexed into a knowledge base, with what happened to each.

Imports no part of the indexing pipeline itself (the engine does, when it indexes), so that loading
the command for a query does not load kbgraph.index.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kbgraph.cli.root import fail, main, no_data_folder, open_engine
from kbgraph.cli.output import ProgressBars, failure_line, warn_if_long
from kbgraph.cli.signals import stop_on_signals

if TYPE_CHECKING:
    from kbgraph.engine import Engine, IndexReport


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--kb", "kb_name", required=True, help="The knowledge base to index into.")
@click.option("--force", is_flag=True, help="Re-index files even when unchanged.")
@click.option("--sync", is_flag=True, help="Keep the knowledge base equal to the folders: remove the documents "
              "whose files are gone from them (with their part of the graph).")
@click.option("--dry-run", is_flag=True, help="List what the run would index, skip and (with --sync) remove; change nothing.")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: when stderr is a terminal).")
@click.pass_context
def index(ctx: click.Context, paths: tuple[Path, ...], kb_name: str, force: bool, sync: bool, dry_run: bool,
          progress: bool | None) -> None:
    """Index files and folders into a knowledge base (created if new; unchanged files are skipped)."""
    bars = ProgressBars(sys.stderr.isatty() if progress is None else progress)
    if dry_run and no_data_folder(ctx.obj["settings"]):
        click.echo(f"would create the data folder {ctx.obj['settings'].data_dir.absolute()}")
        sys.exit(print_dry_run(None, kb_name, list(paths), sync=sync, force=force))
    with open_engine(ctx, creates=not dry_run) as engine:
        if dry_run:
            sys.exit(print_dry_run(engine, kb_name, list(paths), sync=sync, force=force))
        if engine.meta.get_kb_by_name(engine.tenant, kb_name) is None:
            missing = [p for p in paths if not p.exists()]
            if missing:
                fail(f"{missing[0]} does not exist")
            engine.create_kb(kb_name)
            click.echo(f"created knowledge base {kb_name!r} with the graph off; `kbgraph kb set {kb_name} --graph nlp` "
                       "switches it on and builds it for what is indexed", err=True)
        warn_if_long(engine.estimate_index(kb_name, list(paths)))
        with stop_on_signals() as stop:
            try:
                report = engine.index_paths(kb_name, list(paths), progress=bars, force=force, sync=sync,
                                            cancel=stop.is_set)
            finally:
                bars.close()
        print_outcomes(report, show_skipped=not bars.enabled)
        click.echo(summary_line(report, kb_name))
        if stop.signal:
            click.echo(f"stopped by {stop.signal}: what was indexed is kept; the same command indexes the rest",
                       err=True)
            sys.exit(130 if stop.signal == "SIGINT" else 143)
        if report.count("failed") or report.count("cancelled") or report.unwalked:
            sys.exit(1)


def print_outcomes(report: IndexReport, *, show_skipped: bool) -> None:
    """A line per folder not entered, document removed, failed or indexed (skipped ones when asked)."""
    for name, reason in report.unwalked:
        click.echo(f"FAILED  {name}: {reason}", err=True)
    if report.removed:
        for name in report.gone:
            click.echo(f"{'removed':<8}{name}: its file is gone")
    for outcome in report.documents:
        if outcome.status == "failed":
            click.echo(failure_line(outcome), err=True)
        elif outcome.status != "skipped" or show_skipped:
            click.echo(f"{outcome.status:<8}{outcome.name}: {outcome.message}")


def summary_line(report: IndexReport, kb_name: str) -> str:
    """The run's counts, its model calls and the graph's refresh; the notes beside them go to stderr."""
    summary = (f"{report.count('indexed')} indexed, {report.count('skipped')} unchanged, "
               f"{report.count('failed')} failed")
    if report.unwalked:
        summary += f", {len(report.unwalked)} folder(s) not entered"
    if report.removed:
        summary += f", {len(report.gone)} removed (files gone)"
    elif report.gone:
        click.echo(f"{len(report.gone)} indexed file(s) are gone from the folder(s) and stay in {kb_name!r}: "
                   f"`--sync` removes them (`--sync --dry-run` lists them first)", err=True)
    chat = [u for phase, u in report.ledger.by_phase.items() if phase != "embed"]
    calls, cached = sum(u.calls for u in chat), sum(u.cached_calls for u in chat)
    if calls or cached:
        summary += (f"; LLM calls {calls} (+{cached} cached), tokens {sum(u.prompt_tokens for u in chat)}"
                    f"+{sum(u.completion_tokens for u in chat)}")
        click.echo("tokens by phase (prompt+completion): " + ", ".join(
            f"{phase} {u.calls} calls {u.prompt_tokens}+{u.completion_tokens}"
            for phase, u in sorted(report.ledger.by_phase.items()) if phase != "embed" and u.calls), err=True)
    if report.ledger.decisions:
        click.echo("decisions: " + ", ".join(f"{name} {count}" for name, count
                                             in sorted(report.ledger.decisions.items())), err=True)
    if report.count("cancelled"):
        summary += f", {report.count('cancelled')} cancelled"
    if report.repaired:
        click.echo("the graph's phases (PageRank, communities, reports) an earlier run left unfinished "
                   "are finished now", err=True)
    if report.refresh is not None:
        r = report.refresh
        summary += f"; graph v{r.version}: {r.communities} communities, {r.reports_generated} new reports"
    return summary


def print_dry_run(engine: Engine | None, kb_name: str, paths: list[Path], *, sync: bool, force: bool) -> int:
    """What `kbgraph index` would do, file by file; changes nothing (no engine: there is no data
    folder yet). Returns the exit code."""
    if engine is None or engine.meta.get_kb_by_name(engine.tenant, kb_name) is None:
        click.echo(f"would create the knowledge base {kb_name!r}")
        from kbgraph.engine import KBGraphError
        from kbgraph.engine.sync import name_files

        try:
            named = name_files(paths)
        except KBGraphError as exc:  # a path that does not exist
            fail(str(exc))
        for name, _ in named.files:
            click.echo(f"{'index':<8}{name}: new")
        unwalked, gone = named.unwalked, []
    else:
        changes = engine.folder_changes(kb_name, paths, force=force)
        for name in changes.new:
            click.echo(f"{'index':<8}{name}: new")
        for name in changes.changed:
            click.echo(f"{'index':<8}{name}: changed or not finished")
        for name in changes.unchanged:
            click.echo(f"{'skip':<8}{name}: unchanged")
        unwalked, gone = changes.unwalked, changes.gone
    for doc in gone:
        click.echo(f"{'remove' if sync else 'gone':<8}{doc.name}: its file is gone" + ("" if sync else " (kept without --sync)"))
    for name, why in unwalked:
        click.echo(f"FAILED  {name}: {why.reason}", err=True)
    click.echo(f"dry run: nothing changed{'' if sync or not gone else '; --sync would remove the gone ones'}")
    return 1 if unwalked else 0
