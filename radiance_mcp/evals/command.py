"""``radiance-mcp eval``: run scenarios with a scripted agent, or score a given record and answer.

    radiance-mcp eval                                   # the reference agent on every scenario
    radiance-mcp eval --agent decode-8                  # a faulty agent, where its rule is listed
    radiance-mcp eval --agent all                       # the reference and every faulty agent
    radiance-mcp eval --agent all --split held-out      # only the scenarios the agents were not written against
    radiance-mcp eval --scenario NAME --record FILE --answer FILE   # score any agent's run
    radiance-mcp eval --calibrate [DIR]                 # the scorer against the labelled runs

Exit status: 0 when the run came out as expected: the reference agent, or a scored record,
passes every scenario (every fact found, no rule broken); a faulty agent is caught by its own
rule and by no other (so 0 means the suite caught it). 3 when not; 1 on an error (a record
that cannot be read, an unknown scenario); 2 on a usage error. ``--calibrate``: 0 when the
scorer disagrees with the labels on at most 5 % of the runs and fails no correct run, else 3.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.scenario import Scenario, load_scenario, load_scenarios
from radiance_mcp.evals.score import Report, render_table
from radiance_mcp.evals.versions import versions, versions_line

FAILED = 3


def _scenarios(args: argparse.Namespace) -> list[Scenario]:
    everything = load_scenarios(args.scenarios_dir, getattr(args, "split", None))
    if not args.scenario:
        return everything
    by_name = {s.name: s for s in everything}
    chosen = []
    for name in args.scenario:
        if name.endswith(".toml"):
            chosen.append(load_scenario(name))
        elif name in by_name:
            chosen.append(by_name[name])
        else:
            raise EvalError(f"--scenario {name!r}: no such scenario; the scenarios: {', '.join(by_name)}")
    return chosen


def main(args: argparse.Namespace) -> int:
    # The server built in this process (to run agents, or to replay a record's calls) would set the root logger
    # to INFO (the SDK's basicConfig), and every probe request and refused call would be logged to stderr under
    # the table; warnings only.
    logging.basicConfig(level=logging.WARNING, format="radiance-mcp eval: %(name)s: %(message)s")
    if args.list:
        return _list(args)
    if args.calibrate is not None:
        return _calibrate(args)
    if (args.record is None) != (args.answer is None):
        raise EvalError("--record and --answer go together: the record of the run and the agent's final answer")
    scenarios = _scenarios(args)
    named = versions(args.scenarios_dir, [n for n in args.scenario or () if n.endswith(".toml")])
    if args.record is not None:
        if len(scenarios) != 1 or not args.scenario:
            raise EvalError("--record scores one run: name its scenario with one --scenario")
        return _print_reports("record", [_score_files(scenarios[0], args.record, args.answer)], args.json, named,
                              _columns(args))
    from radiance_mcp.evals import run  # the server, the simulator and the MCP client, only to run agents

    names = ["reference", *run.faulty_names()] if args.agent == "all" else [args.agent]
    for name in names:
        run.agent_class(name)
    results = {name: asyncio.run(_run(name, run.scenarios_for(name, scenarios))) for name in names}
    if len(names) == 1:
        name = names[0]
        runs = results[name]
        if not runs:
            raise EvalError(f"--agent {name}: none of the scenarios chosen lists its rule {run.breaks(name)!r}")
        if args.json:
            print(json.dumps({**run.report_json(name, runs), **named}, indent=2))
        else:
            print(render_table([r.report for r in runs], _columns(args)))
            print(_verdict(name, [r.report for r in runs], run))
            print(versions_line(named))
        return 0 if run.expected(name, [r.report for r in runs]) else FAILED
    ok = True
    rows: list[dict[str, Any]] = []
    for name, runs in results.items():
        reports = [r.report for r in runs]
        expected = run.expected(name, reports) if reports else None  # None: no scenario chosen lists its rule
        ok &= expected is not False
        rows.append({"agent": name, "breaks": run.breaks(name), "expected": expected, "scenarios": len(reports),
                     "caught_on": [r.scenario for r in reports if r.broken],
                     "broken": sorted({b for r in reports for b in r.broken}),
                     "facts_missed": sum(not f.found for r in reports for f in r.facts)})
    if args.json:
        print(json.dumps({"expected": ok, "agents": rows, **named}, indent=2))
    else:
        print(_matrix(rows))
        print(versions_line(named))
    return 0 if ok else FAILED


async def _run(name: str, scenarios: list[Scenario]) -> list[Any]:
    from radiance_mcp.evals.run import run_agent

    return [await run_agent(scenario, name) for scenario in scenarios]


def _score_files(scenario: Scenario, record: Path, answer: Path) -> Report:
    """The record and answer scored, the record bound (evals.binding) by the nonce the harness gave in
    record.NONCE_ENV, if any, and the request log beside the record, if any."""
    from radiance_mcp.evals.binding import bind, read_requests, requests_path
    from radiance_mcp.evals.fleet import SERVICE_NAMES
    from radiance_mcp.evals.record import NONCE_ENV, check_run, read_record
    from radiance_mcp.evals.score import MAX_ANSWER_BYTES, score

    notes: list[str] = []
    cut: list[int] = []
    events = read_record(record, notes, cut)
    try:
        with answer.open("rb") as file:
            raw = file.read(MAX_ANSWER_BYTES + 1)
    except OSError as exc:
        raise EvalError(f"--answer {answer}: cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_ANSWER_BYTES:
        raise EvalError(f"--answer {answer}: larger than {MAX_ANSWER_BYTES:,} bytes; an agent's final answer is a "
                        "few KiB of text: pass the answer alone, not a transcript or a log")
    check_run(events, record)  # the record read, the answer taken: then whether the record is one run's
    for note in notes:  # what the record lost or cut: the score stands on the rest, and says so
        print(f"radiance-mcp eval: {note}", file=sys.stderr)
    binding = asyncio.run(bind(scenario, events, nonce=os.environ.get(NONCE_ENV) or None,
                               requests=read_requests(requests_path(record)), cut=len(cut)))
    return score(scenario, events, raw.decode("utf-8", errors="replace"), SERVICE_NAMES, binding)


def _columns(args: argparse.Namespace) -> int:
    """The width the CLI hands over (app.tables.width(): the evals import no app code); 120 when called directly."""
    return int(getattr(args, "columns", 120))


def _print_reports(name: str, reports: list[Report], as_json: bool, named: dict[str, str | int],
                   columns: int) -> int:
    if as_json:
        print(json.dumps({"agent": name, "passed": all(r.passed for r in reports),
                          "reports": [r.to_json() for r in reports], **named}, indent=2))
    else:
        print(render_table(reports, columns))
        print(versions_line(named))
    return 0 if all(r.passed for r in reports) else FAILED


def _verdict(name: str, reports: list[Report], run: Any) -> str:
    rule = run.breaks(name)
    broken = sorted({b for r in reports for b in r.broken})
    if rule is None:
        passed = sum(r.passed for r in reports)
        return f"\n{name}: {passed}/{len(reports)} scenarios passed"
    caught = [r.scenario for r in reports if rule in r.broken]
    others = [b for b in broken if b != rule]
    return (f"\n{name} breaks {rule}: caught on {len(caught)}/{len(reports)} scenario(s)"
            + (f"; also broke {', '.join(others)}" if others else "; no other rule broken"))


def _matrix(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'agent':<22} {'breaks':<22} {'broken runs':>11}  {'rules broken':<40} result"]
    for row in rows:
        caught = f"{len(row['caught_on'])}/{row['scenarios']}"
        broken = ", ".join(row["broken"]) or "none"
        result = {True: "as expected", False: "UNEXPECTED", None: "not run: no scenario chosen lists its rule"}
        lines.append(f"{row['agent']:<22} {row['breaks'] or '-':<22} {caught:>11}  {broken:<40} "
                     f"{result[row['expected']]}")
    return "\n".join(lines)


def _calibrate(args: argparse.Namespace) -> int:
    from radiance_mcp.evals.calibrate import bindings, calibrate, load_set, render
    from radiance_mcp.evals.fleet import SERVICE_NAMES

    runs = load_set(None if args.calibrate is True else args.calibrate)
    scenarios = {s.name: s for s in load_scenarios(args.scenarios_dir)}
    result = calibrate(runs, scenarios, SERVICE_NAMES, asyncio.run(bindings(runs, scenarios)))
    named = versions(args.scenarios_dir)
    print(json.dumps({**result.to_json(), **named}, indent=2) if args.json else render(result) + "\n"
          + versions_line(named))
    return 0 if result.calibrated else FAILED


def _list(args: argparse.Namespace) -> int:
    from radiance_mcp.evals.agents import AGENTS
    from radiance_mcp.evals.rules import RULES

    columns = _columns(args)

    def row(lead: str, text: str) -> None:  # text wrapped under itself, within the columns
        print("\n".join(textwrap.wrap(text, columns, initial_indent=lead, subsequent_indent=" " * len(lead),
                                       break_on_hyphens=False)))

    print("scenarios:")
    for scenario in load_scenarios(args.scenarios_dir, getattr(args, "split", None)):
        row(f"  {scenario.name:<32} {scenario.procedure:<34} {scenario.split:<9} ",
            f"rules: {', '.join(scenario.rules)}")
    print("agents:")
    for name, cls in AGENTS.items():
        row(f"  {name:<22} {cls.breaks or '-':<22} ", cls.fault)
    print("rules:")
    for rule in RULES:
        row(f"  {rule.name:<22} ", rule.statement)
    return 0
