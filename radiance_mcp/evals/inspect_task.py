"""Inspect AI: the scenarios as an Inspect task, the server as the agent's MCP tools, our scorer as Inspect's.

    inspect eval evals/inspect_tasks.py --model openai/gpt-4o [-T scenario=NAME] [-T skills=false]

One sample per scenario (its id is the scenario's name; ``-T scenario=NAME`` keeps one).
Per sample, the solver starts the scenario's simulated fleet, runs ``radiance-mcp serve
--config <fleet> --record <file>`` as a stdio MCP server (Inspect's ``mcp_server_stdio``) and
hands its tools to Inspect's ``react()`` agent, the question as the input; the fleet and the
server live exactly as long as the sample's agent. The scorer is ``radiance_mcp.evals.score``:
the record and the submitted answer in, facts found and rules kept out.

Where the record comes from: the server's own ``--record`` file, the same record any other
MCP client's session gives the scorer, with the server's view of each call (its arguments
as it read them, the structured result, the refusal and the rule it names). Inspect checks
each call against the tool's input schema before it sends it, and answers a call that fails
(an unknown argument such as ``reserve`` for ``reserves``, a wrong type) itself: such a call
never reaches the server. ``merge_record`` puts those calls, read off Inspect's messages,
into the record as refusals, at their place among the calls that did reach the server; an
unknown argument name is scored under ``argument_names`` as the server would tag it. The
merged record is kept in the sample's store, so ``inspect score`` re-scores a log alone.
"""

from __future__ import annotations

import math
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.agent import as_solver, react
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageTool
from inspect_ai.scorer import Score, Scorer, Target, accuracy, mean, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import mcp_server_stdio, mcp_tools

from radiance_mcp.errors import EvalError
from radiance_mcp.evals.fleet import scenario_fleet
from radiance_mcp.evals.record import RECORD_VERSION, Event, read_record
from radiance_mcp.evals.rules import BY_NAME
from radiance_mcp.evals.scenario import Scenario, load_scenarios
from radiance_mcp.evals.score import Report, render_table, score
from radiance_mcp.skills import SKILLS_DIR, parse

STORE_RECORD = "radiance_mcp_record"
"""The sample store's key for the merged record (a list of events as JSON objects)."""
MESSAGE_LIMIT = 120
"""Messages per sample before Inspect stops the agent (about 55 tool calls); the sample is still scored."""
SERVER_NAME = "radiance"
SUBMIT_TOOL = "submit"
"""react()'s tool for the final answer: Inspect's own, never sent to the server."""
_UNKNOWN_ARGUMENT = re.compile(r"Additional properties are not allowed")
"""jsonschema's words, in Inspect's parsing error, for an argument the tool's schema does not have."""


def samples(scenarios: Sequence[Scenario]) -> list[Sample]:
    """One sample per scenario: the question as input; the scenario itself in the metadata."""
    return [
        Sample(
            id=s.name,
            input=s.question,
            target=[f.name for f in s.facts],
            metadata={"scenario": s.model_dump(mode="json"), "procedure": s.procedure},
        )
        for s in scenarios
    ]


def _instructions(scenario: Scenario, skills: bool) -> str:
    head = (
        "You operate radiance inference endpoints through the tools of the radiance MCP server. "
        "Answer the question with the figures the tools give you, and submit the answer with its figures."
    )
    if not skills:
        return head
    path = SKILLS_DIR / scenario.procedure / "SKILL.md"
    skill = parse(path.read_text(encoding="utf-8"), scenario.procedure, ())
    return f"{head}\n\nThe procedure to follow ({skill.name}):\n\n{skill.body}"


@solver
def radiance_agent(skills: bool = True) -> Solver:
    """Per sample: the scenario's fleet, the server on it with --record, react() with its tools."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        scenario = Scenario.model_validate(state.metadata["scenario"])
        with tempfile.TemporaryDirectory(prefix="radiance-inspect-") as tmp:
            record_path = Path(tmp) / "record.jsonl"
            async with scenario_fleet(scenario) as config_path:
                server = mcp_server_stdio(
                    name=SERVER_NAME,
                    command=sys.executable,
                    args=["-m", "radiance_mcp", "serve", "--config", str(config_path), "--record", str(record_path)],
                )
                agent = react(prompt=_instructions(scenario, skills), tools=[mcp_tools(server)])
                try:
                    state = await as_solver(agent)(state, generate)
                finally:
                    # A run stopped by a limit is scored too: keep what it did.
                    events = read_record(record_path) if record_path.exists() else []
                    merged = merge_record(events, state.messages)
                    state.store.set(STORE_RECORD, [e.model_dump(mode="json", exclude_none=True) for e in merged])
        return state

    return solve


def merge_record(events: Sequence[Event], messages: Sequence[ChatMessage]) -> list[Event]:
    """The server's record plus the calls Inspect refused before they reached it, in the agent's order.

    Walks the agent's turns (assistant messages) in order. A call Inspect answered with a
    parsing error becomes a refused ``tool_call`` event; the turn's other calls (react's
    ``submit`` aside) take the server's next events, in the order the server saw them (a
    turn's parallel calls may arrive in any order). ``seq`` is renumbered over the merged
    record, so the scorer's evidence points at one list.
    """
    served = [e for e in events if e.kind == "tool_call"]
    refusals = {m.tool_call_id: m.error for m in messages if isinstance(m, ChatMessageTool) and m.error is not None}
    merged: list[Event] = [e for e in events if e.kind == "session"]
    taken = 0
    for message in messages:
        if not isinstance(message, ChatMessageAssistant):
            continue
        sent = 0
        for call in message.tool_calls or ():
            error = refusals.get(call.id)
            if error is not None and error.type == "parsing":
                merged.append(_inspect_refusal(call.function, call.arguments, error.message))
            elif call.function != SUBMIT_TOOL:
                sent += 1
        merged.extend(served[taken:taken + sent])
        taken += sent
    merged.extend(served[taken:])  # calls no message shows (none expected): kept, never dropped
    merged.extend(e for e in events if e.kind not in ("session", "tool_call"))
    return [e.model_copy(update={"seq": n}) for n, e in enumerate(merged)]


def _inspect_refusal(tool: str, arguments: dict[str, Any], message: str) -> Event:
    rule = "argument_names" if _UNKNOWN_ARGUMENT.search(message) else None
    return Event(
        version=RECORD_VERSION,
        seq=0,
        time="",
        kind="tool_call",
        tool=tool,
        arguments=dict(arguments),
        ok=False,
        error=f"refused by Inspect before it reached the server: {message}",
        rule=rule,
    )


def report_of(state: TaskState) -> Report:
    """Our scorer's report on a sample: its scenario, its merged record, its submitted answer."""
    scenario = Scenario.model_validate(state.metadata["scenario"])
    events = [Event.model_validate(e) for e in state.store.get(STORE_RECORD, [])]
    return score(scenario, events, state.output.completion)


def score_of(report: Report) -> Score:
    """The report as an Inspect Score.

    value: ``passed`` (1 or 0), ``score`` (facts found and rules kept over all), ``facts`` and
    ``rules`` (the share found, kept), ``fact:NAME`` for each of the scenario's facts, and
    ``rule:NAME`` for every rule there is: 1 kept, 0 broken, NaN where the run was not judged
    on it (Inspect leaves NaN out of a metric), so one set of keys serves every scenario.
    """
    facts = {f"fact:{f.name}": float(f.found) for f in report.facts}
    judged = {r.name: float(r.kept) for r in report.rules}
    rules = {f"rule:{name}": judged.get(name, math.nan) for name in BY_NAME}
    value: dict[str, float] = {
        "passed": float(report.passed),
        "score": report.score,
        "facts": sum(f.found for f in report.facts) / len(report.facts) if report.facts else 1.0,
        "rules": sum(r.kept for r in report.rules) / len(report.rules) if report.rules else 1.0,
        **facts,
        **rules,
    }
    return Score(value=value, explanation=render_table([report]), metadata=report.to_json())


@scorer(metrics={"passed": [accuracy(), stderr()], "score": [mean()], "facts": [mean()], "rules": [mean()],
                 "rule:*": [mean()]})
def radiance_scorer() -> Scorer:
    """Our scorer (radiance_mcp.evals.score) on the sample's record and submitted answer."""

    async def run(state: TaskState, target: Target) -> Score:
        report = report_of(state)
        result = score_of(report)
        result.answer = state.output.completion
        return result

    return run


def radiance_task(
    scenario: str | None = None, scenarios_dir: str | None = None, skills: bool = True,
    message_limit: int = MESSAGE_LIMIT,
) -> Task:
    """The task over the scenarios of scenarios_dir (default: the shipped ones), or the one named."""
    scenarios = load_scenarios(scenarios_dir)
    if scenario is not None:
        scenarios = [s for s in scenarios if s.name == scenario]
        if not scenarios:
            names = ", ".join(s.name for s in load_scenarios(scenarios_dir))
            raise EvalError(f"-T scenario={scenario}: no such scenario; the scenarios: {names}")
    return Task(
        dataset=samples(scenarios),
        solver=radiance_agent(skills=skills),
        scorer=radiance_scorer(),
        message_limit=message_limit,
    )


@task
def radiance(scenario: str | None = None, scenarios_dir: str | None = None, skills: bool = True) -> Task:
    """Every scenario (or ``-T scenario=NAME``), any model, scored by the procedures' facts and rules."""
    return radiance_task(scenario=scenario, scenarios_dir=scenarios_dir, skills=skills)
