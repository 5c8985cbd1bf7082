"""`kbgraph mcp` through the official SDK's own client (issue 38, item 6): over stdio, started as an
agent starts it, acting for the `tenant` setting; over streamable HTTP, every request authenticated
with a tenant's API key and answered for that tenant only. Every tool: the knowledge bases listed,
retrieval in every mode with citations and the graph's context, an entity and its neighbours, an
answer from a model (the knowledge bases, or a stored assistant)."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.engine import Engine
from kbgraph.meta.schemas import GraphConfig
from support.processes import ServiceProcess, free_port, service_env
from support.scripted_llm import ScriptedLLM

ANSWER = "The Lumen Cartographers Guild was founded by Mira Castell."


def model_reply(body: dict[str, Any]) -> str:
    """The scripted model: the global mode's map and reduce steps, and chat answers citing their first excerpt."""
    prompt = body["messages"][-1]["content"]
    system = body["messages"][0]["content"]
    if "Key points:" in prompt:
        return ANSWER
    if "Reports:" in prompt:
        return json.dumps({"points": [{"description": "Mira Castell founded the guild", "score": 90}]})
    markers = re.findall(r"\[ID:(\d+)\]", system)
    if markers and len(body["messages"]) > 1:
        return f"Mira Castell founded the guild [ID:{markers[0]}]."
    return "{}"


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(responder=model_reply) as server:
        yield server


@pytest.fixture
def tenants(settings: Settings, llm: ScriptedLLM) -> tuple[Settings, dict[str, str]]:
    """Two tenants: acme with the sample corpus (graph on, communities, an assistant), other with one note."""
    with Engine.open(settings, tenant="acme") as acme:
        acme.create_kb("lore", graph=GraphConfig(enabled=True, method="nlp", community=True))
        acme.index_paths("lore", [SAMPLE_CORPUS_DIR])
        lore = acme.kb("lore")
        acme.meta.create_assistant("acme", "guide", kb_ids=[lore.id])
        _, acme_key = acme.meta.create_api_key("acme")
    note = settings.data_dir.parent / "secret.md"
    note.write_text("The vault of Orrin Vale holds the silver ledger of the harbor.\n")
    with Engine.open(settings, tenant="other") as other:
        other.create_kb("secrets")
        other.index_paths("secrets", [note])
        _, other_key = other.meta.create_api_key("other")
    return llm.settings(settings), {"acme": acme_key, "other": other_key}


async def _call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    if result.is_error:
        return {"error": result.content[0].text}
    return json.loads(result.content[0].text)


async def _every_tool(session: ClientSession) -> dict[str, Any]:
    await session.initialize()
    seen: dict[str, Any] = {"tools": sorted(t.name for t in (await session.list_tools()).tools)}
    seen["list"] = await _call(session, "list_knowledge_bases")
    for mode in ("naive", "kg", "ppr", "mix", "global"):
        seen[mode] = await _call(session, "retrieve", question="Who founded the Lumen Cartographers Guild?",
                                 knowledge_bases=["lore"], mode=mode, top_k=4)
    seen["entity"] = await _call(session, "lookup_entity", name="Mira Castell", knowledge_base="lore")
    seen["entity_typo"] = await _call(session, "lookup_entity", name="Mira Castel", knowledge_base="lore")
    seen["typo"] = await _call(session, "lookup_entity", name="Mira Castel", knowledge_base="lroe")
    seen["ask"] = await _call(session, "ask", question="Who founded the Lumen Cartographers Guild?",
                              knowledge_bases=["lore"])
    seen["assistant"] = await _call(session, "ask", question="Who founded the guild?", assistant="guide")
    return seen


def _check_every_tool(seen: dict[str, Any]) -> None:
    assert seen["tools"] == ["ask", "list_knowledge_bases", "lookup_entity", "retrieve"]
    assert [kb["name"] for kb in seen["list"]["knowledge_bases"]] == ["lore"]  # not the other tenant's
    assert seen["list"]["assistants"] == [{"name": "guide", "description": "", "knowledge_bases": ["lore"]}]
    for mode in ("naive", "kg", "ppr", "mix"):
        found = seen[mode]
        assert found["mode"] == mode and found["chunks"], (mode, found)
        assert [c["citation"] for c in found["chunks"]] == list(range(len(found["chunks"])))  # [ID:n]
        assert "lumen_cartographers_guild.md" in {c["document"] for c in found["chunks"]}
        assert "[ID:0]" in found["context"] or "ID:0" in found["context"], found["context"][:300]
    for mode in ("kg", "mix"):  # the graph's context
        assert seen[mode]["entities"] and seen[mode]["relations"] and seen[mode]["reports"]
        assert "Mira Castell" in {e["name"] for e in seen[mode]["entities"]}
    assert seen["global"]["answer"] == ANSWER
    assert seen["entity"]["name"] == "Mira Castell" and seen["entity"]["neighbours"]
    assert "did you mean 'Mira Castell'" in seen["entity_typo"]["error"]
    assert "mira_castell.md" in seen["entity"]["documents"]
    assert "no knowledge base named 'lroe'" in seen["typo"]["error"] and "did you mean 'lore'" in seen["typo"]["error"]
    for asked in (seen["ask"], seen["assistant"]):
        assert asked["answer"].startswith("Mira Castell founded the guild [ID:0]")
        assert asked["references"] and asked["references"][0]["citation"] == 0 and asked["references"][0]["document"]


def test_stdio_serves_the_tenant_of_the_setting(tenants: tuple[Settings, dict[str, str]]) -> None:
    settings, _ = tenants
    env = service_env(settings, KBGRAPH_TENANT="acme", PYTHONPATH=":".join(sys.path))
    params = StdioServerParameters(command=sys.executable, args=["-m", "kbgraph.cli", "mcp"], env=env,
                                   cwd=str(settings.data_dir.parent))

    async def session() -> dict[str, Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            return await _every_tool(client)

    _check_every_tool(anyio.run(session))


@pytest.fixture
def http_server(tenants: tuple[Settings, dict[str, str]], tmp_path: Path) -> Iterator[str]:
    settings, _ = tenants
    port = free_port()
    env = service_env(settings, PYTHONPATH=":".join(sys.path))
    with ServiceProcess([sys.executable, "-m", "kbgraph.cli", "mcp", "--http", "--port", str(port)], env,
                        tmp_path / "mcp.log") as server:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert server.alive(), server.output()
            try:
                httpx2.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
                break
            except httpx2.HTTPError:
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"


def _over_http(url: str, key: str | None, work: Any) -> Any:
    async def session() -> Any:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
                streamable_http_client(url, http_client=http) as (read, write), ClientSession(read, write) as client:
            return await work(client)

    return anyio.run(session)


def test_http_answers_each_key_for_its_own_tenant(tenants: tuple[Settings, dict[str, str]], http_server: str) -> None:
    _, keys = tenants
    _check_every_tool(_over_http(http_server, keys["acme"], _every_tool))

    async def others_view(client: ClientSession) -> dict[str, Any]:
        await client.initialize()
        return {"list": await _call(client, "list_knowledge_bases"),
                "lore": await _call(client, "retrieve", question="Who founded the guild?", knowledge_bases=["lore"]),
                "all": await _call(client, "retrieve", question="Who founded the Lumen Cartographers Guild?"),
                "entity": await _call(client, "lookup_entity", name="Mira Castell", knowledge_base="lore")}

    seen = _over_http(http_server, keys["other"], others_view)
    assert [kb["name"] for kb in seen["list"]["knowledge_bases"]] == ["secrets"]
    assert "no knowledge base named 'lore'" in seen["lore"]["error"] and "entity" not in seen["lore"]
    assert {c["document"] for c in seen["all"]["chunks"]} <= {"secret.md"}
    assert "no knowledge base named 'lore'" in seen["entity"]["error"]


@pytest.mark.parametrize("key", [None, "kbgraph-not-a-key"])
def test_http_refuses_a_request_without_a_known_key(tenants: tuple[Settings, dict[str, str]], http_server: str,
                                                    key: str | None) -> None:
    refused = httpx2.post(http_server, headers={"Authorization": f"Bearer {key}"} if key else {},
                          json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10)
    assert refused.status_code == 401, refused.text

    async def listing(client: ClientSession) -> Any:
        await client.initialize()
        return await client.list_tools()

    with pytest.raises(Exception) as failed:  # the SDK's client cannot even start a session
        _over_http(http_server, key, listing)
    assert any(isinstance(e, MCPError) for e in _leaves(failed.value)), repr(failed.value)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]
