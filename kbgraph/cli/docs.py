"""`kbgraph docs`: a knowledge base's documents listed with their status, and removed."""

from __future__ import annotations

import json
import re
from typing import Any

import click

from kbgraph.cli.root import main, open_engine
from kbgraph.cli.output import echo_table, format_size


@main.group()
def docs() -> None:
    """List and remove documents."""


@docs.command("list")
@click.option("--kb", "kb_name", required=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def docs_list(ctx: click.Context, kb_name: str, as_json: bool) -> None:
    """List a knowledge base's documents with their status."""
    with open_engine(ctx) as engine:
        rows = engine.list_documents(kb_name)
        if as_json:
            click.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=1, ensure_ascii=False))
            return
        if not rows:
            click.echo(f"no documents yet in {kb_name!r} ({engine.location}): `kbgraph index PATH --kb {kb_name}`")
            return
        table = [("ID", "STATUS", "CHUNKS", "SIZE", "NAME", "DETAIL")]
        table += [(row.id[:12], row.status, str(row.chunk_count), format_size(row.size), row.name,
                   _doc_detail(row)) for row in rows]
        echo_table(table, right=(2, 3))


_CHUNK_COUNT = re.compile(r"^\d+ chunks?(; )?")


def _doc_detail(row: Any) -> str:
    """What the table's other columns do not already say: the error, else the graph part of the message."""
    if row.error:
        return " ".join(row.error.split())
    return _CHUNK_COUNT.sub("", row.message)


@docs.command("rm")
@click.argument("doc")
@click.option("--kb", "kb_name", required=True)
@click.pass_context
def docs_rm(ctx: click.Context, doc: str, kb_name: str) -> None:
    """Remove a document (by name or id): its chunks, mentions and its part of the graph."""
    with open_engine(ctx) as engine:
        change = engine.delete_document(kb_name, doc)
        click.echo(f"removed {doc!r}; graph: {change.entities_written} entities re-derived, "
                   f"{change.entities_removed} removed")
