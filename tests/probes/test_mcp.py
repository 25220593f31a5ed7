"""The probe tools through the MCP server (in-process client): schemas, progress, errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp import Client

from radiance_mcp.app.server import build_server
from radiance_mcp.sim import Shape, SimEndpoint
from radiance_mcp.sources.config import Fleet, Service
from radiance_mcp.sources.runtime import Runtime


@asynccontextmanager
async def served() -> AsyncIterator[tuple[Client, SimEndpoint]]:
    # A context manager, not a fixture: the client's cancel scopes must close in the task that opened them.
    async with SimEndpoint(Shape(), time_scale=0.001) as ep:
        runtime = Runtime(Fleet(services={"sim": Service(endpoint=ep.url)}))
        async with Client(build_server(runtime)) as mcp_client:
            yield mcp_client, ep


async def test_the_probe_tools_are_listed_with_flat_arguments() -> None:
    async with served() as client:
        await _test_the_probe_tools_are_listed_with_flat_arguments(client)


async def _test_the_probe_tools_are_listed_with_flat_arguments(client: tuple[Client, SimEndpoint]) -> None:
    mcp_client, _ = client
    listed = {tool.name: tool for tool in (await mcp_client.list_tools()).tools}
    for name, read_only in (("token_count_probe", True), ("boundary_probe", False), ("decode_probe", False)):
        tool = listed[name]
        assert tool.annotations is not None and tool.annotations.read_only_hint is read_only
        assert tool.annotations.open_world_hint is True and tool.output_schema is not None
    assert {"service", "n", "execute", "gen_tokens", "max_model_len"} <= set(
        listed["boundary_probe"].input_schema["properties"]
    )


async def test_boundary_through_mcp_reports_progress() -> None:
    async with served() as client:
        await _test_boundary_through_mcp_reports_progress(client)


async def _test_boundary_through_mcp_reports_progress(client: tuple[Client, SimEndpoint]) -> None:
    mcp_client, _ = client
    seen: list[tuple[float, float | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total))

    result = await mcp_client.call_tool(
        "boundary_probe", {"service": "sim", "n": 2, "max_model_len": 200_000, "execute": True},
        progress_callback=progress,
    )
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content["verdict"] == "2/2 retrieved"
    assert sorted(seen) == [(1, 2), (2, 2)]


async def test_guard_rails_reach_the_agent_as_tool_errors() -> None:
    async with served() as client:
        await _test_guard_rails_reach_the_agent_as_tool_errors(client)


async def _test_guard_rails_reach_the_agent_as_tool_errors(client: tuple[Client, SimEndpoint]) -> None:
    mcp_client, ep = client
    result = await mcp_client.call_tool("decode_probe", {"service": "sim", "gen_tokens": 8})
    assert result.is_error and "at least 128" in result.content[0].text  # type: ignore[union-attr]
    result = await mcp_client.call_tool("token_count_probe", {"service": "nowhere", "text": "x"})
    assert result.is_error and "known services: sim" in result.content[0].text  # type: ignore[union-attr]
    assert ep.requests == []
