"""`kbgraph graph`: a knowledge base's graph inspected (stats, one entity), refreshed, rebuilt
and exported."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kbgraph.cli.root import exit_after, fail, main, open_engine
from kbgraph.cli.output import ProgressBars, echo_graph_report, refresh_summary


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

    with open_engine(ctx) as engine:
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
    with open_engine(ctx) as engine:
        kb_row = engine.kb(kb_name)
        if rebuild:
            try:
                report = engine.build_graph(kb_name, rebuild=True, progress=bars)
            finally:
                bars.close()
            exit_after(echo_graph_report(report, bars.enabled))
            return
        try:
            result = engine.refresh_graph(kb_name, force=force, progress=bars)
        finally:
            bars.close()
        click.echo(refresh_summary(result))
        if engine.graph_needs_rebuild(kb_row):
            click.echo(f"note: the extraction settings changed since the graph was extracted; "
                       f"`kbgraph graph refresh --kb {kb_name} --rebuild` applies them", err=True)


@graph.command("export")
@click.option("--kb", "kb_name", required=True)
@click.option("--format", "fmt", type=click.Choice(["graphml", "json"]), default="graphml")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), help="File to write (default: stdout).")
@click.pass_context
def graph_export(ctx: click.Context, kb_name: str, fmt: str, output: Path | None) -> None:
    """Export the graph as GraphML or node-link JSON."""
    from kbgraph.graph.inspect import export_graph

    with open_engine(ctx) as engine:
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

    with open_engine(ctx) as engine:
        kb_row = engine.kb(kb_name)
        found = find_entity(engine.store, engine.tenant, kb_row.id, entity)
        if found is None:
            hint = did_you_mean(entity, entity_names(engine.store, engine.tenant, kb_row.id))
            fail(f"no entity like {entity!r} in knowledge base {kb_row.name!r}{hint}")
        names = {d.id: d.name for d in engine.list_documents(kb_name)} | engine.curated_names(kb_name)
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
