"""`kbgraph config`: every setting with its value and environment variable, secrets masked."""

from __future__ import annotations

import click

from kbgraph.cli.root import main
from kbgraph.config import ENTITY_TYPES_HELP, Settings, settings_table


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
    click.echo("")
    click.echo(click.wrap_text(ENTITY_TYPES_HELP, width=100))
