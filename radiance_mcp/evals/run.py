"""The edge: a scripted agent on a scenario, in one process, scored.

``run_agent(scenario, agent)`` starts the scenario's simulated fleet, builds the server with a
record (serve --record's writer), lets the agent work through the SDK's in-memory MCP client,
and scores the record and the answer: the same path a real agent's run takes, but in one
process. ``expected(agent, reports)`` says whether a run came out as it should: the reference
passes every scenario; a faulty agent is caught by its own rule and no other.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mcp import Client

from radiance_mcp import __version__
from radiance_mcp.app.server import build_server
from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.agents import AGENTS, FAULTY, ReferenceAgent
from radiance_mcp.evals.binding import bind, requests_path, served, write_requests
from radiance_mcp.evals.fleet import SERVICE_NAMES, fingerprint, running_fleet
from radiance_mcp.evals.record import Event, Recorder, read_record
from radiance_mcp.evals.scenario import Scenario
from radiance_mcp.evals.score import Report, score
from radiance_mcp.sim import SimFleet
from radiance_mcp.sources.config import load
from radiance_mcp.sources.runtime import Runtime


@dataclass(frozen=True)
class Run:
    agent: str
    answer: str
    events: tuple[Event, ...]
    report: Report


def agent_class(name: str) -> type[ReferenceAgent]:
    try:
        return AGENTS[name]
    except KeyError:
        raise EvalError(f"--agent {name!r}: no such scripted agent; the agents: {', '.join(AGENTS)}") from None


async def run_agent(scenario: Scenario, agent: str = "reference", record: Path | None = None) -> Run:
    """One scripted run, scored and bound: the harness draws the run's nonce and takes the fleet's fingerprint
    before the session, keeps the endpoints' request log beside the record (binding.requests_path), and checks
    the record by them (binding.bind). The record is kept at ``record`` when given (appended to)."""
    cls = agent_class(agent)
    nonce = secrets.token_hex(16)
    async with running_fleet(scenario) as fleet:
        path = record or fleet.root / "record.jsonl"
        expected = fingerprint(load(fleet.config_path))
        answer = await recorded_session(fleet, scenario, cls, path, nonce)
        write_requests(fleet, requests_path(path))
        cut: list[int] = []
        events = read_record(path, cut=cut)
        bound = await bind(scenario, events, nonce=nonce, requests=served(fleet), cut=len(cut), fleet=fleet,
                           expected_fleet=expected)
    return Run(agent, answer, tuple(events), score(scenario, events, answer, SERVICE_NAMES, bound))


async def recorded_session(fleet: SimFleet, scenario: Scenario, cls: type[ReferenceAgent], path: Path,
                           nonce: str | None = None) -> str:
    """One session of the agent on the running fleet, through the server with a record appended to path (bound to
    the fleet's fingerprint and the nonce, as serve --record with the harness's nonce); the agent's answer."""
    config = load(fleet.config_path)
    recorder = Recorder(path, __version__, fleet=fingerprint(config), nonce=nonce)
    try:
        server = build_server(Runtime(config), middleware=[recorder], submit_answer=True)
        async with Client(server) as client:
            return await cls(client, scenario).run()
    finally:
        recorder.close()


def breaks(agent: str) -> str | None:
    """The rule a faulty agent breaks (None: the reference)."""
    return agent_class(agent).breaks


def scenarios_for(agent: str, scenarios: Sequence[Scenario]) -> list[Scenario]:
    """A faulty agent runs where its rule is listed; the reference everywhere."""
    rule = breaks(agent)
    return [s for s in scenarios if rule is None or rule in s.rules]


def expected(agent: str, reports: Sequence[Report]) -> bool:
    """The reference passes everything; a faulty agent is caught by its rule, and by no other."""
    rule = breaks(agent)
    if rule is None:
        return all(r.passed for r in reports)
    broken = {name for r in reports for name in r.broken}
    return broken == {rule}


def faulty_names() -> list[str]:
    return [a.name for a in FAULTY]


def report_json(agent: str, runs: Sequence[Run]) -> dict[str, object]:
    reports = [r.report for r in runs]
    return {"agent": agent, "breaks": breaks(agent), "expected": expected(agent, reports),
            "reports": [{**r.report.to_json(), "answer": r.answer} for r in runs]}

