"""Scripted agents: the suite's own tests, driving the server through the SDK's MCP client.

``ReferenceAgent`` follows the skills (skills/*/SKILL.md) step by step and writes an answer
from the tools' results; it scores 100 % on every scenario. Each faulty agent is the
reference with one step done wrong, the way a careless agent does it, and is caught by its
own rule and no other (``FaultyAgent.breaks``); where the server refuses the wrong step, the
faulty agent works around the refusal, as an agent bent on an answer would.

    async with Client(server) as client:
        answer = await AGENTS["reference"](client, scenario).run()

An agent reads the scenario's ``agent`` plan (task, services, the reserve or text the
question mentions), never its facts: every figure it states comes from a tool result, or, for
a faulty agent, from the wrong place its fault names.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from mcp import Client

from radiance_mcp.errors import EvalError
from radiance_mcp.evals.scenario import Scenario

Result = dict[str, Any]


class ToolRefused(Exception):
    """A call the server answered with an error: the agent reads its text."""

    def __init__(self, tool: str, text: str) -> None:
        self.tool, self.text = tool, text
        super().__init__(f"{tool}: {text}")


class ReferenceAgent:
    """Follows the skills; every figure of its answer comes from a tool result."""

    name: ClassVar[str] = "reference"
    breaks: ClassVar[str | None] = None
    """The rule a faulty agent breaks (None: the reference)."""
    fault: ClassVar[str] = "follows the skills"

    def __init__(self, client: Client, scenario: Scenario) -> None:
        self.client, self.scenario, self.plan = client, scenario, scenario.agent
        self.lines: list[str] = []

    # -- plumbing ---------------------------------------------------------------------------

    async def call(self, tool: str, **arguments: Any) -> Result:
        """The tool's structured output; ToolRefused with the server's text on an error."""
        result = await self.client.call_tool(tool, arguments)
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            raise ToolRefused(tool, text)
        if result.structured_content is None:
            return dict(json.loads(getattr(result.content[0], "text", "{}")))
        return dict(result.structured_content)

    def say(self, text: str) -> None:
        self.lines.append(text)

    def need(self, value: str | None, what: str) -> str:
        if value is None:
            raise EvalError(f"scenario {self.scenario.name}: agent.{what} is needed for task {self.plan.task!r}")
        return value

    async def run(self) -> str:
        """Do the scenario's task; the final answer."""
        task = getattr(self, f"task_{self.plan.task}")
        await task()
        return "\n".join(self.lines)

    # -- the resize procedure ----------------------------------------------------------------

    async def task_ceiling(self) -> None:
        raise NotImplementedError  # filled in below in the next commit

    async def task_free_vram(self) -> None:
        raise NotImplementedError

    async def task_pool(self) -> None:
        raise NotImplementedError

    async def task_rate(self) -> None:
        raise NotImplementedError

    async def task_arms(self) -> None:
        raise NotImplementedError

    async def task_count(self) -> None:
        raise NotImplementedError

    async def task_boundary(self) -> None:
        raise NotImplementedError

    # -- the step-shape audit ---------------------------------------------------------------

    async def task_audit(self) -> None:
        raise NotImplementedError

    async def task_serve_script(self) -> None:
        raise NotImplementedError


class FaultyAgent(ReferenceAgent):
    """The reference with one step done wrong; ``breaks`` names the rule that catches it."""


AGENTS: dict[str, type[ReferenceAgent]] = {ReferenceAgent.name: ReferenceAgent}
"""Every scripted agent by name: 'reference' and one faulty agent per rule."""

