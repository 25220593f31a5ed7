"""Tool inputs and outputs: the pydantic models at the MCP and CLI boundary.

What lives where:
  base.py        the bounded argument types, the ``Input`` and ``Output`` bases, ``LineRef``,
                 ``BootRef`` and ``mib``: what every family shares
  ledger_ref.py  ``LedgerRef``: which ledger a tool reads, its one rule and its field wordings
  ledger.py      read_budget_table, compute_ceiling, check_pool_contract
  audit.py       audit_step_shape, check_serve_script, compare_dry_run
  probes.py      token_count_probe, boundary_probe, decode_probe
  fleet.py       list_fleet
  plan.py        compare_arms, plan_free_vram
  gates.py       render_gates, verify_deploy

Imports go one way: models import the core (constants, ledger) and each other's base, never
tools or MCP code, and I/O only for a shared argument rule (compare_dry_run's mode names are
checked by core.rules.remote_words.MODE_PATTERN, as the hosts check them);
sources, probes, tools, server and cli import models. Inputs are flat where they can be
(clients sometimes send a nested object as a JSON string, which the list fields accept too).
Outputs carry every figure with its ledger line, so an agent can quote the engine rather than
a number of its own. The names below are the ones most callers need.

The model modules (and config.py) do without ``from __future__ import annotations``: with it,
pydantic evaluates every field's annotation from its string when the class is made, about
10 ms of CPU across the models at every start.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from radiance_mcp.models.base import BootRef, Input, LineRef, Output, boot_ref, line_ref, mib
    from radiance_mcp.models.ledger import (
        CheckPoolContractInput,
        ComputeCeilingInput,
        ReadBudgetTableInput,
        ReserveInput,
    )
    from radiance_mcp.models.ledger_ref import LedgerRef

_HOMES = {
    "BootRef": "base", "Input": "base", "LineRef": "base", "Output": "base", "boot_ref": "base", "line_ref": "base",
    "mib": "base", "CheckPoolContractInput": "ledger", "ComputeCeilingInput": "ledger",
    "ReadBudgetTableInput": "ledger", "ReserveInput": "ledger", "LedgerRef": "ledger_ref",
}
"""Where each name below lives: importing this package (as every model module's import does)
builds no family's models; a name is loaded from its module when it is first asked for."""


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BootRef",
    "CheckPoolContractInput",
    "ComputeCeilingInput",
    "Input",
    "LedgerRef",
    "LineRef",
    "Output",
    "ReadBudgetTableInput",
    "ReserveInput",
    "boot_ref",
    "line_ref",
    "mib",
]
