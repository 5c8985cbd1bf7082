"""kbgraph as an MCP server (``kbgraph mcp``): a door for assistants and IDEs, like the CLI and the web
app, above the engine. ``tools`` does what the tools do for one tenant's engine; ``server`` serves
them with the official ``mcp`` SDK over stdio or streamable HTTP (a tenant's API key per request).
Nothing here is imported until ``kbgraph mcp`` runs, so the other commands never load the SDK."""
