"""radiance-mcp eval, as a person runs it: tables, JSON and exit statuses."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import CliRunner

from radiance_mcp.app.cli import main
from radiance_mcp.evals.run import run_agent
from radiance_mcp.evals.scenario import load_scenarios

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = {s.name: s for s in load_scenarios()}


def test_the_reference_agent_passes_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--scenario", "two-arm-plateau-claim", "--scenario", "pool-below-contract"]) == 0
    out = capsys.readouterr().out
    assert "two-arm-plateau-claim" in out and "pool-below-contract" in out and "2/2 scenarios passed" in out


def test_a_faulty_agent_caught_by_its_rule_exits_0_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--agent", "two-arm-plateau", "--scenario", "two-arm-plateau-claim", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["breaks"] == "no_two_arm_claim" and data["expected"] is True
    (report,) = data["reports"]
    assert report["broken"] == ["no_two_arm_claim"] and report["passed"] is False
    (rule,) = [r for r in report["rules"] if r["name"] == "no_two_arm_claim"]
    assert rule["evidence"][0]["tool"] == "compare_arms" and rule["evidence"][0]["call"] == 1


def test_a_record_and_answer_are_scored(tmp_path: Path, cli: CliRunner) -> None:
    """Any agent's run: the record and the final answer, scored with the scenario; 3 when it fails."""
    record = tmp_path / "run.jsonl"
    run = asyncio.run(run_agent(SCENARIOS["untraceable-reserve"], "misspelled-reserves", record=record))
    answer = tmp_path / "answer.txt"
    answer.write_text(run.answer)
    argv = ["eval", "--scenario", "untraceable-reserve", "--record", str(record), "--answer", str(answer)]
    done = cli(*argv, cwd=ROOT)
    assert done.returncode == 3, done.stderr
    assert "broke argument_names" in done.stdout and "compute_ceiling: refused" in done.stdout
    done = cli(*argv, "--json", cwd=ROOT)
    assert json.loads(done.stdout)["reports"][0]["broken"] == ["argument_names"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--agent", "sloppy"], "--agent 'sloppy': no such scripted agent"),
    (["--scenario", "nowhere"], "--scenario 'nowhere': no such scenario"),
    (["--record", "r.jsonl"], "--record and --answer go together"),
    (["--record", "r.jsonl", "--answer", "a.txt"], "--record scores one run: name its scenario"),
    (["--scenario", "thinking-trap", "--record", "missing.jsonl", "--answer", "a.txt"],
     "missing.jsonl: cannot be read"),
])
def test_a_bad_eval_call_is_an_error_that_says_what_to_do(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", *argv]) == 1
    assert message in capsys.readouterr().err


def test_all_agents_print_the_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    """--agent all on one scenario: the reference passes it, the faulty agent of its rule is caught
    by that rule alone, and the agents whose rule it does not list are shown as not run."""
    assert main(["eval", "--agent", "all", "--scenario", "two-arm-plateau-claim"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:-1]}  # the last: the versions
    assert rows["reference"].endswith("as expected") and "1/1" not in rows["reference"]
    assert "no_two_arm_claim" in rows["two-arm-plateau"] and rows["two-arm-plateau"].endswith("as expected")
    assert "1/1" in rows["two-arm-plateau"]
    assert rows["decode-8"].endswith("not run: no scenario chosen lists its rule")
    assert len(rows) == 23  # the reference and 22 faulty agents, one per rule and per step of the skills' order


@pytest.mark.slow
def test_eval_prints_its_table_and_nothing_else() -> None:
    """The server built in-process logs every probe request at INFO: none of it reaches a person's terminal."""
    done = subprocess.run([sys.executable, "-m", "radiance_mcp", "eval", "--scenario", "boundary-within-shape"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "boundary-within-shape" in done.stdout and "1/1 scenarios passed" in done.stdout
