"""Reliability as eval engineers report it (issue 27, item 6), outside Inspect (tests/evals/test_inspect_task.py
holds the epochs and the Inspect scorer's agreement with the eval command): every report of ``radiance-mcp eval``
names the scorer's version and the scenario set's version; ``--calibrate`` prints a confusion matrix per rule; the
scorer reads numbers as people write them."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_run import CliRunner

from radiance_mcp.evals.calibrate import MORE_RULES, bindings, calibrate, load_set
from radiance_mcp.evals.fleet import SERVICE_NAMES
from radiance_mcp.evals.record import Event
from radiance_mcp.evals.rules import BY_NAME, STEPS
from radiance_mcp.evals.run import run_agent
from radiance_mcp.evals.scenario import SCENARIOS_DIR, Scenario, load_scenario, load_scenarios
from radiance_mcp.evals.score import score
from radiance_mcp.evals.versions import SCORER_VERSION, scenario_set_version, versions, versions_line

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = {s.name: s for s in load_scenarios()}
NAMED = versions()
LINE = f"scorer version {SCORER_VERSION}, scenario set {scenario_set_version()}"


# --- the versions ----------------------------------------------------------------------------------------------


def test_the_scenario_set_version_is_a_digest_of_the_scenario_files(tmp_path: Path) -> None:
    shipped = scenario_set_version()
    assert re.fullmatch(r"sha256:[0-9a-f]{12}", shipped)
    copy = tmp_path / "copy"
    shutil.copytree(SCENARIOS_DIR, copy)
    assert scenario_set_version(copy) == shipped  # the files, not where they are
    (copy / "README.txt").write_text("not a scenario")
    assert scenario_set_version(copy) == shipped
    path = copy / "pool-below-contract.toml"
    path.write_text(path.read_text().replace("tolerance = 1", "tolerance = 2", 1))
    edited = scenario_set_version(copy)
    assert edited != shipped  # a tolerance changed: another set
    shutil.copy(path, tmp_path / "pool-below-contract.toml")
    path.unlink()
    assert scenario_set_version(copy) not in (shipped, edited)  # a scenario left out: another set
    assert scenario_set_version(copy, [tmp_path / "pool-below-contract.toml"]) == edited  # named by --scenario
    assert NAMED == {"scorer_version": SCORER_VERSION, "scenario_set_version": shipped}
    assert versions_line(NAMED) == LINE


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_every_report_of_eval_names_both_versions(tmp_path: Path, cli: CliRunner, as_json: bool) -> None:
    """The text's last line names both versions; the JSON holds both."""
    record, answer = _run_files(tmp_path, "pool-below-contract")
    for argv in (["--scenario", "pool-below-contract"],
                 ["--agent", "all", "--scenario", "pool-below-contract"],
                 ["--scenario", "pool-below-contract", "--record", str(record), "--answer", str(answer)],
                 ["--calibrate"]):
        done = cli("eval", *argv, *(["--json"] if as_json else []), cwd=ROOT)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr
        if as_json:
            data = json.loads(done.stdout)
            assert {k: data[k] for k in NAMED} == NAMED, argv
        else:
            assert done.stdout.splitlines()[-1] == LINE, argv


def test_a_scenario_given_as_a_file_is_in_the_set_version(tmp_path: Path, cli: CliRunner) -> None:
    scenario = tmp_path / "pool-below-contract.toml"
    scenario.write_text((SCENARIOS_DIR / "pool-below-contract.toml").read_text().replace("tolerance = 1",
                                                                                       "tolerance = 2", 1))
    done = cli("eval", "--scenario", str(scenario), "--json", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["scenario_set_version"] == scenario_set_version(None, [scenario]) != \
        scenario_set_version()


def _run_files(folder: Path, name: str) -> tuple[Path, Path]:
    """The reference agent's record and answer on a scenario, as files."""
    record, answer = folder / "run.jsonl", folder / "answer.txt"
    run = asyncio.run(run_agent(SCENARIOS[name], "reference", record=record))
    answer.write_text(run.answer)
    return record, answer


# --- the per-rule confusion matrix -------------------------------------------------------------------------------


def test_calibrate_prints_a_confusion_matrix_per_rule_from_the_labels(cli: CliRunner) -> None:
    """Per rule: tp + fn are the runs whose label names the rule, tp + fp the runs the scorer caught breaking it;
    the text shows the figures the JSON gives."""
    runs = load_set()
    result = calibrate(runs, SCENARIOS, SERVICE_NAMES, asyncio.run(bindings(runs, SCENARIOS)))  # as the CLI binds
    done = cli("eval", "--calibrate", "--json", cwd=ROOT)
    matrix = json.loads(done.stdout)["matrix"]
    assert matrix == result.matrix() and list(matrix) == [*BY_NAME, *STEPS, *MORE_RULES]
    for rule, cells in matrix.items():
        assert cells["tp"] + cells["fn"] == sum(rule in r.breaks for r in runs), rule
        assert cells["tp"] + cells["fp"] == sum(rule in v.broken for v in result.verdicts), rule
        assert sum(cells.values()) == len(runs)
    assert sum(c["tp"] + c["fn"] for c in matrix.values()) >= len([r for r in runs if r.label == "faulty"])
    text = cli("eval", "--calibrate", cwd=ROOT).stdout
    rows = {m[1]: [int(x) for x in m.groups()[1:]] for m in re.finditer(
        r"^(\w+) +(\d+) +(\d+) +(\d+) +(\d+)", text, re.MULTILINE)}
    assert rows == {rule: [c["tp"], c["fn"], c["fp"], c["tn"]] for rule, c in matrix.items()}
    assert "rule                     tp   fn   fp   tn" in text


# --- numbers as people write them, through the scorer ------------------------------------------------------------

SCENARIO_FILES = ROOT / "evals" / "scenarios"
ARMS = load_scenario(SCENARIO_FILES / "two-arm-plateau-claim.toml")
RESIZE = load_scenario(SCENARIO_FILES / "resize-to-the-ceiling.toml")
BOUNDARY = load_scenario(SCENARIO_FILES / "boundary-within-shape.toml")
POOL = load_scenario(SCENARIO_FILES / "pool-below-contract.toml")
TP2 = load_scenario(SCENARIO_FILES / "tp2-card-one-binds.toml")


def _grounded(*scenarios: Scenario) -> Event:
    """A successful call whose result holds every figure of the scenarios: what the answer states is grounded."""
    figures: list[Any] = [x.value for s in scenarios for x in (*s.facts, *s.traps) if x.value is not None]
    return Event(version=2, session="s", seq=1, time="2026-12-02T08:00:00.000+00:00", kind="tool_call",
                 tool="compute_ceiling", ok=True, result={"figures": figures})


def _found(scenario: Scenario, text: str) -> dict[str, bool]:
    report = score(scenario, [_grounded(scenario)], text, SERVICE_NAMES)
    assert report.answer == "text"
    return {f.name: f.found for f in report.facts}


@pytest.mark.parametrize("change", [
    "\u22123.15 %",           # U+2212, the minus sign
    "\u22123.15%",
    "\u22123.15\u2009%",      # and a thin space before the per cent
    "fell 3.15 %",
    "fell by 3.15 %",
    "dropped 3.15 %",
    "decreased by 3.15 %",
    "down 3.15 %",
    "a fall of 3.15 %",
    "a drop of 3.15 %",
    "3.15 % lower",
    "3.15 % down",
])
def test_a_fall_is_read_as_a_negative_change(change: str) -> None:
    text = f"Prefill 3,397 -> 3,290 t/s from 22,208 to 24,000 MiB: it {change}; no plateau."
    assert _found(ARMS, text) == {"no_plateau": True, "change_pct": True}, text


@pytest.mark.parametrize("change", ["rose 3.15 %", "+3.15 %", "3.15 % higher", "grew by 3.15 %"])
def test_a_rise_is_no_fall(change: str) -> None:
    text = f"Prefill from 22,208 to 24,000 MiB: it {change}; no plateau."
    assert _found(ARMS, text) == {"no_plateau": True, "change_pct": False}, text


@pytest.mark.parametrize("space", ["\u2009", "\u202f", "\u00a0"])
def test_thousands_grouped_by_a_thin_or_no_break_space(space: str) -> None:
    text = (f"frank-archon: the pair ceiling is 30{space}969 MiB, so {space.join(['1', '849'])} MiB of headroom; "
            f"the new pool is 6{space}969 MiB, and the contract at 4 seqs needs 6{space}600.89 MiB.")
    assert _found(RESIZE, text) == {"ceiling_mib": True, "headroom_mib": True, "new_pool_mib": True,
                                    "contract_mib_at_4_seqs": True}, text


def test_a_plain_space_is_no_thousands_separator() -> None:
    text = "frank-archon: ceiling 30 969 MiB; headroom 1 849 MiB; new pool 6 969 MiB; contract 6 600.89 MiB at 4 seqs."
    assert not any(_found(RESIZE, text).values())


@pytest.mark.parametrize(("scenario", "text", "fact"), [
    (BOUNDARY, "The ledger backs two sequences; 2/2 retrieved; 199,931 tokens per prompt.", "backed_seqs"),
    (BOUNDARY, "The ledger Backs Two Sequences; 2/2 retrieved; 199\u2009931 tokens per prompt.", "backed_seqs"),
    (POOL, "lowpool fails its contract: it needs 3,524.45 MiB, and backs 163,279 tokens at two seats.",
     "max_window_at_2_seqs"),
    (TP2, "card one binds", "binding_card"),
])
def test_small_numbers_in_words(scenario: Scenario, text: str, fact: str) -> None:
    found = _found(scenario, text)
    assert found[fact], (text, found)


def test_a_number_word_inside_a_word_is_no_number() -> None:
    assert not _found(BOUNDARY, "The ledger backs someone's sequences; 2/2 retrieved; 199,931 tokens.")["backed_seqs"]
