"""`kbgraph kb`: knowledge bases created, listed, changed, re-embedded and removed."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from kbgraph.cli.root import FOUND_HOW, exit_after, fail, main, no_data_folder, open_engine
from kbgraph.cli.output import ProgressBars, echo_graph_report, refresh_summary
from kbgraph.config import Settings
from kbgraph.meta.schemas import DEFAULT_ENTITY_TYPES, GraphConfig


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
@click.option("--embedding-model", default="", help="MODEL@PROVIDER: an embedding model of one of the tenant's providers "
                                                    "(default: the configured embedder).")
@click.pass_context
def kb_create(ctx: click.Context, name: str, method: str | None, entity_types: str | None, community: bool,
              resolution: bool, gleanings: int | None, chunk_tokens: int | None, chunk_overlap: int | None,
              description: str, llm_model: str | None, llm_base_url: str | None, embedding_model: str) -> None:
    """Create a knowledge base."""
    settings: Settings = ctx.obj["settings"]
    graph = GraphConfig(
        enabled=method is not None, method=method or "nlp",
        entity_types=_entity_types(entity_types) or DEFAULT_ENTITY_TYPES,
        community=community, resolution=resolution,
        max_gleanings=settings.max_gleanings if gleanings is None else gleanings)
    with open_engine(ctx, creates=True) as engine:
        created = engine.create_kb(name, graph=graph, description=description, chunk_tokens=chunk_tokens,
                                   chunk_overlap=chunk_overlap, embedding_model=embedding_model,
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
        fail("nothing to change: give --graph, --entity-types, --community/--no-community, "
             "--resolution/--no-resolution or --gleanings")
    bars = ProgressBars(sys.stderr.isatty() if progress is None else progress)
    with open_engine(ctx) as engine:
        current = engine.kb(name).graph
        graph = GraphConfig.model_validate({**current.model_dump(), **changes})
        change = engine.set_graph(name, graph)
        click.echo(change.describe())
        if change.action == "build":
            try:
                report = engine.build_graph(name, progress=bars)
            finally:
                bars.close()
            exit_after(echo_graph_report(report, bars.enabled))
        elif change.action == "refresh":
            try:
                result = engine.refresh_graph(name, progress=bars)
            finally:
                bars.close()
            click.echo(refresh_summary(result))


@kb.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def kb_list(ctx: click.Context, as_json: bool) -> None:
    """List knowledge bases."""
    settings: Settings = ctx.obj["settings"]
    if no_data_folder(settings):  # none, and no empty folder left behind for the folders below to find
        click.echo("[]" if as_json else f"no knowledge bases yet in {settings.data_dir.absolute()} (there is no "
                   f"data folder there; {FOUND_HOW}): `kbgraph kb create NAME`")
        return
    with open_engine(ctx) as engine:
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
            click.echo(f"no knowledge bases yet in {engine.location}: `kbgraph kb create NAME` ({FOUND_HOW})")
        for row in rows:
            click.echo(f"{row['name']:<24} {row['documents']:>5} docs {row['chunks']:>7} chunks  graph: {row['graph']}")


@kb.command("rm")
@click.argument("name")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def kb_rm(ctx: click.Context, name: str, yes: bool) -> None:
    """Remove a knowledge base and everything in it (asks first unless --yes)."""
    with open_engine(ctx) as engine:
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
@click.option("--force", is_flag=True, help="Re-embed even when the knowledge base is on that model already.")
@click.option("--model", default=None, help="The model to move to: the configured one's name, or MODEL@PROVIDER, an "
              "embedding model of one of the tenant's model providers (default: the provider's model the knowledge "
              "base is on, else the configured one).")
@click.pass_context
def kb_reembed(ctx: click.Context, name: str, force: bool, model: str | None) -> None:
    """Re-embed a knowledge base with the configured embedding model (after switching models), or --model."""
    bars = ProgressBars(sys.stderr.isatty())
    with open_engine(ctx) as engine:
        before = engine.kb(name).embedding_model
        if model is not None:
            target = engine.embedding_choice(model)
        else:
            target = before if "@" in before else engine.embedder.model_name
        if before == target and not force:
            click.echo(f"nothing to re-embed: {name!r} is embedded with {before} already "
                       "(--force re-embeds anyway)")
            return
        try:
            changed = engine.reembed_kb(name, progress=bars, force=force, model=target)
        finally:
            bars.close()
        click.echo(f"re-embedded {changed} rows of {name!r}: {before or 'unknown'} -> {target}")
