"""`kbgraph mcp`: the knowledge bases served to assistants and IDEs over the Model Context Protocol
(kbgraph/mcp_server): stdio for a client that starts the command itself, acting for the ``tenant``
setting like every other command; streamable HTTP (``--http``) for clients that connect, each request
authenticated with a tenant's API key and answered for that tenant only."""

from __future__ import annotations

import click

from kbgraph.cli.root import FOUND_HOW, fail, main, no_data_folder


@main.command("mcp")
@click.option("--http", "over_http", is_flag=True, help="Streamable HTTP at http://HOST:PORT/mcp (API keys) "
              "instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(1, 65535), default=9381, show_default=True)
@click.pass_context
def mcp_command(ctx: click.Context, over_http: bool, host: str, port: int) -> None:
    """Serve the knowledge bases over MCP: list them, retrieve (every mode), look up an entity, ask."""
    from kbgraph.engine import KBGraphError
    from kbgraph.mcp_server.server import run_http, run_stdio
    from kbgraph.meta.schemas import MetaError

    settings = ctx.obj["settings"]
    if no_data_folder(settings):
        fail(f"no knowledge bases to serve in {settings.data_dir.absolute()}: there is no data folder there "
             f"({FOUND_HOW})")
    try:
        if over_http:
            click.echo(f"kbgraph MCP server at http://{host}:{port}/mcp (Authorization: Bearer <a tenant's API key>)",
                       err=True)
            run_http(settings, host, port)
        else:
            run_stdio(settings)
    except (KBGraphError, MetaError) as exc:
        fail(str(exc))
