"""A tool call through the SDK's MCP client, as the engine-ledger tests read its answer."""

from __future__ import annotations

from typing import Any

from mcp import Client


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, Any]:
    """(is_error, the structured output, or the error's text)."""
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        return True, result.content[0].text  # type: ignore[union-attr]
    return False, result.structured_content


def lines(figure: dict[str, Any]) -> list[int]:
    """The line numbers a figure of the output cites (read_budget_table's figures cite them by number)."""
    return [ref if isinstance(ref, int) else ref["line"] for ref in figure["lines"]]


def reasons(plan: dict[str, Any]) -> dict[str, str]:
    """Why each unreadable service of plan_free_vram's answer was not planned: its error, or (whole fleet) the
    detail of the problem it names, which says it once for the services it names."""
    return {u["service"]: u["error"] or plan["problems"][u["problem"]]["detail"] for u in plan["unreadable"]}
