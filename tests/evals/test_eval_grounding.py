"""Issue 27 items 2 and 3: a record the server did not write is refused; a figure no tool result holds is
ungrounded; the answer's plan is judged by the rule book; the skills' step order is judged; contrast and other
words are read as a careful reader reads them. Each case starts from a calibration run the server recorded and
changes the one thing it is about."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.calibrate import CALIBRATION_DIR, bindings, calibrate, load_set
from radiance_mcp.evals.fleet import SERVICE_NAMES
from radiance_mcp.evals.record import Event, read_run
from radiance_mcp.evals.scenario import load_scenarios
from radiance_mcp.evals.score import Report, score

SCENARIOS = {s.name: s for s in load_scenarios()}
TIME = "2026-12-01T10:00:00.000+00:00"


def _events(name: str, drop: tuple[str, ...] = ()) -> list[Event]:
    """The reference run's record on a scenario, without its submitted answer (the text is judged) and the tools
    named in drop."""
    events = read_run(CALIBRATION_DIR / f"reference--{name}.jsonl")
    return [e for e in events if e.tool not in ("submit_answer", *drop)]


def _answer(name: str) -> str:
    return str(json.loads((CALIBRATION_DIR / f"reference--{name}.json").read_text(encoding="utf-8"))["answer"])


def _score(name: str, answer: str, drop: tuple[str, ...] = (), events: list[Event] | None = None) -> Report:
    return score(SCENARIOS[name], _events(name, drop) if events is None else events, answer, SERVICE_NAMES)


def _rule(report: Report, name: str) -> bool | None:
    """Kept (True), broken (False), or not judged (None)."""
    return next((r.kept for r in report.rules if r.name == name), None)


def test_the_calibration_set_is_calibrated() -> None:
    """The CI gate of issue 27: at most 5 % of the labelled runs disagree, and no correct run fails."""
    runs = load_set()
    result = calibrate(runs, SCENARIOS, SERVICE_NAMES, asyncio.run(bindings(runs, SCENARIOS)))
    assert result.false_positives == 0 and result.calibrated, [v.run.name for v in result.verdicts if not v.agrees]


def _line(**fields: object) -> str:
    return json.dumps({"version": 2, "session": "s1", "time": TIME, **fields}) + "\n"


SESSION = _line(seq=0, kind="session", server_version="t")
CALL = {"kind": "tool_call", "tool": "compute_ceiling", "arguments": {"service": "frank-archon"}, "ok": True}


@pytest.mark.parametrize(("lines", "found"), [
    ([_line(seq=1, **CALL)], r"its first line \(seq 1, tool_call compute_ceiling\) is not the session line"),
    ([SESSION, _line(seq=1, **CALL), _line(seq=1, **CALL)], r"seq 1 repeated"),
    ([SESSION, _line(seq=1, **CALL), SESSION], r"a second session line"),
    ([_line(seq=2, **CALL), _line(seq=1, **CALL), SESSION], r"its first line \(seq 2, tool_call compute_ceiling\)"),
    ([SESSION, _line(seq=1, **CALL) .replace('"s1"', '"s2"')], r"two sessions \(s1 and s2\)"),
    ([SESSION, _line(seq=1, **CALL).replace(TIME, "x")], r"seq 1: time 'x' is not the ISO time"),
])
def test_a_record_the_server_did_not_write_is_refused_naming_what_was_found(
        tmp_path: Path, lines: list[str], found: str) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(EvalError, match=rf"record .*run.jsonl: refused: {found}"):
        read_run(path)


def test_a_record_of_one_session_is_read_with_a_call_answered_later_written_later(tmp_path: Path) -> None:
    assert len(read_run(CALIBRATION_DIR / "reference--resize-to-the-ceiling.jsonl")) > 3
    path = tmp_path / "run.jsonl"  # seq 2 answered before seq 1: the server writes each when it is answered
    path.write_text(SESSION + _line(seq=2, **CALL) + _line(seq=1, **CALL), encoding="utf-8")
    assert [e.seq for e in read_run(path)] == [0, 2, 1]


def test_a_figure_no_successful_tool_result_holds_is_ungrounded() -> None:
    name = "resize-to-the-ceiling"
    assert _score(name, _answer(name)).passed
    ledger_reads = ("read_budget_table", "compute_ceiling", "check_pool_contract", "render_gates")
    ungrounded = _score(name, _answer(name), drop=ledger_reads)
    ceiling = next(f for f in ungrounded.facts if f.name == "ceiling_mib")
    assert not ceiling.found and "ungrounded" in ceiling.evidence


def test_a_trap_figure_said_for_contrast_is_no_claim_and_one_claimed_still_is() -> None:
    name = "resize-to-the-ceiling"
    contrast = _score(name, _answer(name) + "\nrocm-smi's view, 31,178 MiB, is not spare capacity: no engine floor.")
    assert contrast.passed, contrast.rules
    claimed = _score(name, _answer(name) + "\nThe pair may grow to 31,178 MiB, not 30,969 MiB.")
    assert _rule(claimed, "engine_ceiling") is False


def test_a_verdict_in_other_words_is_found_and_negated_is_not() -> None:
    name = "pool-below-contract"
    said = "lowpool's pool of 3,000 MiB is too small for its contract: 3,524.45 MiB; 163,279 tokens at 2 seats."
    assert _score(name, said).passed
    denied = _score(name, said.replace("is too small", "is not too small"))
    assert not next(f for f in denied.facts if f.name == "verdict").found


def test_an_answer_of_pasted_json_claims_nothing() -> None:
    name = "resize-to-the-ceiling"
    dump = "\n".join(json.dumps(e.result) for e in _events(name) if e.result)
    report = _score(name, dump)
    assert not report.passed and not any(f.found for f in report.facts)


def test_a_plan_over_the_ceiling_and_under_its_contract_breaks_both_rules_without_render_gates() -> None:
    name = "resize-to-the-ceiling"
    plan = _answer(name) + "\nRecommended: --vram-kv-mib 7,469 with --max-num-seqs 5."
    report = _score(name, plan, drop=("render_gates",))
    assert _rule(report, "pair_within_ceiling") is False and _rule(report, "pool_contract") is False
    moved = _score(name, _answer(name) + "\n--vram-kv-mib 5,120 -> 6,969 with --max-num-seqs 4.")
    assert moved.passed  # an option compared (a flag moved) is no plan


def test_boundary_probe_plans_before_it_executes_and_reads_the_ledger() -> None:
    name = "boundary-within-shape"
    alone = _score(name, _answer(name), drop=("read_budget_table",))
    assert _rule(alone, "ledger_first") is True and _rule(alone, "plan_before_execute") is True
    events = _events(name)
    first_plan = next(e for e in events if e.tool == "boundary_probe" and not (e.arguments or {}).get("execute"))
    unplanned = _score(name, _answer(name), events=[e for e in events if e is not first_plan])
    assert _rule(unplanned, "plan_before_execute") is False


def test_the_serve_script_step_is_checked_and_proven() -> None:
    name = "private-step-in-serve-script"
    assert _rule(_score(name, _answer(name)), "serve_script_checked") is True
    unproven = _score(name, _answer(name), drop=("compare_dry_run",))
    assert _rule(unproven, "serve_script_checked") is False


def test_gates_come_before_a_deploy_called_verified() -> None:
    name = "resize-to-the-ceiling"
    events = _events(name)
    verify = Event(version=2, session=events[0].session, seq=99, time=TIME, kind="tool_call", tool="verify_deploy",
                   arguments={"service": "frank-archon"}, ok=True, result={})
    assert _rule(_score(name, _answer(name), events=[*events, verify]), "gates_before_verified") is True
    ungated = [e for e in events if e.tool != "render_gates"] + [verify]
    assert _rule(_score(name, _answer(name), events=ungated), "gates_before_verified") is False
    assert _rule(_score(name, _answer(name)), "gates_before_verified") is None  # nothing exercised it


def test_the_image_blamed_after_an_audit_that_found_the_step_breaks_audit_before_image() -> None:
    name = "oom-after-wider-step"
    blamed = _score(name, _answer(name) + "\nThe new container image is at fault: roll the image back.")
    assert _rule(blamed, "audit_before_image") is False
    cleared = _score(name, _answer(name) + "\nThe container image is not at fault.")
    assert _rule(cleared, "audit_before_image") is True


def test_a_reserve_taken_by_hand_breaks_reserve_traced() -> None:
    name = "untraceable-reserve"
    assert _rule(_score(name, _answer(name)), "reserve_traced") is True
    events = [e.model_copy(update={"arguments": {k: v for k, v in (e.arguments or {}).items() if k != "reserves"}})
              for e in _events(name)]
    by_hand = _score(name, _answer(name) + "\nLess our personal reserve of 512 MiB: a pair of 30,457 MiB.",
                     events=events)
    assert _rule(by_hand, "reserve_traced") is False


def test_arms_sent_as_a_json_string_are_the_arms_the_server_read() -> None:
    name = "two-arm-plateau-claim"
    events = _events(name)
    arms = [{"value": 22208.0, "rate": 3397.0}, {"value": 24000.0, "rate": 3290.0}]
    claim = Event(version=2, session=events[0].session, seq=99, time=TIME, kind="tool_call", tool="compare_arms",
                  arguments={"arms": json.dumps(arms), "knob": "slab MiB", "claim": "plateau"}, ok=True, result={})
    assert _rule(_score(name, _answer(name), events=[*events, claim]), "no_two_arm_claim") is False
