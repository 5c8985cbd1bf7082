"""`kbgraph graph rename|set|merge|split|rm|add|import|corrections|undo|similar`: a knowledge base's
graph corrected and extended by hand (kbgraph/engine/corrections.py). Each correction is stored with
who made it and when, survives document changes and rebuilds, and can be undone."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import click

from kbgraph.cli.graph import graph
from kbgraph.cli.root import fail, open_engine

_WHO = click.option("--who", default=None, help="Who makes the correction (default: the login name).")
_KB = click.option("--kb", "kb_name", required=True)
_FORCE = click.option("--force", is_flag=True, help="Go ahead where two entities would become one.")


def _who(who: str | None) -> str:
    if who:
        return who
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return "cli"


def _done(outcome) -> None:
    c = outcome.correction
    verb = "undone" if c.undone else "made"
    click.echo(f"correction {c.seq} {verb}: {c.summary()} ({outcome.entities_changed} entities, "
               f"{outcome.relations_changed} relations changed)")


@graph.command("rename")
@click.argument("entity")
@click.argument("new_name")
@_KB
@_FORCE
@_WHO
@click.pass_context
def graph_rename(ctx: click.Context, entity: str, new_name: str, kb_name: str, force: bool, who: str | None) -> None:
    """Rename ENTITY to NEW_NAME (onto an existing entity's name only with --force: a merge)."""
    with open_engine(ctx) as engine:
        _done(engine.rename_entity(kb_name, entity, new_name, force=force, who=_who(who)))


@graph.command("set")
@click.argument("entity")
@_KB
@click.option("--type", "type_", help="The entity's type.")
@click.option("--description", help="The entity's description (replaces the one its mentions give).")
@_WHO
@click.pass_context
def graph_set(ctx: click.Context, entity: str, kb_name: str, type_: str | None, description: str | None,
              who: str | None) -> None:
    """Set ENTITY's type or description."""
    with open_engine(ctx) as engine:
        _done(engine.set_entity(kb_name, entity, type=type_, description=description, who=_who(who)))


@graph.command("merge")
@click.argument("entities", nargs=-1, required=True)
@_KB
@click.option("--into", help="The merged entity's name: one of ENTITIES or a new one (default: the first).")
@_FORCE
@_WHO
@click.pass_context
def graph_merge(ctx: click.Context, entities: tuple[str, ...], kb_name: str, into: str | None, force: bool,
                who: str | None) -> None:
    """Merge ENTITIES into one (entities of different types only with --force)."""
    if len(entities) < 2 and not into:
        fail("name at least two entities to merge (or one and --into another)")
    with open_engine(ctx) as engine:
        _done(engine.merge_entities(kb_name, list(entities), into, force=force, who=_who(who)))


@graph.command("split")
@click.argument("entity")
@_KB
@click.option("--name", "names", multiple=True, help="A name merged into ENTITY to split off (repeatable).")
@click.option("--doc", "docs", multiple=True, help="A document whose mentions of ENTITY to split off (repeatable).")
@click.option("--as", "new_name", help="The name of the entity split off (needed with --doc).")
@_FORCE
@_WHO
@click.pass_context
def graph_split(ctx: click.Context, entity: str, kb_name: str, names: tuple[str, ...], docs: tuple[str, ...],
                new_name: str | None, force: bool, who: str | None) -> None:
    """Split names (--name) or documents' mentions (--doc ... --as NEW) off ENTITY."""
    with open_engine(ctx) as engine:
        _done(engine.split_entity(kb_name, entity, names=names, docs=docs, new_name=new_name, force=force,
                                  who=_who(who)))


@graph.command("rm")
@click.argument("entity")
@click.argument("other", required=False)
@_KB
@_WHO
@click.pass_context
def graph_rm(ctx: click.Context, entity: str, other: str | None, kb_name: str, who: str | None) -> None:
    """Delete ENTITY, or with OTHER the relation between the two."""
    with open_engine(ctx) as engine:
        if other is None:
            _done(engine.delete_entity(kb_name, entity, who=_who(who)))
        else:
            _done(engine.delete_relation(kb_name, entity, other, who=_who(who)))


@graph.command("add")
@click.argument("entity")
@click.argument("other", required=False)
@_KB
@click.option("--type", "type_", default="unknown", show_default=True, help="The new entity's type.")
@click.option("--description", default="", help="What the entity or relation is.")
@click.option("--keyword", "keywords", multiple=True, help="A relation's keyword (repeatable).")
@click.option("--weight", type=float, default=1.0, show_default=True, help="A relation's weight.")
@_FORCE
@_WHO
@click.pass_context
def graph_add(ctx: click.Context, entity: str, other: str | None, kb_name: str, type_: str, description: str,
              keywords: tuple[str, ...], weight: float, force: bool, who: str | None) -> None:
    """Add ENTITY by hand, or with OTHER a relation between two entities of the graph."""
    with open_engine(ctx) as engine:
        if other is None:
            _done(engine.add_entity(kb_name, entity, type_, description, force=force, who=_who(who)))
        else:
            _done(engine.add_relation(kb_name, entity, other, description, keywords, weight, who=_who(who)))


@graph.command("import")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False), required=False)
@_KB
@click.option("--relations", type=click.Path(path_type=Path, dir_okay=False),
              help="With an entities CSV: the relations CSV (source, target, description, keywords, weight).")
@click.option("--format", "fmt", type=click.Choice(["graphml", "json", "csv"]), help="Default: from PATH's suffix.")
@click.option("--source", help="The curated source's name, which retrieval cites (default: PATH's file name).")
@click.option("--remove", "remove", help="Remove the curated source of this name instead.")
@_WHO
@click.pass_context
def graph_import(ctx: click.Context, path: Path | None, kb_name: str, relations: Path | None, fmt: str | None,
                 source: str | None, remove: str | None, who: str | None) -> None:
    """Import a curated graph (GraphML, `graph export` JSON, or entity and relation CSVs) as its own source."""
    from kbgraph.graph.curated import CuratedFormatError, read_curated

    if remove:
        with open_engine(ctx) as engine:
            _done(engine.remove_import(kb_name, remove, who=_who(who)))
        return
    if path is None:
        fail("name the file to import (or --remove SOURCE)")
    try:
        curated = read_curated(path, relations, fmt)
    except CuratedFormatError as exc:
        fail(str(exc))
    with open_engine(ctx) as engine:
        _done(engine.import_graph(kb_name, curated, source or path.name, who=_who(who)))


@graph.command("corrections")
@_KB
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def graph_corrections(ctx: click.Context, kb_name: str, as_json: bool) -> None:
    """The knowledge base's corrections, oldest first."""
    from kbgraph.engine.corrections import correction_dict

    with open_engine(ctx) as engine:
        found = engine.corrections(kb_name)
    if as_json:
        click.echo(json.dumps([correction_dict(c) for c in found], ensure_ascii=False, indent=1))
        return
    if not found:
        click.echo("no corrections")
    for c in found:
        undone = f"  [undone by {c.undone_by or '?'}]" if c.undone else ""
        click.echo(f"{c.seq:>4}  {c.who or '?'}  {_when(c.at)}  {c.summary()}{undone}")


@graph.command("undo")
@click.argument("correction", type=int, required=False)
@_KB
@_WHO
@click.pass_context
def graph_undo(ctx: click.Context, correction: int | None, kb_name: str, who: str | None) -> None:
    """Undo CORRECTION (its number in `graph corrections`; default: the last one)."""
    with open_engine(ctx) as engine:
        _done(engine.undo_correction(kb_name, correction, who=_who(who)))


@graph.command("similar")
@click.argument("entity")
@_KB
@click.pass_context
def graph_similar(ctx: click.Context, entity: str, kb_name: str) -> None:
    """Entities that may be ENTITY under another name (candidates to merge)."""
    with open_engine(ctx) as engine:
        for e in engine.similar_entities(kb_name, entity):
            click.echo(f"{e.name} ({e.type}, {e.mention_count} mentions)")


def _when(at: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
