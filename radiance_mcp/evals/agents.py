"""Scripted agents: the suite's own tests, driving the server through the SDK's MCP client.

``ReferenceAgent`` (radiance_mcp.evals.reference) follows the skills and scores 100 % on every
scenario; each faulty agent (radiance_mcp.evals.faulty) is the reference with one step done
wrong, caught by its own rule and no other. ``AGENTS`` names them all::

    async with Client(server) as client:
        answer = await AGENTS["reference"](client, scenario).run()
"""

from __future__ import annotations

from radiance_mcp.evals.faulty import FAULTY
from radiance_mcp.evals.reference import FaultyAgent, ReferenceAgent, Result, ToolRefused

__all__ = ["AGENTS", "FAULTY", "FaultyAgent", "ReferenceAgent", "Result", "ToolRefused"]

AGENTS: dict[str, type[ReferenceAgent]] = {ReferenceAgent.name: ReferenceAgent, **{a.name: a for a in FAULTY}}
"""Every scripted agent by name: 'reference' and one faulty agent per rule (the step order's included)."""
