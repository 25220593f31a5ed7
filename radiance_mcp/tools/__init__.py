"""The tools: one module per family, each tool declared beside its code; ``TOOLS`` gathers them.

What lives where: ``FAMILIES`` below names each family module and its tools, in the order of
tools/list; registry.py holds ``ToolSpec`` and ``ToolFamily.tool``, the decorator every tool
is declared with.

Each tool reads its sources (sources/, probes/), calls the pure core and shapes
its output model (models/). Imports go one way: core <- models, sources <- probes <- tools <-
app (server.py, cli.py); nothing here imports the app. The
MCP server registers every entry of ``TOOLS`` and the CLI makes a subcommand of each, with
the same input model, so the two cannot drift apart. A tool's docstring is its description
for agents; it states the rule and the traps with numbers taken from radiance_mcp.core.constants
(a test checks they agree).

To add a family: a module here with ``FAMILY = ToolFamily()`` and each tool declared as

    @FAMILY.tool("A title for people", open_world=True)
    async def my_tool(runtime: Runtime, args: MyToolInput) -> MyToolOutput:
        \"\"\"What it does, when to use it, the rule it keeps, what to call next.\"\"\"

(its models in models/<family>.py; a parameter annotated ``Progress`` gets the MCP request
context, to report progress), then its line in ``FAMILIES`` below.

Importing this package loads no family: a CLI subcommand imports its tool's family alone
(``family``), so compute-ceiling never loads the probes' or the audit's code; ``TOOLS`` loads
them all on first use (the server, the CLI's help).
"""

import importlib

from radiance_mcp.tools.registry import Progress, ToolFamily, ToolSpec

FAMILIES: dict[str, tuple[str, ...]] = {
    "ledger": ("read_budget_table", "compute_ceiling", "check_pool_contract"),  # the boot ledger
    "audit": ("audit_step_shape", "check_serve_script", "compare_dry_run"),  # the step-shape audit
    "probes": ("token_count_probe", "boundary_probe", "decode_probe"),  # live endpoints
    "fleet": ("list_fleet",),  # the loaded config
    "arms": ("compare_arms",),  # a campaign's arms against the noise
    "plan": ("plan_free_vram",),  # what the free VRAM buys; its picture
    "gates": ("render_gates",),  # shipping a resize: the env file and its gates
    "deploy": ("verify_deploy",),  # the deploy's boot against them
}
"""Each family module and the tools it declares, in the order of tools/list."""


def family(module: str) -> ToolFamily:
    """The tools of one family module (tests/tools/test_registry.py checks they are the ones FAMILIES names)."""
    declared: ToolFamily = importlib.import_module(f"{__name__}.{module}").FAMILY
    return declared


def tool_names() -> list[str]:
    """Every tool's name, in the order of tools/list, without importing any tool's code."""
    return [name for names in FAMILIES.values() for name in names]


def tool_spec(name: str) -> ToolSpec:
    """One tool, by name: its family is imported (once), no other."""
    for module, names in FAMILIES.items():
        if name in names:
            return next(spec for spec in family(module) if spec.name == name)
    raise KeyError(name)


def __getattr__(name: str) -> list[ToolSpec]:
    # TOOLS is gathered on first use rather than at import, so that importing one family loads no other.
    if name == "TOOLS":
        return [spec for module in FAMILIES for spec in family(module)]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FAMILIES", "TOOLS", "Progress", "ToolFamily", "ToolSpec", "family", "tool_names", "tool_spec"]
