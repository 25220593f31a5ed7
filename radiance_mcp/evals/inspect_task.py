"""Inspect AI: the scenarios as an Inspect task, the server as the agent's MCP tools, our scorer as Inspect's.

    inspect eval evals/inspect_tasks.py --model PROVIDER/MODEL [-T scenario=NAME] [-T skills=false]
        [-T epochs=N] [-T reducer=mean,pass_at_N,pass_k_N] [-T time_limit=SECONDS] [-T message_limit=N]

``radiance_task()`` builds the task (evals/inspect_tasks.py names it for ``inspect eval``).
One sample per scenario (its id is the scenario's name; ``-T scenario=NAME`` keeps one), run
``EPOCHS`` times (``-T epochs=N``), the epochs reduced per scenario by ``reducers(N)``: the mean
(the chance one run passes), ``pass_at_N`` (that at least one of N passes) and ``pass_k_N``
(that all N pass: how reliably the model does the procedure); the metrics give each with its
standard error over the scenarios. A sample stops after ``MESSAGE_LIMIT`` messages or
``TIME_LIMIT`` seconds, whichever comes first, and is scored on what it did. The task's metadata
and every sample's score metadata name the scorer's version and the scenario set's version
(radiance_mcp.evals.versions), as ``radiance-mcp eval``'s reports do.
Per sample, the solver starts the scenario's simulated fleet, runs ``radiance-mcp serve
--config <fleet> --record <file>`` as a stdio MCP server (Inspect's ``mcp_server_stdio``) and
hands its tools to Inspect's ``react()`` agent, the question as the input; the fleet and the
server live exactly as long as the sample's agent. The server records, so it offers submit_answer
(models.answer): the agent is told to submit its answer through it as data, then in words
through react()'s submit. The scorer is ``radiance_mcp.evals.score``: the record (whose last
submit_answer call is the answer judged) and the submitted text in, facts found and rules kept out.

Where the record comes from: the server's own ``--record`` file, the same record any other
MCP client's session gives the scorer, with the server's view of each call (its arguments
as it read them, the structured result, the refusal and the rule it names). Inspect checks
each call against the tool's input schema before it sends it, and answers a call that fails
(an unknown argument such as ``reserve`` for ``reserves``, a wrong type) itself: such a call
never reaches the server. ``merge_record`` puts those calls, read off Inspect's messages,
into the record as refusals, at their place among the calls that did reach the server; an
unknown argument name is scored under ``argument_names`` as the server would tag it. The
merged record is kept in the sample's store, so ``inspect score`` re-scores a log alone. The solver
is the harness of evals.binding: it gives the server a nonce (record.NONCE_ENV). When the server's
record chains under it, the harness countersigns the merged record (its own refusals chained in),
then binds that to the nonce, the fleet and the requests its endpoints served while the fleet
still runs; the checks and the nonce are kept in the store beside the record and scored with it.
"""

from __future__ import annotations

import asyncio
import math
import re
import secrets
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from inspect_ai import Epochs, Task
from inspect_ai.agent import as_solver, react
from inspect_ai.dataset import Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ContentText,
    Model,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.scorer import Metric, Score, Scorer, Target, accuracy, mean, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import mcp_server_stdio, mcp_tools
from mcp import Client
from mcp.types import CallToolResult, TextContent

from radiance_mcp.app.skills import SKILLS_DIR, parse
from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.agents import AGENTS
from radiance_mcp.evals.binding import bind, nonce_check, served
from radiance_mcp.evals.fleet import SERVICE_NAMES, fingerprint, running_fleet
from radiance_mcp.evals.record import NONCE_ENV, RECORD_VERSION, Binding, Event, read_record, sign
from radiance_mcp.evals.rules import BY_NAME
from radiance_mcp.evals.scenario import Fact, Scenario, load_scenarios
from radiance_mcp.evals.score import Report, render_table, score
from radiance_mcp.evals.versions import versions, versions_line
from radiance_mcp.sources.config import load

STORE_BINDING = "radiance_mcp_binding"
"""The sample store's key for the server's record's binding checks (evals.binding), made while its fleet ran."""
STORE_RECORD = "radiance_mcp_record"
"""The sample store's key for the merged record (a list of events as JSON objects), bound to the nonce."""
STORE_NONCE = "radiance_mcp_nonce"
"""The sample store's key for the nonce the harness gave the server: ``radiance-mcp eval --record`` binds the
stored record by it when given in record.NONCE_ENV (it is never shown to the agent; it guards the run, not the
log)."""
MESSAGE_LIMIT = 120
"""Messages per sample before Inspect stops the agent (about 55 tool calls); the sample is still scored."""
TIME_LIMIT = 900
"""Seconds of clock time per sample (the fleet, the server and the agent) before Inspect stops it: 55 tool calls
at about 15 s a model turn; the reference agent takes about a second. The sample is still scored."""
EPOCHS = 3
"""Runs of each scenario: more than one, so the reducers say how reliably a model does the procedure."""
SERVER_NAME = "radiance"
SUBMIT_TOOL = "submit"
"""react()'s tool for the final answer: Inspect's own, never sent to the server."""
_REDUCER_K = re.compile(r"(?:pass_at|pass_k|at_least)_(\d+)")
"""Inspect's reducers of k epochs, by name."""
_UNKNOWN_ARGUMENT = re.compile(r"Additional properties are not allowed")
"""jsonschema's words, in Inspect's parsing error, for an argument the tool's schema does not have."""


def samples(scenarios: Sequence[Scenario]) -> list[Sample]:
    """One sample per scenario: the question as input; the scenario itself in the metadata."""
    return [
        Sample(
            id=s.name,
            input=s.question,
            target=[_expected(f) for f in s.facts],
            metadata={"scenario": s.model_dump(mode="json"), "procedure": s.procedure},
        )
        for s in scenarios
    ]


def _expected(fact: Fact) -> str:
    """A fact as Inspect's viewer shows the target: ``ceiling_mib: 30969 +- 1`` or its phrases."""
    if fact.value is not None:
        return f"{fact.name}: {fact.value:g} +- {fact.tolerance:g}"
    return f"{fact.name}: " + " | ".join(fact.any_of)


def _instructions(scenario: Scenario, skills: bool) -> str:
    head = (
        "You operate radiance inference endpoints through the tools of the radiance MCP server. "
        "Answer the question with the figures the tools give you. When you have the answer, call submit_answer "
        "with it as data (the service, each figure with its unit, the verdict, the plan if the question asks for "
        "one, and the answer in words as text), then submit the same answer in words."
    )
    if not skills:
        return head
    path = SKILLS_DIR / scenario.procedure / "SKILL.md"
    skill = parse(path.read_text(encoding="utf-8"), scenario.procedure, ())
    return f"{head}\n\nThe procedure to follow ({skill.name}):\n\n{skill.body}"


@solver
def radiance_agent(skills: bool = True, agent: str | None = None) -> Solver:
    """Per sample: the scenario's fleet, the server on it with --record, react() with its tools.

    agent names a scripted agent (radiance_mcp.evals.agents) to play the model instead of the
    eval's own: ``-T agent=reference`` runs with no model service at all.
    """
    if agent is not None and agent not in AGENTS:
        raise EvalError(f"-T agent={agent}: no such scripted agent; the agents: {', '.join(AGENTS)}")

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        scenario = Scenario.model_validate(state.metadata["scenario"])
        nonce = secrets.token_hex(16)  # the harness's: given to the server, kept to bind its record (evals.binding)
        with tempfile.TemporaryDirectory(prefix="radiance-inspect-") as tmp:
            record_path = Path(tmp) / "record.jsonl"
            async with running_fleet(scenario) as fleet:
                config_path, expected = fleet.config_path, fingerprint(load(fleet.config_path))
                server = mcp_server_stdio(
                    name=SERVER_NAME,
                    command=sys.executable,
                    args=["-m", "radiance_mcp", "serve", "--config", str(config_path), "--record", str(record_path)],
                    env={NONCE_ENV: nonce},
                )
                model = None if agent is None else scripted_model(
                    lambda client: AGENTS[agent](client, scenario).run())
                react_agent = react(prompt=_instructions(scenario, skills), tools=[mcp_tools(server)], model=model)
                try:
                    state = await as_solver(react_agent)(state, generate)
                finally:
                    # A run stopped by a limit is scored too: keep what it did.
                    events = read_record(record_path) if record_path.exists() else []
                    merged = countersign(events, merge_record(events, state.messages), nonce)
                    state.store.set(STORE_RECORD, [e.model_dump(mode="json", exclude_none=True) for e in merged])
                    state.store.set(STORE_NONCE, nonce)
                    bound = await bind(scenario, merged, nonce=nonce, requests=served(fleet), fleet=fleet,
                                       expected_fleet=expected)
                    state.store.set(STORE_BINDING, bound.model_dump(mode="json"))
        return state

    return solve


def countersign(events: Sequence[Event], merged: Sequence[Event], nonce: str) -> list[Event]:
    """The merged record bound to the harness's nonce, if the server's record (events) was: the harness holds the
    nonce, so it chains the calls Inspect refused in with the server's lines. A record the server did not write
    whole under the nonce is never signed: it is kept as merged and fails the nonce check as it is."""
    if nonce_check(events, nonce).status != "passed":
        return list(merged)
    lines = sign([e.model_dump(mode="json", exclude_none=True) for e in merged], nonce)
    return [Event.model_validate(line) for line in lines]


def merge_record(events: Sequence[Event], messages: Sequence[ChatMessage]) -> list[Event]:
    """The server's record plus the calls Inspect refused before they reached it, in the agent's order.

    Walks the agent's turns (assistant messages) in order. A call Inspect answered with a
    parsing error becomes a refused ``tool_call`` event; the turn's other calls (react's
    ``submit`` aside) take the server's next events, in the order the server saw them (a
    turn's parallel calls may arrive in any order). ``seq`` is renumbered over the merged
    record, so the scorer's evidence points at one list. A refusal of Inspect's carries the
    record's session and, as Inspect's messages hold no time, the time of the event before it:
    the merged record is one run's record as ``radiance-mcp eval --record`` reads it.
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
                merged.append(_inspect_refusal(call.function, call.arguments, error.message, merged[-1:]))
            elif call.function != SUBMIT_TOOL:
                sent += 1
        merged.extend(served[taken:taken + sent])
        taken += sent
    merged.extend(served[taken:])  # calls no message shows (none expected): kept, never dropped
    merged.extend(e for e in events if e.kind not in ("session", "tool_call"))
    return [e.model_copy(update={"seq": n}) for n, e in enumerate(merged)]


def _inspect_refusal(tool: str, arguments: dict[str, Any], message: str, before: Sequence[Event]) -> Event:
    rule = "argument_names" if _UNKNOWN_ARGUMENT.search(message) else None
    return Event(
        version=RECORD_VERSION,
        session=before[-1].session if before else None,
        seq=0,
        time=before[-1].time if before else datetime.now(UTC).isoformat(timespec="milliseconds"),
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
    stored: list[dict[str, Any]] = state.store.get(STORE_RECORD, [])
    events = [Event.model_validate(e) for e in stored]
    bound = state.store.get(STORE_BINDING)
    return score(scenario, events, state.output.completion, SERVICE_NAMES,
                 Binding.model_validate(bound) if bound else None)


def reducers(epochs: int) -> list[str]:
    """The reducers of N epochs: the mean, pass_at_N (at least one of N passed), pass_k_N (all N passed)."""
    return ["mean", f"pass_at_{epochs}", f"pass_k_{epochs}"]


def _check_epochs(epochs: int, reducer: Sequence[str]) -> None:
    """EvalError unless there is an epoch, and as many as each of the reducers' k (pass_k_3 needs 3)."""
    if epochs < 1:
        raise EvalError(f"-T epochs={epochs}: a scenario runs at least once; give 1 or more (default {EPOCHS})")
    for name in reducer:
        k = _REDUCER_K.fullmatch(name)
        if k and int(k[1]) > epochs:
            raise EvalError(f"-T reducer={name}: needs {k[1]} epochs; -T epochs={epochs} gives {epochs}: raise "
                            f"epochs, or take {name.rsplit('_', 1)[0]}_{epochs}")


def score_of(report: Report, named: dict[str, str | int] | None = None) -> Score:
    """The report as an Inspect Score.

    value: ``passed`` (1 or 0), ``score`` (facts found and rules kept over all), ``facts`` and
    ``rules`` (the share found, kept of those judged), ``fact:NAME`` for each of the scenario's facts, and
    ``rule:NAME`` for every rule there is: 1 kept, 0 broken, NaN where the run was not judged
    on it (Inspect leaves NaN out of a metric), so one set of keys serves every scenario. The metadata is the
    report's JSON, with the scorer's and the scenario set's versions (named, default: the shipped scenarios').
    """
    facts = {f"fact:{f.name}": float(f.found) for f in report.facts}
    judged = {r.name: float(r.kept) for r in report.rules if r.judged}
    rules = {f"rule:{name}": judged.get(name, math.nan) for name in BY_NAME}
    value: dict[str, float] = {
        "passed": float(report.passed),
        "score": report.score,
        "facts": sum(f.found for f in report.facts) / len(report.facts) if report.facts else 1.0,
        "rules": sum(judged.values()) / len(judged) if judged else 1.0,
        **facts,
        **rules,
    }
    return Score(value=value, explanation=render_table([report]),
                 metadata={**report.to_json(), **(named if named is not None else versions())})


def metrics(scenarios: Sequence[Scenario]) -> dict[str, list[Metric]]:
    """The task's metrics: the pass rate, the mean score, facts and rules, each with its standard error over the
    scenarios, and the share kept of each rule its scenarios list."""
    listed = [name for name in BY_NAME if any(name in s.rules for s in scenarios)]
    return {"passed": [accuracy(), stderr()], "score": [mean(), stderr()], "facts": [mean(), stderr()],
            "rules": [mean(), stderr()], **{f"rule:{name}": [mean()] for name in listed}}


@scorer(metrics=metrics([]))
def radiance_scorer(scenarios_dir: str | None = None) -> Scorer:
    """Our scorer (radiance_mcp.evals.score) on the sample's record and submitted answer; its score names the
    scorer's version and that of the scenario set of scenarios_dir (default: the shipped one)."""
    named = versions(scenarios_dir)

    async def run(state: TaskState, target: Target) -> Score:
        report = report_of(state)
        result = score_of(report, named)
        result.answer = state.output.completion
        return result

    return run


def radiance_task(
    scenario: str | None = None, scenarios_dir: str | None = None, skills: bool = True,
    agent: str | None = None, message_limit: int = MESSAGE_LIMIT, time_limit: int = TIME_LIMIT,
    epochs: int = EPOCHS, reducer: str | Sequence[str] | None = None,
) -> Task:
    """The task over the scenarios of scenarios_dir (default: the shipped ones), or the one named;
    agent: a scripted agent plays the model (see radiance_agent); each scenario run epochs times, reduced by
    reducer (Inspect's names; default: ``reducers(epochs)``)."""
    reducer = reducers(epochs) if reducer is None else [reducer] if isinstance(reducer, str) else list(reducer)
    _check_epochs(epochs, reducer)
    scenarios = load_scenarios(scenarios_dir)
    if scenario is not None:
        scenarios = [s for s in scenarios if s.name == scenario]
        if not scenarios:
            names = ", ".join(s.name for s in load_scenarios(scenarios_dir))
            raise EvalError(f"-T scenario={scenario}: no such scenario; the scenarios: {names}")
    named = versions(scenarios_dir)
    return Task(
        dataset=samples(scenarios),
        solver=radiance_agent(skills=skills, agent=agent),
        scorer=radiance_scorer(scenarios_dir),
        metrics=metrics(scenarios),
        epochs=Epochs(epochs, reducer=reducer),
        message_limit=message_limit,
        time_limit=time_limit,
        version=versions_line(named),
        metadata=dict(named),
    )


# ---------------------------------------------------------------------------------------
# A scripted agent as Inspect's model (the suite's own check of the task, no network)


class _InspectClient:
    """What a scripted agent calls tools through (``call_tool``, as on the SDK's Client), played as a model.

    Each call the agent makes becomes the model's next output (a tool call); Inspect runs it
    through react() and the server, and the tool message it adds is handed back to the agent
    as a CallToolResult (the text content; an error as is_error). The agent's answer becomes
    the call of react()'s submit tool. A generate on messages with no model turn yet is a run's
    first (a sample's, an epoch's): the agent plays again from the start, so one model serves
    every epoch of a sample run one at a time, a run stopped by a limit included.
    """

    def __init__(self, play: Callable[[Client], Awaitable[str]]) -> None:
        self._play = play
        self._turns: asyncio.Queue[ModelOutput | Exception] = asyncio.Queue()
        self._waiting: tuple[str, asyncio.Future[CallToolResult]] | None = None
        self._agent: asyncio.Task[None] | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        answered: asyncio.Future[CallToolResult] = asyncio.get_running_loop().create_future()
        self._waiting = (call_id, answered)
        await self._turns.put(_output(ModelOutput.for_tool_call(
            "mockllm/model", name, dict(arguments or {}), tool_call_id=call_id, content="")))
        return await answered

    async def _run(self) -> None:
        try:
            answer = await self._play(cast(Client, self))
        except Exception as exc:  # handed to the generate that waits, so the sample shows it
            await self._turns.put(exc)
            return
        submit = ModelOutput.for_tool_call("mockllm/model", SUBMIT_TOOL, {"answer": answer}, content="")
        await self._turns.put(_output(submit))

    async def generate(self, messages: list[ChatMessage], *_: Any) -> ModelOutput:
        """mockllm's custom_outputs: the agent's next call, once the last one's result is handed back."""
        waiting, self._waiting = self._waiting, None
        if not any(isinstance(m, ChatMessageAssistant) for m in messages):
            # A run's first turn (a sample's, an epoch's): the agent plays from the start, whatever the last run
            # left (one stopped by a limit leaves its agent waiting).
            if self._agent is not None:
                self._agent.cancel()
            self._turns = asyncio.Queue()
            self._agent = asyncio.create_task(self._run())
        elif waiting is not None:
            call_id, answered = waiting
            reply = next(m for m in reversed(messages) if isinstance(m, ChatMessageTool) and m.tool_call_id == call_id)
            answered.set_result(_call_tool_result(reply))
        turn = await self._turns.get()
        if isinstance(turn, Exception):
            raise turn
        return turn


def _call_tool_result(reply: ChatMessageTool) -> CallToolResult:
    """Inspect's tool message as the MCP result it came from: its text items in order (images left out)."""
    if reply.error is not None:
        return CallToolResult(content=[TextContent(type="text", text=reply.error.message)], is_error=True)
    items = [reply.content] if isinstance(reply.content, str) else [c.text for c in reply.content
                                                                    if isinstance(c, ContentText)]
    return CallToolResult(content=[TextContent(type="text", text=text) for text in items], is_error=False)


def _output(output: ModelOutput) -> ModelOutput:
    # Usage given, so mockllm does not count tokens (its tokenizer's data is a download).
    output.usage = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)
    return output


def scripted_model(play: Callable[[Client], Awaitable[str]]) -> Model:
    """Inspect's mock model playing a scripted agent: ``play(client)`` calls tools and returns the answer.

    One model per sample (``radiance_task(agent=...)`` makes one for each), or one sample, its
    epochs run one at a time (``eval(..., max_samples=1)``)::

        model = scripted_model(lambda client: AGENTS["reference"](client, scenario).run())
    """
    return get_model("mockllm/model", custom_outputs=_InspectClient(play).generate, memoize=False)
