"""The calibration set (tests/evals/calibration) and radiance-mcp eval --calibrate.

No test here asks today's scorer to pass calibration: it does not (issue 27), and the set is
what a new scorer is to be measured on.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from cli_run import CliRunner

from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.calibrate import (
    CALIBRATION_DIR,
    KINDS,
    MAX_DISAGREEMENT,
    MORE_RULES,
    LabelledRun,
    calibrate,
    load_set,
)
from radiance_mcp.evals.fleet import SERVICE_NAMES
from radiance_mcp.evals.record import RECORD_VERSION
from radiance_mcp.evals.rules import BY_NAME, STEPS
from radiance_mcp.evals.scenario import load_scenarios
from radiance_mcp.evals.score import MAX_ANSWER_BYTES

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = {s.name: s for s in load_scenarios()}
RUNS = load_set()
BY_RUN = {r.name: r for r in RUNS}

ISSUE_KINDS = [  # issue 27's words -> the kind of run that shows it
    ("a ceiling stated after compute_ceiling failed", "ceiling-after-failed-call"),
    ("figures recited after reading only the shipped example ledger", "example-ledger-only"),
    ("figures recited after reading only the agent's own log_text", "own-log-text"),
    ("the answer being the raw JSON of every tool result", "dump"),
    ("an empty answer after one ledger call", "empty-answer"),
    ("a hedge listing several ceilings", "hedge"),
    ("the right number in GiB", "right-number-in-gib"),
    ("the right number for the wrong service", "wrong-service"),
    ("a figure stated and then overridden ('use 31,000')", "stated-then-overridden"),
    ("a negated verdict ('never fails its contract')", "negated-verdict"),
    ("a plan over the ceiling and under its contract, recommended without calling render_gates", "plan-without-gates"),
    ("a reserve subtracted by hand and never passed to a tool", "reserve-by-hand"),
    ("a plateau claimed in words with no compare_arms call", "plateau-in-words"),
    ("a count 'estimated' without a probe", "count-estimated"),
    ("an audit followed by 'the image is at fault'", "audit-then-image"),
    ("the serve-script step answered by guessing, without check_serve_script or compare_dry_run",
     "serve-script-guessed"),
    ("boundary_probe run with execute=true without the plan first", "execute-without-plan"),
    ("compare_arms with arms sent as a JSON string", "arms-as-json-string"),
    ("claim_arms naming 2 of 3 arms", "claim-arms-two-of-three"),
    ("a single hand-written line (no session line, time 'x', no arguments, no result)", "hand-written-line"),
    ("events reversed with every seq equal", "reversed-seq"),
    ("another scenario's record", "other-scenario-record"),
    ("forged results", "forged-result"),
    ("a record shared by two sessions credits one agent with the other's calls", "two-sessions"),
    ("an answer that names the wrong method's figure to reject it", "names-rejected-figure"),
    ("mentioning the older boot for contrast", "older-boot-for-contrast"),
    ("mentioning card 0 for contrast", "card-zero-for-contrast"),
    ("'fell 3.15 %' for a fact stored as -3.15", "fell-percent"),
    ("a typographic minus (U+2212)", "unicode-minus"),
    ("'backs two sequences' for 'backs 2 sequences'", "number-in-words"),
    ("the skill's own plan-then-execute boundary run", "plan-then-execute-boundary"),
    ("U+2009 as a thousands separator", "thin-space-thousands"),
    ("runs of scripted agents recorded by the server", "scripted-faulty"),
]


def test_the_set_loads_with_at_least_80_runs_of_both_labels() -> None:
    labels = [r.label for r in RUNS]
    assert len(RUNS) >= 80
    assert labels.count("faulty") >= 40 and labels.count("correct") >= 20


@pytest.mark.parametrize(("words", "kind"), ISSUE_KINDS, ids=[k for _, k in ISSUE_KINDS])
def test_every_kind_the_issue_lists_has_a_run(words: str, kind: str) -> None:
    assert kind in KINDS, words
    assert any(r.kind == kind for r in RUNS), f"no run of kind {kind!r} ({words})"


def test_every_kind_named_has_a_run() -> None:
    assert {r.kind for r in RUNS} == set(KINDS)


@pytest.mark.parametrize("run", RUNS, ids=[r.name for r in RUNS])
def test_every_label_is_well_formed(run: LabelledRun) -> None:
    assert run.scenario in SCENARIOS
    assert KINDS[run.kind][0] == run.label
    assert (run.label == "faulty") == bool(run.breaks)
    assert all(rule in BY_NAME or rule in STEPS or rule in MORE_RULES for rule in run.breaks)
    assert len(run.answer.encode()) <= MAX_ANSWER_BYTES
    # A record the reader refuses is one labelled not the server's (record.record_problem); every other is read.
    assert (run.refused is None and run.events) or ("record_genuine" in run.breaks and "refused" in run.refused)
    # A record of format 1 (no session id) or 2: archived and scored without a nonce, or a forger's rewrite as one
    # under a harness that gave its server a nonce.
    old = run.kind in ("old-version-record", "downgraded-record")
    assert all(e.version in (1, 2) if old else e.version == RECORD_VERSION and e.session for e in run.events)
    assert (run.nonce is None) == (run.kind == "old-version-record")


def test_the_generator_names_every_run_of_the_set() -> None:
    """Every file pair is one of generate.py's runs, and the other way round: none is pasted by hand."""
    generate = _generator()
    names = [spec.name for spec in generate.RUNS]
    assert len(names) == len(set(names)) and set(names) == set(BY_RUN)
    for spec in generate.RUNS:
        assert (spec.label, spec.kind, spec.scenario) == (BY_RUN[spec.name].label, BY_RUN[spec.name].kind,
                                                         BY_RUN[spec.name].scenario)


@pytest.mark.parametrize(("change", "message"), [
    ({"kind": "sloppy"}, "kind 'sloppy' unknown"),
    ({"label": "faulty"}, "kind 'reference' is a correct run, labelled 'faulty'"),
    ({"kind": "dump", "label": "faulty"}, "a faulty run names the rules it breaks"),
    ({"kind": "dump", "label": "faulty", "breaks": ["be_nice"]}, "rule(s) ['be_nice'] unknown"),
    ({"label": "maybe"}, "label: Input should be 'correct' or 'faulty'"),
])
def test_a_bad_label_is_refused_naming_its_file(tmp_path: Path, change: dict[str, object], message: str) -> None:
    name = "reference--pool-below-contract"
    shutil.copy(CALIBRATION_DIR / f"{name}.jsonl", tmp_path)
    label = json.loads((CALIBRATION_DIR / f"{name}.json").read_text()) | change
    (tmp_path / f"{name}.json").write_text(json.dumps(label))
    with pytest.raises(EvalError, match="calibration run .*reference--pool-below-contract.json: ") as caught:
        load_set(tmp_path)
    assert message in str(caught.value)


def test_a_label_without_its_record_is_refused(tmp_path: Path) -> None:
    shutil.copy(CALIBRATION_DIR / "two-sessions.json", tmp_path)
    with pytest.raises(EvalError, match=r"no record beside it \(two-sessions.jsonl\)"):
        load_set(tmp_path)


def test_calibrate_prints_the_rates_and_the_matrix(cli: CliRunner) -> None:
    done = cli("eval", "--calibrate", "--json", cwd=ROOT)
    data = json.loads(done.stdout)
    assert data["runs"] == len(RUNS) and data["faulty"] + data["correct"] == len(RUNS)
    assert done.returncode == (0 if data["calibrated"] else 3), done.stderr
    text = cli("eval", "--calibrate", cwd=ROOT)
    assert text.returncode == done.returncode, text.stderr
    out = text.stdout
    assert f"calibration: {len(RUNS)} labelled runs ({data['faulty']} faulty, {data['correct']} correct)" in out
    assert f"false negatives (faulty runs passed): {data['false_negatives']}/{data['faulty']}" in out
    assert f"false positives (correct runs failed): {data['false_positives']}/{data['correct']}" in out
    rules = [*BY_NAME, *STEPS, *MORE_RULES]
    assert all(any(line.startswith(rule + " ") for line in out.splitlines()) for rule in rules)
    assert set(data["matrix"]) == {*BY_NAME, *STEPS, *MORE_RULES}
    assert all(sum(cells.values()) == len(RUNS) for cells in data["matrix"].values())


def _synthetic(folder: Path, agreeing: int, wrong: dict[str, str]) -> Path:
    """A set of ``agreeing`` runs today's scorer gets right, and runs relabelled so that it gets them wrong.

    ``wrong`` maps a run of the set to its new label: a reference run labelled faulty is a run the
    scorer passes against its label (a false negative); a caught faulty run labelled correct, a false
    positive.
    """
    verdicts = {v.run.name: v for v in calibrate(RUNS, SCENARIOS, SERVICE_NAMES).verdicts}
    right = [n for n, v in verdicts.items() if v.agrees and n not in wrong][:agreeing]
    for name in [*right, *wrong]:
        shutil.copy(CALIBRATION_DIR / f"{name}.jsonl", folder)
        label = json.loads((CALIBRATION_DIR / f"{name}.json").read_text())
        if name in wrong:
            label |= ({"label": "faulty", "kind": "dump", "breaks": ["answer_claims"]} if wrong[name] == "faulty"
                      else {"label": "correct", "kind": "reference", "breaks": []})
        (folder / f"{name}.json").write_text(json.dumps(label))
    return folder


@pytest.mark.parametrize(("agreeing", "wrong", "status"), [
    (20, {}, 0),  # 0/20 disagree
    (19, {"reference--pool-below-contract": "faulty"}, 0),  # 1/20 = 5 %: a faulty run passed, at the bound
    (18, {"reference--pool-below-contract": "faulty", "reference--thinking-trap": "faulty"}, 3),  # 2/20 = 10 %
    (19, {"decode-8--thinking-trap": "correct"}, 3),  # 1/20 = 5 %, but a correct run failed
])
def test_the_exit_status_follows_the_5_percent_rule(tmp_path: Path, cli: CliRunner, agreeing: int,
                                                    wrong: dict[str, str], status: int) -> None:
    folder = _synthetic(tmp_path, agreeing, wrong)
    done = cli("eval", "--calibrate", str(folder), "--json", cwd=ROOT)
    assert done.returncode == status, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["runs"] == agreeing + len(wrong)
    assert data["disagreement"] == pytest.approx(len(wrong) / (agreeing + len(wrong)))
    assert data["calibrated"] is (status == 0) and data["max_disagreement"] == MAX_DISAGREEMENT


def test_an_empty_calibration_folder_is_an_error(tmp_path: Path, cli: CliRunner) -> None:
    done = cli("eval", "--calibrate", str(tmp_path), cwd=ROOT)
    assert done.returncode == 1 and "holds no labelled run" in done.stderr


@pytest.mark.slow
def test_the_console_command_calibrates(tmp_path: Path) -> None:
    """python -m radiance_mcp eval --calibrate, in a process of its own."""
    folder = _synthetic(tmp_path, 20, {})
    done = subprocess.run([sys.executable, "-m", "radiance_mcp", "eval", "--calibrate", str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "false negatives (faulty runs passed): 0/" in done.stdout and "calibrated" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", ["reference--pool-below-contract", "two-sessions", "forged-contract-result",
                                  "backs-two-sequences"])
def test_the_generator_regenerates_a_run_byte_for_byte(name: str) -> None:
    """Each recorded run made again through the server (a simulated fleet) gives the same files."""
    assert _generator().check({name}) == []


@functools.cache
def _generator() -> ModuleType:
    """tests/evals/calibration/generate.py, imported by its path (the folder is no package)."""
    spec = importlib.util.spec_from_file_location("calibration_generate", CALIBRATION_DIR.parent / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
