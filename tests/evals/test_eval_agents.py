"""The suite's own tests: the reference agent passes every scenario, and each faulty agent is
caught by its own rule and no other, on at least three scenarios, through the SDK's MCP client on
the simulated fleet; the held-out split (scenarios the agents were not written against) holds them
to the same."""

from __future__ import annotations

import pytest

from radiance_mcp.evals.agents import FAULTY
from radiance_mcp.evals.rules import RULES, STEPS
from radiance_mcp.evals.run import run_agent, scenarios_for
from radiance_mcp.evals.scenario import load_scenarios

SCENARIOS = load_scenarios()
HELD_OUT = [s for s in SCENARIOS if s.split == "held-out"]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_the_reference_agent_scores_100_percent(scenario) -> None:
    run = await run_agent(scenario, "reference")
    missed = [f.name for f in run.report.facts if not f.found]
    assert run.report.passed and run.report.score == 1.0, (missed, run.report.broken, run.answer)
    assert {r.name for r in run.report.rules} == set(scenario.rules)  # every listed rule scored, none other
    assert all(r.judged for r in run.report.rules), [r.name for r in run.report.rules if not r.judged]


@pytest.mark.slow
@pytest.mark.parametrize("agent", FAULTY, ids=[a.name for a in FAULTY])
async def test_a_faulty_agent_is_caught_by_its_own_rule_and_no_other(agent) -> None:
    scenarios = scenarios_for(agent.name, SCENARIOS)
    assert scenarios, f"no scenario lists {agent.breaks}"
    reports = [(await run_agent(s, agent.name)).report for s in scenarios]
    broken = {name for report in reports for name in report.broken}
    assert broken == {agent.breaks}, [(r.scenario, r.broken) for r in reports]
    caught = [r for r in reports if agent.breaks in r.broken]
    assert len(caught) >= 3, f"{agent.name} is caught on {[r.scenario for r in caught]}: fewer than three scenarios"
    evidence = [e for r in caught for x in r.rules if x.name == agent.breaks for e in x.evidence]
    assert evidence and all(e.text for e in evidence)
    held_out = {s.name for s in HELD_OUT}
    if any(r.scenario in held_out for r in reports):  # the split the agent was not written against catches it too
        assert any(r.scenario in held_out for r in caught), [(r.scenario, r.broken) for r in reports]


def test_every_rule_has_a_faulty_agent_and_three_scenarios() -> None:
    names = [r.name for r in RULES] + list(STEPS)
    assert sorted(a.breaks for a in FAULTY) == sorted(names)  # the step order's rules too
    for name in names:
        listed = [s.name for s in SCENARIOS if name in s.rules]
        assert len(listed) >= 3, f"{name} is listed on {listed} only"
    assert len(SCENARIOS) >= 40
    assert {s.procedure for s in SCENARIOS} == {"radiance-kv-cache-resize", "radiance-step-shape-ledger-audit"}
