"""The MCP server (``kbgraph mcp``) on the official ``mcp`` SDK: the tools of kbgraph/mcp_server/tools.py
over stdio (one tenant: the ``tenant`` setting, as the CLI) or streamable HTTP, where every request
carries a tenant's API key (``Authorization: Bearer ...``, the key the REST API takes) and is answered
for that tenant only; a request without a known key is refused (401) before any tool runs.

The key is looked up with the metadata database's own lookup (``MetaDB.tenant_for_api_key``, the one
web/api.py uses), through the SDK's bearer-token middleware. HTTP mode is stateless (each request
stands alone), so that the tenant a tool acts for is always the one of the request that called it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from kbgraph.config import Settings
from kbgraph.engine import Engine
from kbgraph.mcp_server import tools

INSTRUCTIONS = (
    "kbgraph's knowledge bases with their knowledge graphs. Start with list_knowledge_bases; retrieve "
    "finds what a knowledge base holds about a question (chunks numbered as citations [ID:n], and the "
    "graph's entities, relations and community reports); lookup_entity shows an entity's description "
    "and neighbours; ask has a model answer from the knowledge bases (or a stored assistant), citing chunks."
)


class TenantEngines:
    """One engine per tenant over shared connections and models (like the web app's and the
    workers' pools): the first one opened, the others sharing its database, store and embedder."""

    def __init__(self, settings: Settings) -> None:
        self.base = Engine.open(settings)
        self._engines: dict[str, Engine] = {self.base.tenant: self.base}
        self._guard = threading.Lock()

    def __call__(self, tenant: str) -> Engine:
        with self._guard:
            found = self._engines.get(tenant)
            if found is None:
                base = self.base
                found = Engine(base.settings, base.meta, base.store_handle, tenant, base.kb_lock,
                               embedder=base.embedder, limits=base.limits)
                self._engines[tenant] = found
            return found

    def close(self) -> None:
        self.base.close()  # the others share its connections


class ApiKeyVerifier:
    """The SDK's token verifier over the metadata database's API keys: a key is its tenant's."""

    def __init__(self, engines: TenantEngines) -> None:
        self.engines = engines

    async def verify_token(self, token: str) -> AccessToken | None:
        tenant = await anyio.to_thread.run_sync(self.engines.base.meta.tenant_for_api_key, token)
        return AccessToken(token=token, client_id=tenant, scopes=[]) if tenant else None


def _guarded(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return call()
    except tools.PROBLEMS as exc:
        raise ToolError(str(exc)) from None


def build_server(engine_for: Callable[[], Engine], **options: Any) -> MCPServer:
    """The server and its tools; ``engine_for`` gives the engine of the tenant a call acts for."""
    # the SDK logs every failed tool call at INFO: an agent's "did you mean" is not the operator's concern
    server: MCPServer = MCPServer("kbgraph", instructions=INSTRUCTIONS, log_level="WARNING", **options)

    @server.tool()
    def list_knowledge_bases() -> dict[str, Any]:
        """The tenant's knowledge bases (documents, chunks, graph method, default retrieval mode) and
        its stored chat assistants."""
        return _guarded(lambda: tools.list_knowledge_bases(engine_for()))

    @server.tool()
    def retrieve(question: str, knowledge_bases: list[str] | None = None, mode: str = "",
                 top_k: int = 8) -> dict[str, Any]:
        """What the knowledge bases hold about a question. knowledge_bases: names or ids (default:
        all). mode: naive (hybrid chunk search), kg (the graph's entities, relations and reports with
        their chunks), ppr (multi-hop: Personalized PageRank and passage chains), global (an answer
        map-reduced over community reports; needs a model), mix (chunks fused with the graph: the
        default with a graph). Chunks carry citation markers [ID:n]; context is what an LLM would get."""
        return _guarded(lambda: tools.retrieve(engine_for(), question, knowledge_bases or [], mode, top_k))

    @server.tool()
    def lookup_entity(name: str, knowledge_base: str) -> dict[str, Any]:
        """An entity of a knowledge base's graph by name (a misspelt one gets a "did you mean"): type,
        aliases, description, PageRank, the documents it is found in, and its neighbours with their relations."""
        return _guarded(lambda: tools.lookup_entity(engine_for(), name, knowledge_base))

    @server.tool()
    def ask(question: str, knowledge_bases: list[str] | None = None, assistant: str = "",
            mode: str = "") -> dict[str, Any]:
        """A model's answer from the knowledge bases (default: all; mode as in retrieve) or from a
        stored assistant (by name: its knowledge bases, prompt and model), citing chunks as [ID:n],
        with the chunks those markers stand for."""
        return _guarded(lambda: tools.ask(engine_for(), question, knowledge_bases or [], assistant, mode))

    return server


def run_stdio(settings: Settings) -> None:
    """Serve one client on stdin/stdout, for the ``tenant`` setting (as the CLI does)."""
    engines = TenantEngines(settings)
    try:
        build_server(lambda: engines.base).run("stdio")
    finally:
        engines.close()


def _request_tenant() -> str:
    token = get_access_token()
    if token is None:  # the SDK refuses a request without a valid key before any tool runs
        raise ToolError("not authenticated: send a tenant's API key as `Authorization: Bearer <key>`")
    return token.client_id


def http_app(settings: Settings, host: str, port: int) -> tuple[Any, TenantEngines]:
    """The streamable-HTTP application (Starlette) at /mcp, and the engines to close. On a loopback
    host the SDK refuses requests whose Host or Origin header names another (DNS rebinding); on
    others every host name is taken, the API key being what admits a request."""
    engines = TenantEngines(settings)
    server = build_server(lambda: engines(_request_tenant()), token_verifier=ApiKeyVerifier(engines),
                          auth=AuthSettings(issuer_url=f"http://{f'[{host}]' if ':' in host else host}:{port}",
                                            resource_server_url=None,
                                            required_scopes=[]))
    return server.streamable_http_app(stateless_http=True, json_response=True, host=host), engines


def run_http(settings: Settings, host: str, port: int) -> None:
    import uvicorn

    app, engines = http_app(settings, host, port)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        engines.close()
