"""What the probe and step-shape tools tell an agent names no site and sends no one into the server's code.

Descriptions and argument descriptions as an MCP client lists them, and a remedy an error gives.
"""

from __future__ import annotations

import re

import httpx
import pytest
from mcp import Client
from shared_server import empty_fleet_server

from radiance_mcp.core.errors import ProbeError
from radiance_mcp.models.probes import TokenCountProbeInput
from radiance_mcp.probes import token_count_probe
from radiance_mcp.sources.config import Fleet, Service

TOOLS = ("token_count_probe", "boundary_probe", "decode_probe", "audit_step_shape", "check_serve_script",
         "compare_dry_run")
# A site's names, the server's own files, and the documents behind it.
FORBIDDEN = re.compile(r"frank|archon|dankserver|PHRASEBOOK|\bseeds?\b|radiance_mcp|\.py\b", re.IGNORECASE)


async def test_tool_and_argument_descriptions_name_no_site_and_no_server_file() -> None:
    async with Client(empty_fleet_server()) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    for name in TOOLS:
        tool = listed[name]
        texts = [tool.description or "", *(str(p.get("description", "")) for p in
                                           tool.input_schema["properties"].values())]
        for text in texts:
            assert not FORBIDDEN.search(text), f"{name}: {FORBIDDEN.search(text)!r} in {text!r}"


async def test_an_unknown_refusal_is_explained_without_sending_the_reader_into_the_code() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": "context overflow: try a shorter prompt"}})

    fleet = Fleet(services={"svc": Service(endpoint="http://127.0.0.1:9")})
    args = TokenCountProbeInput(service="svc", text="x" * 4_000_000, window_tokens=200_000)
    with pytest.raises(ProbeError) as caught:
        await token_count_probe(fleet, args, transport=httpx.MockTransport(handler))
    message = str(caught.value)
    assert "no dialect's refusal wording matches" in message and "dialect=" in message
    assert not FORBIDDEN.search(message)
