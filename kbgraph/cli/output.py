"""How the `kbgraph` commands print: progress bars, the long-run note, tables, sizes, found chunks,
failed documents and graph-build summaries.

Apart from the commands because several of them print the same things (`kb set` and `graph refresh`
the same graph report, `query` and `demo` the same chunks, `index` and the graph builds the same
failure lines).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from kbgraph.utils.progress import Progress

if TYPE_CHECKING:
    from kbgraph.index.estimate import RunEstimate


class ProgressBars:
    """One tqdm bar per pipeline phase, on stderr, only when stderr is a terminal or asked for."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bars: dict[str, object] = {}

    def __call__(self, event: Progress) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        bar = self.bars.get(event.phase)
        if bar is None or bar.total != event.total:  # a new document restarts its phases
            if bar is not None:
                bar.close()
            # a long document's parse counts characters: 12.3M/49.2M rather than eight digits
            bar = tqdm(total=event.total, desc=f"{event.phase:>9}", unit="", leave=event.phase == "documents",
                       unit_scale=event.total >= 1_000_000, file=sys.stderr, dynamic_ncols=True)
            self.bars[event.phase] = bar
        bar.n = event.done
        if event.message:
            bar.set_postfix_str(event.message[:40], refresh=False)
        bar.refresh()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()


def warn_if_long(estimate: "RunEstimate") -> None:
    """A note before work that will take more than a minute (unchanged files make it shorter)."""
    if estimate.seconds < 60:
        return
    calls = f", ~{estimate.llm_calls} LLM calls" if estimate.llm_calls else ""
    click.echo(f"note: {estimate.documents} file(s), {estimate.bytes / 1e6:.1f} MB, ~{estimate.chunks} chunks{calls}: "
               f"expect roughly {estimate.seconds / 60:.0f} minute(s) (less for files already indexed)", err=True)


def format_size(size: int) -> str:
    for unit in ("B", "kB", "MB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000  # type: ignore[assignment]
    return f"{size:.1f} GB"


def echo_table(rows: list[tuple[str, ...]], right: tuple[int, ...] = ()) -> None:
    """Rows as aligned columns (the first row is the header); the last column is not padded."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        click.echo("  ".join([*cells, row[-1]]).rstrip())


def print_chunks(chunks: list) -> None:
    if not chunks:
        click.echo("nothing found above the similarity threshold")
        return
    for rank, chunk in enumerate(chunks, start=1):
        parts = [f"{name} {value:.3f}" for name, value in (
            ("term", chunk.term_similarity), ("vector", chunk.vector_similarity),
            ("graph", getattr(chunk, "graph_score", None))) if value is not None]
        click.echo(f"[{rank}] {chunk.score:.3f} ({', '.join(parts)})  {chunk.doc_name} #{chunk.position}")
        text = " ".join(chunk.content.split())
        click.echo(f"    {text[:300]}{'...' if len(text) > 300 else ''}")


def failure_line(outcome: Any) -> str:
    # a reader's message already starts with the file's name
    reason = outcome.message.removeprefix(f"{outcome.name}: ")
    return f"FAILED  {outcome.name}: {reason}"


def echo_graph_report(report: Any, quiet_successes: bool) -> int:
    """Per-document lines and a summary of a graph build; returns the exit code it calls for."""
    for outcome in report.documents:
        if outcome.status == "failed":
            click.echo(failure_line(outcome), err=True)
        elif not quiet_successes:
            click.echo(f"{'extracted':<10}{outcome.name}: {outcome.message}")
    summary = f"graph built for {report.count('indexed')} document(s), {report.count('failed')} failed"
    if report.refresh is not None:
        summary += "; " + refresh_summary(report.refresh)
    click.echo(summary)
    return 1 if report.count("failed") or report.count("cancelled") else 0


def refresh_summary(result: Any) -> str:
    return (f"graph v{result.version}: pagerank updated for {result.pagerank_updated} entities; "
            f"{result.communities} communities, {result.reports_generated} reports written, "
            f"{result.reports_reused} reused, {result.reports_removed} removed"
            + (f"; up to date: {', '.join(result.skipped)}" if result.skipped else ""))
