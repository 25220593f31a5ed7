"""What an agent pays on every turn: tools/list (descriptions, input and output schemas), measured
as characters / 4, over the SDK's client. bench/README.md records the figures."""

from __future__ import annotations

import json

from mcp import Client
from shared_server import empty_fleet_server

from radiance_mcp.app.server import output_schema_uri

LATER_TOOLS = {"compare_arms", "plan_free_vram", "render_gates", "verify_deploy"}
"""Tools added after the budget was set (issue 11 measured the ten before them)."""
TEN_TOOLS_TOKENS = 5_000
"""Issue 11's budget for the ten: 19,150 tokens before compact schemas, 6,398 with them, 4,999
with output schemas that list no ``required`` and optional arguments published without null
(bench/README.md). The caps and bounds every argument carries (issue 10) stay published."""


async def test_tools_list_fits_its_budget_and_the_full_output_schemas_are_resources() -> None:
    async with Client(empty_fleet_server()) as client:
        tools = (await client.list_tools()).tools
        full = await client.read_resource(output_schema_uri("compute_ceiling"))
    sizes = {
        tool.name: len(tool.description or "") + len(json.dumps(tool.input_schema, separators=(",", ":")))
        + len(json.dumps(tool.output_schema, separators=(",", ":")))
        for tool in tools
    }
    ten = sum(size for name, size in sizes.items() if name not in LATER_TOOLS) // 4
    print(f"tools/list: {ten:,} tokens for the ten tools, {sum(sizes.values()) // 4:,} for all {len(sizes)}")
    assert ten <= TEN_TOOLS_TOKENS
    # The published output schema is the top level; the full one is a resource, and holds the nesting.
    schema = json.loads(full.contents[0].text)  # type: ignore[union-attr]
    assert "$defs" in schema and "title" not in json.dumps(schema)
    listed = next(tool for tool in tools if tool.name == "compute_ceiling").output_schema
    assert listed is not None and set(listed["properties"]) == set(schema["properties"])
