"""The tools: one module per family, each tool declared beside its code; ``TOOLS`` gathers them.

What lives where:
  registry.py  ``ToolSpec`` and ``ToolFamily.tool``, the decorator every tool is declared with
  ledger.py    read_budget_table, compute_ceiling, check_pool_contract (the boot ledger)
  audit.py     audit_step_shape, check_serve_script, compare_dry_run (the step-shape audit)
  probes.py    token_count_probe, boundary_probe, decode_probe (live endpoints)
  fleet.py     list_fleet (the loaded config)
  plan.py      compare_arms, plan_free_vram (what the free VRAM buys; its picture)
  gates.py     render_gates, verify_deploy (shipping a resize)

Each tool reads its sources (sources.py, scripts.py, probes), calls the pure core and shapes
its output model (models/). Imports go one way: core <- I/O (sources, scripts, remote,
probes) <- tools <- MCP (server.py) / CLI (cli.py); nothing here imports server or cli. The
MCP server registers every entry of ``TOOLS`` and the CLI makes a subcommand of each, with
the same input model, so the two cannot drift apart. A tool's docstring is its description
for agents; it states the rule and the traps with numbers taken from radiance_mcp.constants
(a test checks they agree).

To add a family: a module here with ``FAMILY = ToolFamily()`` and each tool declared as

    @FAMILY.tool("A title for people", open_world=True)
    async def my_tool(runtime: Runtime, args: MyToolInput) -> MyToolOutput:
        \"\"\"What it does, when to use it, the rule it keeps, what to call next.\"\"\"

(its models in models/<family>.py; a parameter annotated ``Context`` gets the MCP request
context), then one line in ``TOOLS`` below. The order of ``TOOLS`` is the order of tools/list.
"""

from radiance_mcp.tools import audit, fleet, gates, ledger, plan, probes
from radiance_mcp.tools.registry import ToolFamily, ToolSpec

TOOLS: list[ToolSpec] = [
    *ledger.FAMILY, *audit.FAMILY, *probes.FAMILY, *fleet.FAMILY, *plan.FAMILY, *gates.FAMILY,
]

__all__ = ["TOOLS", "ToolFamily", "ToolSpec"]
