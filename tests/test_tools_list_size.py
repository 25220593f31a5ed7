"""What an agent pays on every turn: tools/list (descriptions, input and output schemas), measured
in characters, over the SDK's client. bench/README.md records the figures."""

from __future__ import annotations

import json

from mcp import Client
from shared_server import empty_fleet_server

from radiance_mcp.app.server import output_schema_uri

TOOLS_LIST_CHARS = 24_000
"""Issue 26's budget for every tool's description, input and output schema together (32,734 characters for
the 14 before it; issue 11 had set 5,000 tokens for the first ten). The shared arguments are worded once, in
the server's instructions; the caps and bounds every argument carries (issue 10) stay published."""


async def test_tools_list_fits_its_budget_and_the_full_output_schemas_are_resources() -> None:
    async with Client(empty_fleet_server()) as client:
        tools = (await client.list_tools()).tools
        full = await client.read_resource(output_schema_uri("compute_ceiling"))
    sizes = {
        tool.name: len(tool.description or "") + len(json.dumps(tool.input_schema, separators=(",", ":")))
        + len(json.dumps(tool.output_schema, separators=(",", ":")))
        for tool in tools
    }
    print(f"tools/list: {sum(sizes.values()):,} characters for all {len(sizes)} tools")
    assert len(sizes) == 14 and sum(sizes.values()) <= TOOLS_LIST_CHARS, sizes
    # The published output schema is the top level; the full one is a resource, and holds the nesting.
    schema = json.loads(full.contents[0].text)  # type: ignore[union-attr]
    assert "$defs" in schema and "title" not in json.dumps(schema)
    listed = next(tool for tool in tools if tool.name == "compute_ceiling").output_schema
    assert listed is not None and set(listed["properties"]) == set(schema["properties"])
