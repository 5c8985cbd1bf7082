"""`kbgraph index`: files and folders indexed into a knowledge base, with what happened to each.

Imports no part of the indexing pipeline itself (the engine does, when it indexes), so that loading
the command for a query does not load kbgraph.index.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kbgraph.cli.root import fail, main, open_engine
from kbgraph.cli.output import ProgressBars, failure_line, warn_if_long


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--kb", "kb_name", required=True, help="The knowledge base to index into.")
@click.option("--force", is_flag=True, help="Re-index files even when unchanged.")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: when stderr is a terminal).")
@click.pass_context
def index(ctx: click.Context, paths: tuple[Path, ...], kb_name: str, force: bool, progress: bool | None) -> None:
    """Index files and folders into a knowledge base (created if new; unchanged files are skipped)."""
    bars = ProgressBars(sys.stderr.isatty() if progress is None else progress)
    with open_engine(ctx) as engine:
        if engine.meta.get_kb_by_name(engine.tenant, kb_name) is None:
            missing = [p for p in paths if not p.exists()]
            if missing:
                fail(f"{missing[0]} does not exist")
            engine.create_kb(kb_name)
            click.echo(f"created knowledge base {kb_name!r} with the graph off; `kbgraph kb set {kb_name} --graph nlp` "
                       "switches it on and builds it for what is indexed", err=True)
        warn_if_long(engine.estimate_index(kb_name, list(paths)))
        try:
            report = engine.index_paths(kb_name, list(paths), progress=bars, force=force)
        finally:
            bars.close()
        for outcome in report.documents:
            if outcome.status == "failed":
                click.echo(failure_line(outcome), err=True)
            elif outcome.status != "skipped" or not bars.enabled:
                click.echo(f"{outcome.status:<8}{outcome.name}: {outcome.message}")
        summary = (f"{report.count('indexed')} indexed, {report.count('skipped')} unchanged, "
                   f"{report.count('failed')} failed")
        chat = [u for phase, u in report.ledger.by_phase.items() if phase != "embed"]
        calls, cached = sum(u.calls for u in chat), sum(u.cached_calls for u in chat)
        if calls or cached:
            summary += (f"; LLM calls {calls} (+{cached} cached), tokens {sum(u.prompt_tokens for u in chat)}"
                        f"+{sum(u.completion_tokens for u in chat)}")
        if calls or cached:
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
        click.echo(summary)
        if report.count("failed") or report.count("cancelled"):
            sys.exit(1)
