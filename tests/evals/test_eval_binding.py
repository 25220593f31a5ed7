"""Issue 27 item 2, bound: a record names its fleet and the harness's nonce, its ledger calls replay on the
scenario's fleet, its probe results match the requests the endpoints served, and a record that lost lines is
judged incomplete. Each case starts from a run the harness recorded and changes the one thing it is about."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_run import CliRunner

from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.binding import bind, read_requests, requests_path, served, write_requests
from radiance_mcp.evals.calibrate import CALIBRATION_DIR
from radiance_mcp.evals.fleet import SERVICE_NAMES, fingerprint, normal_text, running_fleet
from radiance_mcp.evals.record import (
    NONCE_ENV,
    RECORD_VERSION,
    Binding,
    Event,
    Recorder,
    chain_problem,
    read_record,
    read_run,
    sign,
)
from radiance_mcp.evals.run import recorded_session, run_agent
from radiance_mcp.evals.scenario import load_scenarios
from radiance_mcp.evals.score import render_table, score
from radiance_mcp.sources.config import load

SCENARIOS = {s.name: s for s in load_scenarios()}
NONCE = "5eed" * 8
Lines = list[dict[str, Any]]


def _status(binding: Binding) -> dict[str, str]:
    return {c.name: c.status for c in binding.checks}


def _text(binding: Binding, name: str) -> str:
    return next(c.text for c in binding.checks if c.name == name)


def _label(name: str) -> dict[str, Any]:
    return dict(json.loads((CALIBRATION_DIR / f"{name}.json").read_text(encoding="utf-8")))


async def _bound(name: str, edit: Callable[[Lines], Lines] | None = None, nonce: str | None = "label",
                 requests: list[dict[str, Any]] | None = None) -> tuple[Binding, list[Event], dict[str, Any]]:
    """A calibration run's record (edited), bound against its scenario's fleet by its label's nonce."""
    label = _label(name)
    path = CALIBRATION_DIR / f"{name}.jsonl"
    lines = [json.loads(raw) for raw in path.read_text(encoding="utf-8").splitlines()]
    events = [Event.model_validate(line) for line in (edit(lines) if edit else lines)]
    given = label["nonce"] if nonce == "label" else nonce
    logged = read_requests(requests_path(path)) if requests is None else requests
    binding = await bind(SCENARIOS[label["scenario"]], events, nonce=given, requests=logged)
    return binding, events, label


async def test_a_run_of_the_harness_is_bound_on_every_check() -> None:
    run = await run_agent(SCENARIOS["token-count-without-prefill"])
    session = run.events[0]
    assert session.version == RECORD_VERSION == 3 and session.bound is True and session.fleet
    assert {c.name: c.status for c in run.report.binding} == {
        "complete": "passed", "fleet": "passed", "nonce": "passed", "replay": "passed", "probes": "passed"}
    assert run.report.passed


async def test_the_fingerprint_names_the_fleet_not_the_directory_or_ports_it_ran_in(tmp_path: Path) -> None:
    prints = []
    for name in ("resize-to-the-ceiling", "resize-to-the-ceiling", "newest-boot-differs", "tp2-card-one-binds"):
        async with running_fleet(SCENARIOS[name]) as fleet:
            prints.append(fingerprint(load(fleet.config_path)))
    assert prints[0] == prints[1] and len(set(prints)) == 3
    assert normal_text("log /tmp/radiance-eval-x1/hosts/dankserver/frank.log at http://127.0.0.1:40123/v1") == (
        "log .../frank.log at http://127.0.0.1:PORT/v1")


async def test_the_session_line_says_a_record_made_outside_a_harness_is_unbound(tmp_path: Path) -> None:
    async with running_fleet(SCENARIOS["pool-below-contract"]) as fleet:
        answer = await recorded_session(fleet, SCENARIOS["pool-below-contract"], _agent("reference"),
                                        tmp_path / "r.jsonl")
        events = read_run(tmp_path / "r.jsonl")
        binding = await bind(SCENARIOS["pool-below-contract"], events, requests=served(fleet), fleet=fleet)
    assert events[0].bound is False and events[0].nonce is None and all(e.mac is None for e in events)
    assert _status(binding)["nonce"] == "not made"
    assert _text(binding, "nonce") == "the record is unbound (made outside a harness); no harness nonce to check it by"
    report = score(SCENARIOS["pool-below-contract"], events, answer, SERVICE_NAMES, binding)
    assert report.passed and "(binding not made: nonce)" in render_table([report])


def _agent(name: str) -> Any:
    from radiance_mcp.evals.agents import AGENTS

    return AGENTS[name]


def test_every_line_chains_under_the_nonce_and_an_edited_one_is_named(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "r.jsonl", "t", fleet="f" * 32, nonce=NONCE)
    recorder.write({"kind": "tool_call", "tool": "compute_ceiling", "arguments": {"service": "x"}, "ok": True}, 1)
    recorder.write({"kind": "tool_call", "tool": "check_pool_contract", "arguments": {}, "ok": True}, 2)
    recorder.close()
    events = read_record(tmp_path / "r.jsonl")
    assert chain_problem(events, NONCE) is None
    assert chain_problem(events, "0" * 32) is not None  # another nonce: not its record
    lines = [json.loads(raw) for raw in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert sign([{k: v for k, v in x.items() if k != "mac"} for x in lines], NONCE) == lines
    edited = [events[0], events[1].model_copy(update={"ok": False}), events[2]]
    assert chain_problem(edited, NONCE) == (
        "seq 1 (tool_call compute_ceiling) does not chain to the line above it: a line the server holding the "
        "harness's nonce did not write there (forged, edited, moved or copied)")
    assert chain_problem([events[0], events[2]], NONCE) is not None  # a line left out


@pytest.mark.parametrize(("name", "check", "found"), [
    ("forged-no-nonce", "nonce", "unbound: the harness gave the server a nonce, the record names none"),
    ("forged-wrong-nonce", "nonce", "a wrong nonce: the session line names "),
    ("downgraded-record", "nonce", "a record of version 2 where the harness gave its server a nonce: that server "
                                   "writes version 3, bound to it"),
    ("forged-contract-result", "nonce", "seq 2 (tool_call submit_answer) does not chain to the line above it"),
    ("other-fleet--free-vram", "fleet", "from another fleet: the session line's fingerprint is "
                                        "fafb8905d5a4ce0c18eb84189303f645, this scenario's fleet's is "),
    ("replay-mismatch--headroom", "replay", "seq 2 compute_ceiling: a result the tool would not have returned: "
                                            "result.headroom_mib is 2349, the tool returns 1849"),
    ("replay-mismatch--refused-made-ok", "replay", "seq 1 compute_ceiling: recorded answered, the tool refuses "
                                                   "these arguments"),
    ("probe-without-request", "probes", "seq 3 token_count_probe: no matching served request: the run's probes of "
                                        "frank-archon say they sent 2, its endpoint served 0"),
    ("forged-cold-probe", "probes", "seq 3 decode_probe: no matching served request"),
    ("lost-lines", "complete", "incomplete: 1 event(s) the server could not write (lost); seq 2 missing"),
])
async def test_a_record_not_bound_to_its_run_is_refused_naming_what_was_found(
        name: str, check: str, found: str) -> None:
    binding, events, label = await _bound(name)
    assert _status(binding)[check] == "failed" and found in _text(binding, check)
    report = score(SCENARIOS[label["scenario"]], events, label["answer"], SERVICE_NAMES, binding)
    assert not report.passed and "record_genuine" in report.broken
    assert any(found in e.text for r in report.rules if r.name == "record_genuine" for e in r.evidence)


async def test_a_record_that_lost_lines_is_incomplete_never_passed() -> None:
    for name in ("lost-lines", "cut-line"):
        label = _label(name)
        cut: list[int] = []
        events = read_record(CALIBRATION_DIR / f"{name}.jsonl", cut=cut)
        binding = await bind(SCENARIOS[label["scenario"]], events, nonce=label["nonce"], cut=len(cut))
        report = score(SCENARIOS[label["scenario"]], events, label["answer"], SERVICE_NAMES, binding)
        assert all(f.found for f in report.facts)  # the lines kept hold every figure: still not passed
        assert not report.complete and not report.passed and report.to_json()["complete"] is False
        assert "INCOMPLETE (the record lost lines)" in render_table([report])


async def test_a_seq_missing_is_incomplete() -> None:
    binding, _, _ = await _bound("reference--resize-to-the-ceiling", lambda lines: [lines[0], *lines[2:]],
                                 nonce=None)
    assert _text(binding, "complete").startswith("incomplete: seq 1 missing")


@pytest.mark.parametrize("name", ["version-1--resize", "version-2--pool"])
async def test_a_record_of_format_1_or_2_is_scored_its_binding_not_made(name: str) -> None:
    binding, events, label = await _bound(name)
    assert _status(binding) == {"complete": "passed", "fleet": "not made", "nonce": "not made",
                                "replay": "passed", "probes": "passed"}
    assert score(SCENARIOS[label["scenario"]], events, label["answer"], SERVICE_NAMES, binding).passed


async def test_a_figure_edited_in_a_result_is_caught_by_the_replay_even_unbound() -> None:
    def edit(lines: Lines) -> Lines:
        lines = copy.deepcopy(lines)
        line = next(x for x in lines if x.get("tool") == "check_pool_contract")
        line["result"] |= {"ok": True, "margin_mib": 524.45}
        return lines

    binding, _, _ = await _bound("reference--pool-below-contract", edit, nonce=None)
    assert _text(binding, "replay") == ("seq 1 check_pool_contract: a result the tool would not have returned: "
                                        "result.margin_mib is 524.45, the tool returns -524.45")


async def test_a_probe_figure_no_served_request_holds_is_named() -> None:
    binding, _, _ = await _bound("reference--eight-token-decode-trap")
    assert _status(binding)["probes"] == "passed"
    label = _label("reference--eight-token-decode-trap")
    logged = read_requests(requests_path(CALIBRATION_DIR / "reference--eight-token-decode-trap.jsonl")) or []
    fewer = [{**r, "completion_tokens": 7} for r in logged]
    binding, _, _ = await _bound("reference--eight-token-decode-trap", requests=fewer)
    assert _text(binding, "probes") == ("seq 2 decode_probe: no matching served request: result.generated_tokens "
                                        "is 512, no request frank-archon's endpoint served has completion_tokens 512")
    assert label["nonce"]  # the harness kept it beside the label


def test_a_line_written_before_the_line_above_it_is_out_of_order(tmp_path: Path) -> None:
    lines = (CALIBRATION_DIR / "reference--resize-to-the-ceiling.jsonl").read_text().splitlines()
    second = json.loads(lines[2])
    second["time"] = "2026-12-01T09:00:00.000+00:00"
    (tmp_path / "r.jsonl").write_text("\n".join([*lines[:2], json.dumps(second), *lines[3:]]) + "\n")
    with pytest.raises(EvalError, match=r"refused: seq 2 out of order: written at 2026-12-01T09:00:00.000\+00:00, "
                                        r"before the line above it"):
        read_run(tmp_path / "r.jsonl")


async def _harness_run(scenario_name: str, record: Path) -> str:
    """A run as a harness makes it: the record bound to NONCE, the request log beside it; the answer."""
    scenario = SCENARIOS[scenario_name]
    async with running_fleet(scenario) as fleet:
        answer = await recorded_session(fleet, scenario, _agent("reference"), record, NONCE)
        write_requests(fleet, requests_path(record))
    return answer


def test_eval_scores_a_record_bound_by_the_nonce_it_is_given(tmp_path: Path, cli: CliRunner) -> None:
    scenario = SCENARIOS["token-count-without-prefill"]
    record = tmp_path / "run.jsonl"
    (tmp_path / "answer.txt").write_text(asyncio.run(_harness_run(scenario.name, record)))
    argv = ("eval", "--scenario", scenario.name, "--record", record, "--answer", tmp_path / "answer.txt", "--json")
    done = cli(*argv, env={NONCE_ENV: NONCE})
    assert done.returncode == 0, done.stdout + done.stderr
    [report] = json.loads(done.stdout)["reports"]
    assert {c["name"]: c["status"] for c in report["binding"]} == {
        "complete": "passed", "fleet": "passed", "nonce": "passed", "replay": "passed", "probes": "passed"}
    wrong = cli(*argv, env={NONCE_ENV: "0" * 32})
    assert wrong.returncode == 3 and "a wrong nonce" in wrong.stdout
    requests_path(record).unlink()  # no request log: the probe check is not made, never failed
    alone = json.loads(cli(*argv).stdout)["reports"][0]  # nor a nonce: the record scored, unbound
    assert {c["name"]: c["status"] for c in alone["binding"]} == {
        "complete": "passed", "fleet": "passed", "nonce": "not made", "replay": "passed", "probes": "not made"}


async def test_the_replay_compares_figures_and_lines_not_the_wording_an_older_server_gave() -> None:
    """evals/examples' record was written by an earlier server (format 1), whose formula worded the same figures
    otherwise: the replay passes it; a figure changed in the same prose, or a field the tool never returns, not."""
    root = Path(__file__).resolve().parents[2] / "evals" / "examples"
    events = read_run(root / "pool-below-contract.jsonl")
    scenario = SCENARIOS["pool-below-contract"]
    assert _status(await bind(scenario, events))["replay"] == "passed"
    first = next(e for e in events if e.tool == "check_pool_contract")
    result = first.result or {}
    formula = result["ceiling"]["formula"]
    for changed, found in [
        ({**result, "ceiling": {**result["ceiling"], "formula": formula.replace("30,968", "31,968")}},
         "seq 1 check_pool_contract: a result the tool would not have returned: result.ceiling.formula is "),
        ({**result, "spare_mib": 9000}, "result.spare_mib is in the record, the tool's result has no spare_mib"),
    ]:
        edited = [e.model_copy(update={"result": changed}) if e is first else e for e in events]
        binding = await bind(scenario, edited)
        assert _status(binding)["replay"] == "failed" and found in _text(binding, "replay")
