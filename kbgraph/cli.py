"""The `kbgraph` command.

Exit codes: 0 success; 1 the work ran but something failed (a document could not be indexed,
the model could not answer, nothing was found, a confirmation was declined); 2 the command cannot
run as given (an unknown knowledge base, document or entity, a bad option or setting, no model
configured where one is needed), with a message saying what to change.
"""

from __future__ import annotations

import json
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import click

from kbgraph.config import ConfigError, Settings, load_settings, settings_table
from kbgraph.meta.schemas import DEFAULT_ENTITY_TYPES, GraphConfig, MetaError
from kbgraph.utils.progress import Progress
from kbgraph.store.base import StoreError

if TYPE_CHECKING:
    from kbgraph.index.estimate import RunEstimate

MODES = ("naive", "kg", "ppr", "global", "mix")


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


def _warn_if_long(estimate: "RunEstimate") -> None:
    """A note before work that will take more than a minute (unchanged files make it shorter)."""
    if estimate.seconds < 60:
        return
    calls = f", ~{estimate.llm_calls} LLM calls" if estimate.llm_calls else ""
    click.echo(f"note: {estimate.documents} file(s), {estimate.bytes / 1e6:.1f} MB, ~{estimate.chunks} chunks{calls}: "
               f"expect roughly {estimate.seconds / 60:.0f} minute(s) (less for files already indexed)", err=True)


def _fail(message: str, code: int = 2) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@contextmanager
def _engine(ctx: click.Context) -> Iterator[Any]:
    from kbgraph.engine import Engine, KBGraphError
    from kbgraph.llm.base import LLMError, LLMNotConfigured

    settings: Settings = ctx.obj["settings"]
    engine = None
    try:
        engine = Engine.open(settings)
        yield engine
    except (KBGraphError, MetaError, ConfigError, ValueError, LLMNotConfigured) as exc:
        _fail(str(exc))
    except LLMError as exc:  # the model was asked and failed: the command ran, and failed
        _fail(str(exc), code=1)
    except StoreError as exc:
        _fail(f"storage: {exc}")
    finally:
        if engine is not None:
            engine.close()


@click.group()
@click.option("--data-dir", type=click.Path(path_type=Path), help="Where kbgraph keeps its data (KBGRAPH_DATA_DIR).")
@click.option("--config", "config_file", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="A TOML settings file (KBGRAPH_CONFIG).")
@click.pass_context
def main(ctx: click.Context, data_dir: Path | None, config_file: Path | None) -> None:
    """kbgraph: knowledge bases with a knowledge graph, from the command line."""
    overrides = {"data_dir": data_dir} if data_dir else {}
    try:
        ctx.obj = {"settings": load_settings(config_file, **overrides)}
    except ConfigError as exc:
        _fail(str(exc))


# ------------------------------------------------------------------------------------------- kb

@main.group()
def kb() -> None:
    """Create, list and remove knowledge bases."""


def _entity_types(value: str | None) -> tuple[str, ...] | None:
    return tuple(t.strip() for t in value.split(",") if t.strip()) or None if value is not None else None


@kb.command("create")
@click.argument("name")
@click.option("--graph", "method", type=click.Choice(["nlp", "light", "general"]),
              help="Switch the knowledge graph on, extracting with this method (nlp needs no LLM).")
@click.option("--entity-types", help=f"Comma-separated entity types (default: {','.join(DEFAULT_ENTITY_TYPES)}).")
@click.option("--community/--no-community", default=False, help="Detect communities and write community reports.")
@click.option("--resolution/--no-resolution", default=False, help="Merge duplicate entities (needs an LLM).")
@click.option("--gleanings", type=click.IntRange(0, 10), default=None, help="Extra extraction rounds per chunk (LLM methods).")
@click.option("--chunk-tokens", type=click.IntRange(16, 8192), default=None)
@click.option("--chunk-overlap", type=click.IntRange(0, 4096), default=None)
@click.option("--description", default="")
@click.option("--llm-model", default=None, help="Chat model for this knowledge base (overrides KBGRAPH_LLM_MODEL).")
@click.option("--llm-base-url", default=None, help="Chat endpoint for this knowledge base (overrides KBGRAPH_LLM_BASE_URL).")
@click.pass_context
def kb_create(ctx: click.Context, name: str, method: str | None, entity_types: str | None, community: bool,
              resolution: bool, gleanings: int | None, chunk_tokens: int | None, chunk_overlap: int | None,
              description: str, llm_model: str | None, llm_base_url: str | None) -> None:
    """Create a knowledge base."""
    settings: Settings = ctx.obj["settings"]
    graph = GraphConfig(
        enabled=method is not None, method=method or "nlp",
        entity_types=_entity_types(entity_types) or DEFAULT_ENTITY_TYPES,
        community=community, resolution=resolution,
        max_gleanings=settings.max_gleanings if gleanings is None else gleanings)
    with _engine(ctx) as engine:
        created = engine.create_kb(name, graph=graph, description=description, chunk_tokens=chunk_tokens,
                                   chunk_overlap=chunk_overlap,
                                   llm={"llm_model": llm_model, "llm_base_url": llm_base_url})
        graph_text = f"graph: {created.graph.method}" if created.graph.enabled else "graph: off"
        click.echo(f"created knowledge base {created.name!r} ({graph_text}; chunks {created.chunk_tokens}/"
                   f"{created.chunk_overlap} tokens; embeddings {created.embedding_model})")


@kb.command("set")
@click.argument("name")
@click.option("--graph", "method", type=click.Choice(["nlp", "light", "general", "off"]),
              help="Switch the graph on with this extraction method (built now for the indexed documents), "
                   "change the method, or switch it off (removes the graph).")
@click.option("--entity-types", help="Comma-separated entity types to extract.")
@click.option("--community/--no-community", default=None, help="Detect communities and write community reports.")
@click.option("--resolution/--no-resolution", default=None, help="Merge duplicate entities (needs an LLM).")
@click.option("--gleanings", type=click.IntRange(0, 10), default=None, help="Extra extraction rounds per chunk (LLM methods).")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: when stderr is a terminal).")
@click.pass_context
def kb_set(ctx: click.Context, name: str, method: str | None, entity_types: str | None, community: bool | None,
           resolution: bool | None, gleanings: int | None, progress: bool | None) -> None:
    """Change a knowledge base's graph settings.

    Switching the graph on builds it for the documents already indexed; switching it off removes
    it; changing what extraction does (method, entity types, gleanings) is applied to the indexed
    documents by `kbgraph graph refresh --kb NAME --rebuild`.
    """
    changes: dict[str, Any] = {}
    if method == "off":
        changes["enabled"] = False
    elif method is not None:
        changes.update(enabled=True, method=method)
    for field_name, value in (("entity_types", _entity_types(entity_types)), ("community", community),
                              ("resolution", resolution), ("max_gleanings", gleanings)):
        if value is not None:
            changes[field_name] = value
    if not changes:
        _fail("nothing to change: give --graph, --entity-types, --community/--no-community, "
              "--resolution/--no-resolution or --gleanings")
    bars = ProgressBars(sys.stderr.isatty() if progress is None else progress)
    with _engine(ctx) as engine:
        current = engine.kb(name).graph
        graph = GraphConfig.model_validate({**current.model_dump(), **changes})
        change = engine.set_graph(name, graph)
        click.echo(change.describe())
        if change.action == "build":
            try:
                report = engine.build_graph(name, progress=bars)
            finally:
                bars.close()
            _exit_after(_echo_graph_report(report, bars.enabled))
        elif change.action == "refresh":
            try:
                result = engine.refresh_graph(name, progress=bars)
            finally:
                bars.close()
            click.echo(_refresh_summary(result))


def _echo_graph_report(report: Any, quiet_successes: bool) -> int:
    """Per-document lines and a summary of a graph build; returns the exit code it calls for."""
    for outcome in report.documents:
        if outcome.status == "failed":
            click.echo(_failure_line(outcome), err=True)
        elif not quiet_successes:
            click.echo(f"{'extracted':<10}{outcome.name}: {outcome.message}")
    summary = f"graph built for {report.count('indexed')} document(s), {report.count('failed')} failed"
    if report.refresh is not None:
        summary += "; " + _refresh_summary(report.refresh)
    click.echo(summary)
    return 1 if report.count("failed") or report.count("cancelled") else 0


def _failure_line(outcome: Any) -> str:
    # a reader's message already starts with the file's name
    reason = outcome.message.removeprefix(f"{outcome.name}: ")
    return f"FAILED  {outcome.name}: {reason}"


def _exit_after(code: int) -> None:
    if code:
        sys.exit(code)


@kb.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def kb_list(ctx: click.Context, as_json: bool) -> None:
    """List knowledge bases."""
    with _engine(ctx) as engine:
        rows = []
        for item in engine.list_kbs():
            counts = engine.meta.kb_counts(item.id)
            rows.append({"name": item.name, "id": item.id, "documents": counts.documents, "chunks": counts.chunks,
                         "graph": item.graph.method if item.graph.enabled else "off",
                         "embedding_model": item.embedding_model})
        if as_json:
            click.echo(json.dumps(rows, indent=1))
            return
        if not rows:
            click.echo("no knowledge bases yet: `kbgraph kb create NAME`")
        for row in rows:
            click.echo(f"{row['name']:<24} {row['documents']:>5} docs {row['chunks']:>7} chunks  graph: {row['graph']}")


@kb.command("rm")
@click.argument("name")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def kb_rm(ctx: click.Context, name: str, yes: bool) -> None:
    """Remove a knowledge base and everything in it (asks first unless --yes)."""
    with _engine(ctx) as engine:
        kb_row = engine.kb(name)
        if not yes:
            counts = engine.meta.kb_counts(kb_row.id)
            question = (f"remove knowledge base {kb_row.name!r} with its {counts.documents} document(s), "
                        f"{counts.chunks} chunk(s) and its graph?")
            try:
                confirmed = click.confirm(question, default=False, err=True)
            except click.Abort:  # end of input: no answer is no
                confirmed = False
            if not confirmed:
                click.echo("\nnothing removed (--yes removes without asking)", err=True)
                sys.exit(1)
        engine.delete_kb(name)
        click.echo(f"removed knowledge base {kb_row.name!r}")


@kb.command("reembed")
@click.argument("name")
@click.pass_context
def kb_reembed(ctx: click.Context, name: str) -> None:
    """Re-embed a knowledge base with the configured embedding model (after switching models)."""
    bars = ProgressBars(sys.stderr.isatty())
    with _engine(ctx) as engine:
        before = engine.kb(name).embedding_model
        try:
            changed = engine.reembed_kb(name, progress=bars)
        finally:
            bars.close()
        click.echo(f"re-embedded {changed} rows of {name!r}: {before or 'unknown'} -> {engine.embedder.model_name}")


# ---------------------------------------------------------------------------------------- index

@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--kb", "kb_name", required=True, help="The knowledge base to index into.")
@click.option("--force", is_flag=True, help="Re-index files even when unchanged.")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: when stderr is a terminal).")
@click.pass_context
def index(ctx: click.Context, paths: tuple[Path, ...], kb_name: str, force: bool, progress: bool | None) -> None:
    """Index files and folders into a knowledge base (created if new; unchanged files are skipped)."""
    bars = ProgressBars(sys.stderr.isatty() if progress is None else progress)
    with _engine(ctx) as engine:
        if engine.meta.get_kb_by_name(engine.tenant, kb_name) is None:
            missing = [p for p in paths if not p.exists()]
            if missing:
                _fail(f"{missing[0]} does not exist")
            engine.create_kb(kb_name)
            click.echo(f"created knowledge base {kb_name!r} with the graph off; `kbgraph kb set {kb_name} --graph nlp` "
                       "switches it on and builds it for what is indexed", err=True)
        _warn_if_long(engine.estimate_index(kb_name, list(paths)))
        try:
            report = engine.index_paths(kb_name, list(paths), progress=bars, force=force)
        finally:
            bars.close()
        for outcome in report.documents:
            if outcome.status == "failed":
                click.echo(_failure_line(outcome), err=True)
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
        if report.refresh is not None:
            r = report.refresh
            summary += f"; graph v{r.version}: {r.communities} communities, {r.reports_generated} new reports"
        click.echo(summary)
        if report.count("failed") or report.count("cancelled"):
            sys.exit(1)


# ----------------------------------------------------------------------------------------- docs

@main.group()
def docs() -> None:
    """List and remove documents."""


@docs.command("list")
@click.option("--kb", "kb_name", required=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def docs_list(ctx: click.Context, kb_name: str, as_json: bool) -> None:
    """List a knowledge base's documents with their status."""
    with _engine(ctx) as engine:
        rows = engine.list_documents(kb_name)
        if as_json:
            click.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=1, ensure_ascii=False))
            return
        if not rows:
            click.echo(f"no documents yet: `kbgraph index PATH --kb {kb_name}`")
            return
        table = [("ID", "STATUS", "CHUNKS", "SIZE", "NAME", "DETAIL")]
        table += [(row.id[:12], row.status, str(row.chunk_count), _size(row.size), row.name, _doc_detail(row))
                  for row in rows]
        _echo_table(table, right=(2, 3))


_CHUNK_COUNT = re.compile(r"^\d+ chunks?(; )?")


def _doc_detail(row: Any) -> str:
    """What the table's other columns do not already say: the error, else the graph part of the message."""
    if row.error:
        return " ".join(row.error.split())
    return _CHUNK_COUNT.sub("", row.message)


def _size(size: int) -> str:
    for unit in ("B", "kB", "MB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000  # type: ignore[assignment]
    return f"{size:.1f} GB"


def _echo_table(rows: list[tuple[str, ...]], right: tuple[int, ...] = ()) -> None:
    """Rows as aligned columns (the first row is the header); the last column is not padded."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        click.echo("  ".join([*cells, row[-1]]).rstrip())


@docs.command("rm")
@click.argument("doc")
@click.option("--kb", "kb_name", required=True)
@click.pass_context
def docs_rm(ctx: click.Context, doc: str, kb_name: str) -> None:
    """Remove a document (by name or id): its chunks, mentions and its part of the graph."""
    with _engine(ctx) as engine:
        change = engine.delete_document(kb_name, doc)
        click.echo(f"removed {doc!r}; graph: {change.entities_written} entities re-derived, "
                   f"{change.entities_removed} removed")


# ---------------------------------------------------------------------------------------- query

@main.command()
@click.argument("question")
@click.option("--kb", "kb_names", required=True, multiple=True, help="Knowledge base(s) to search.")
@click.option("--mode", type=click.Choice(MODES), default=None,
              help="naive = chunks only; kg/ppr/global use the graph; mix = chunks + graph (default with a graph).")
@click.option("--top-k", "top_k", type=click.IntRange(1, 1000), default=None, help="How many chunks to return.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--context", "show_context", is_flag=True, help="Also print the rendered context an LLM would get.")
@click.pass_context
def query(ctx: click.Context, question: str, kb_names: tuple[str, ...], mode: str | None, top_k: int | None,
          as_json: bool, show_context: bool) -> None:
    """Retrieve what the knowledge base knows about QUESTION."""
    with _engine(ctx) as engine:
        result = engine.query(list(kb_names), question, mode=mode, top_n=top_k)
        if as_json:
            click.echo(json.dumps(result.to_json(), ensure_ascii=False, indent=1))
        else:
            if result.answer:
                click.echo(result.answer + "\n")
            for entity in result.entities[:8]:
                click.echo(f"entity  {entity.score:.3f}  {entity.name} ({entity.type})")
            _print_chunks(result.chunks)
            if show_context:
                click.echo("\n" + result.context)
        if not result.chunks and not result.answer:
            sys.exit(1)


def _print_chunks(chunks: list) -> None:
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


# ---------------------------------------------------------------------------------------- graph

@main.group()
def graph() -> None:
    """Inspect, refresh and export a knowledge base's graph."""


@graph.command("stats")
@click.option("--kb", "kb_name", required=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def graph_stats_cmd(ctx: click.Context, kb_name: str, as_json: bool) -> None:
    """Counts, phase status and the top entities by PageRank."""
    from kbgraph.graph.inspect import graph_stats

    with _engine(ctx) as engine:
        stats = graph_stats(engine.store, engine.tenant, engine.kb(kb_name).id)
        if as_json:
            click.echo(json.dumps(stats.to_dict(), indent=1, ensure_ascii=False))
            return
        click.echo(f"graph version {stats.version}: {stats.entities} entities, {stats.relations} relations, "
                   f"{stats.communities} communities, {stats.reports} reports")
        click.echo(f"mentions: {stats.entity_mentions} entity, {stats.relation_mentions} relation")
        for phase, state in stats.phases.items():
            click.echo(f"phase {phase}: {state['status']} at v{state['version']}{' (stale)' if state['stale'] else ''}")
        click.echo("types: " + ", ".join(f"{t} {n}" for t, n in stats.entity_types))
        click.echo("top entities by PageRank:")
        for row in stats.top_entities:
            click.echo(f"  {row['pagerank']:.4f}  {row['name']} ({row['type']}, {row['mentions']} mentions)")


@graph.command("refresh")
@click.option("--kb", "kb_name", required=True)
@click.option("--force", is_flag=True, help="Recompute every phase even if current.")
@click.option("--rebuild", is_flag=True,
              help="Extract every document's graph again with the current settings (after `kb set` changed them).")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: when stderr is a terminal).")
@click.pass_context
def graph_refresh(ctx: click.Context, kb_name: str, force: bool, rebuild: bool, progress: bool | None) -> None:
    """Recompute PageRank, communities and reports where the graph changed (--rebuild: extract again first)."""
    bars = ProgressBars(sys.stderr.isatty() if progress is None else progress)
    with _engine(ctx) as engine:
        kb_row = engine.kb(kb_name)
        if rebuild:
            try:
                report = engine.build_graph(kb_name, rebuild=True, progress=bars)
            finally:
                bars.close()
            _exit_after(_echo_graph_report(report, bars.enabled))
            return
        try:
            result = engine.refresh_graph(kb_name, force=force, progress=bars)
        finally:
            bars.close()
        click.echo(_refresh_summary(result))
        if engine.graph_needs_rebuild(kb_row):
            click.echo(f"note: the extraction settings changed since the graph was extracted; "
                       f"`kbgraph graph refresh --kb {kb_name} --rebuild` applies them", err=True)


def _refresh_summary(result: Any) -> str:
    return (f"graph v{result.version}: pagerank updated for {result.pagerank_updated} entities; "
            f"{result.communities} communities, {result.reports_generated} reports written, "
            f"{result.reports_reused} reused, {result.reports_removed} removed"
            + (f"; up to date: {', '.join(result.skipped)}" if result.skipped else ""))


@graph.command("export")
@click.option("--kb", "kb_name", required=True)
@click.option("--format", "fmt", type=click.Choice(["graphml", "json"]), default="graphml")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), help="File to write (default: stdout).")
@click.pass_context
def graph_export(ctx: click.Context, kb_name: str, fmt: str, output: Path | None) -> None:
    """Export the graph as GraphML or node-link JSON."""
    from kbgraph.graph.inspect import export_graph

    with _engine(ctx) as engine:
        data = export_graph(engine.store, engine.tenant, engine.kb(kb_name).id, fmt)
        if output is None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            output.write_bytes(data)
            click.echo(f"wrote {output} ({len(data)} bytes)", err=True)


@graph.command("show")
@click.argument("entity")
@click.option("--kb", "kb_name", required=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def graph_show(ctx: click.Context, entity: str, kb_name: str, as_json: bool) -> None:
    """An entity's description, sources and neighbours."""
    from kbgraph.engine import did_you_mean
    from kbgraph.graph.inspect import entity_names, entity_view, find_entity

    with _engine(ctx) as engine:
        kb_row = engine.kb(kb_name)
        found = find_entity(engine.store, engine.tenant, kb_row.id, entity)
        if found is None:
            hint = did_you_mean(entity, entity_names(engine.store, engine.tenant, kb_row.id))
            _fail(f"no entity like {entity!r} in knowledge base {kb_row.name!r}{hint}")
        names = {d.id: d.name for d in engine.list_documents(kb_name)}
        view = entity_view(engine.store, engine.tenant, kb_row.id, found, names)
        if as_json:
            e = view.entity
            click.echo(json.dumps({
                "name": e.name, "type": e.type, "aliases": e.aliases, "description": e.description,
                "pagerank": e.pagerank, "mentions": e.mention_count, "documents": view.doc_names,
                "chunk_ids": e.chunk_ids, "communities": e.community_ids,
                "neighbours": [{"name": n, "weight": r.weight, "description": r.description} for r, n in view.neighbours],
            }, ensure_ascii=False, indent=1))
            return
        e = view.entity
        click.echo(f"{e.name} ({e.type})  pagerank {e.pagerank:.4f}, {e.mention_count} mentions")
        if e.aliases:
            click.echo(f"aliases: {', '.join(e.aliases)}")
        click.echo(e.description)
        click.echo("sources: " + ", ".join(sorted(view.doc_names.values())))
        click.echo(f"neighbours ({len(view.neighbours)}):")
        for relation, name in view.neighbours:
            click.echo(f"  {relation.weight:>6.2f}  {name}: {' '.join(relation.description.split())[:160]}")


# ----------------------------------------------------------------------------------------- chat

@main.command("chat")
@click.option("--kb", "kb_names", required=True, multiple=True, help="Knowledge base(s) the assistant answers from.")
@click.option("--mode", type=click.Choice(MODES), default=None)
@click.option("--system", "system_prompt", default="", help="Extra instructions for the assistant.")
@click.option("-q", "--question", "questions", multiple=True, help="Ask these and exit (else read questions from stdin).")
@click.pass_context
def chat_cmd(ctx: click.Context, kb_names: tuple[str, ...], mode: str | None, system_prompt: str,
             questions: tuple[str, ...]) -> None:
    """Chat with knowledge bases in the terminal; answers stream and cite their sources."""
    from kbgraph.llm.base import LLMError

    with _engine(ctx) as engine:
        dialog = engine.dialog(list(kb_names), mode=mode, system_prompt=system_prompt)
        interactive = not questions and sys.stdin.isatty()
        source = iter(questions) if questions else _read_questions(interactive)
        unanswered = 0
        for question in source:
            if not question.strip():
                continue
            try:
                for event in dialog.ask(question):
                    if event.kind == "delta":
                        click.echo(event.text, nl=False)
                    elif event.kind == "done":
                        click.echo()
                        for ref in event.references:
                            click.echo(f"  [ID:{ref.marker}] {ref.doc_name}: {' '.join(ref.content.split())[:100]}")
            except LLMError as exc:  # the conversation goes on; the exit code says an answer is missing
                unanswered += 1
                click.echo(f"\nerror: {exc}", err=True)
        if unanswered:
            click.echo(f"error: {unanswered} question(s) could not be answered", err=True)
            sys.exit(1)


def _read_questions(interactive: bool) -> Iterator[str]:
    while True:
        try:
            line = input("you> ") if interactive else sys.stdin.readline()
        except EOFError:
            return
        if not interactive and not line:
            return
        if line.strip() in {"exit", "quit"}:
            return
        yield line


# --------------------------------------------------------------------------------------- config

@main.command("config")
@click.pass_context
def config_cmd(ctx: click.Context) -> None:
    """Print every setting with its current value and environment variable."""
    settings: Settings = ctx.obj["settings"]
    for name, env, _ in settings_table():
        value = getattr(settings, name)
        if ("key" in name or "password" in name) and value:
            value = "***"
        if name == "vector_similarity_weight" and value is None:
            value = f"{settings.hybrid_vector_weight} (the {settings.embedding_provider} embedder's default)"
        click.echo(f"{name:<26} {env:<34} {value}")


# ----------------------------------------------------------------------------------------- demo

@main.command()
@click.argument("question", required=False)
@click.option("--kb", "kb_name", default="sample", show_default=True)
@click.pass_context
def demo(ctx: click.Context, question: str | None, kb_name: str) -> None:
    """Index the bundled sample corpus (graph on, no LLM needed) and answer a question."""
    from kbgraph.data import SAMPLE_CORPUS_DIR

    question = question or "What is the emblem of the guild founded by Mira Castell?"
    bars = ProgressBars(sys.stderr.isatty())
    with _engine(ctx) as engine:
        if engine.meta.get_kb_by_name(engine.tenant, kb_name) is None:
            engine.create_kb(kb_name, graph=GraphConfig(enabled=True, method="nlp", community=True))
        try:
            report = engine.index_paths(kb_name, [SAMPLE_CORPUS_DIR], progress=bars)
        finally:
            bars.close()
        click.echo(f"indexed {SAMPLE_CORPUS_DIR}: {report.count('indexed')} new, {report.count('skipped')} unchanged, "
                   f"{report.count('failed')} failed")
        click.echo(f"\nQ: {question}  (mode: mix = chunks + knowledge graph)\n")
        result = engine.query([kb_name], question, mode="mix")
        click.echo(_demo_answer(engine, kb_name, question, result) + "\n")
        click.echo("evidence:")
        for entity in result.entities[:5]:
            click.echo(f"entity  {entity.score:.3f}  {entity.name} ({entity.type})")
        _print_chunks(result.chunks)
        if not result.chunks:
            sys.exit(1)


def _demo_answer(engine: Any, kb_name: str, question: str, result: Any) -> str:
    """The model's answer when one is configured, else sentences of the evidence, with citations."""
    from kbgraph.chat.extractive import extractive_answer

    if engine.chat_for(engine.kb(kb_name)) is not None:
        turn = engine.dialog([kb_name], mode="mix").answer(question)
        sources = "; ".join(f"[ID:{r.marker}] {r.doc_name}" for r in turn.references)
        return f"A: {turn.answer}" + (f"\n   sources: {sources}" if sources else "")
    found = extractive_answer(result)
    if found is None:
        return f"A: {engine.settings.empty_response}"
    by_marker = {m: c for c in result.chunks for m, cid in result.citations.items() if cid == c.chunk_id}
    sources = "; ".join(f"[ID:{m}] {by_marker[m].doc_name}" for m in found.markers if m in by_marker)
    return (f"A (sentences of the evidence; configure an LLM for a written answer): {found.text}"
            f"\n   sources: {sources}")


if __name__ == "__main__":
    main()
