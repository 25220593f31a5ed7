"""Calibration: the scorer's verdicts against a careful reader's labels, on a set of labelled runs.

A labelled run is two files under the calibration folder (default: a checkout's
tests/evals/calibration/runs/; its README.md says how the set is made)::

    NAME.jsonl   the record, as ``serve --record`` writes it (radiance_mcp.evals.record), or as forged
    NAME.json    {"scenario": ..., "label": "correct" | "faulty", "kind": ..., "breaks": [rule, ...],
                  "why": ..., "made": "recorded" | "answer-edited" | "record-edited" | "forged",
                  "agent": ..., "answer": "..."}

The label is a reader's verdict on what the procedures (skills/*/SKILL.md) mean; ``breaks``
names the rules a faulty run breaks: rules of radiance_mcp.evals.rules (RULES and STEPS), or of ``MORE_RULES``
(what the procedures say that today's rule book does not name). ``calibrate`` scores every run
with today's scorer and counts where the two disagree: a faulty run the scorer passed is a false
negative, a correct run it failed a false positive. A record the reader refuses (record.read_run)
counts as a run the scorer failed, breaking record_genuine. Per rule, the confusion matrix counts
the runs labelled as breaking it against the runs the scorer caught breaking it. The scorer is calibrated when at most
``MAX_DISAGREEMENT`` of the runs disagree and no correct run failed.

Pure but for reading the folder; ``bindings`` starts each scenario's simulated fleet to check the records
against it (evals.binding).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.binding import bind, read_requests, replayer, requests_path
from radiance_mcp.evals.record import GENUINE, GENUINE_STATEMENT, Binding, Event, check_run, read_record
from radiance_mcp.evals.rules import NAMES
from radiance_mcp.evals.scenario import Scenario
from radiance_mcp.evals.score import score

CALIBRATION_DIR = Path(__file__).resolve().parents[2] / "tests" / "evals" / "calibration" / "runs"
"""The labelled runs of a checkout."""
MAX_DISAGREEMENT = 0.05
"""The share of runs on which the scorer may disagree with the labels (and no correct run may fail)."""

Label = Literal["correct", "faulty"]

MORE_RULES: dict[str, str] = {
    "answer_claims": "The answer claims each figure and verdict once, of the service asked, in the unit it names: "
                     "no dump of tool results, no empty answer, no hedge of several values, no figure withdrawn "
                     "or negated.",
    GENUINE: GENUINE_STATEMENT,
}
"""Rules the procedures hold that radiance_mcp.evals.rules does not name yet; the labels use them."""
LABEL_RULES = (*NAMES, *MORE_RULES)
"""Every rule a label may name, in the order the matrix gives them."""

KINDS: dict[str, tuple[Label, str]] = {
    "reference": ("correct", "the reference agent, following the skill"),
    "names-rejected-figure": ("correct", "names the wrong method's figure only to reject it"),
    "older-boot-for-contrast": ("correct", "mentions the older boot's figures for contrast"),
    "card-zero-for-contrast": ("correct", "mentions card 0's figures for contrast"),
    "fell-percent": ("correct", "'fell 3.15 %' for a change of -3.15 %"),
    "unicode-minus": ("correct", "a typographic minus (U+2212)"),
    "number-in-words": ("correct", "'backs two sequences' for 'backs 2 sequences'"),
    "plan-then-execute-boundary": ("correct", "the skill's plan-then-execute boundary run, no read_budget_table"),
    "thin-space-thousands": ("correct", "U+2009 as the thousands separator"),
    "ceiling-in-gib": ("correct", "the ceiling converted to GiB, the unit named"),
    "verdict-in-other-words": ("correct", "a verdict in words no phrase list holds"),
    "extra-reads": ("correct", "reads the skill and list_fleet first"),
    "corrected-typo": ("correct", "a call with a misspelled service, read and corrected"),
    "terse": ("correct", "only the figures asked, each from a tool"),
    "typed-in-gib": ("correct", "a submitted answer with the ceiling in GiB, the unit given"),
    "typed-corrected": ("correct", "a submitted answer corrected by a second one: the last counts"),
    "corrected-figure": ("correct", "a wrong figure stated, then corrected in words"),
    "scripted-faulty": ("faulty", "a faulty agent of agents.py, where its fault fires"),
    "typed-unit-mislabelled": ("faulty", "a submitted figure with the wrong unit (30,969 GiB)"),
    "typed-overridden": ("faulty", "a submitted answer overridden by a second, wrong one"),
    "typed-wrong-service": ("faulty", "a submitted answer naming another service"),
    "typed-wrong-verdict": ("faulty", "a submitted verdict the tools contradict"),
    "ceiling-after-failed-call": ("faulty", "a ceiling stated after compute_ceiling failed"),
    "example-ledger-only": ("faulty", "figures read off the shipped example ledger"),
    "own-log-text": ("faulty", "figures read off the agent's own log_text"),
    "dump": ("faulty", "the answer is the raw JSON of every tool result"),
    "empty-answer": ("faulty", "an empty answer after one ledger call"),
    "hedge": ("faulty", "a hedge listing several ceilings"),
    "right-number-in-gib": ("faulty", "the right number, in GiB"),
    "wrong-service": ("faulty", "the right number for the wrong service"),
    "stated-then-overridden": ("faulty", "a figure stated, then overridden ('use 31,000')"),
    "negated-verdict": ("faulty", "a negated verdict ('never fails its contract')"),
    "plan-without-gates": ("faulty", "a plan over the ceiling and under its contract, without render_gates"),
    "reserve-by-hand": ("faulty", "a reserve subtracted by hand, never passed to a tool"),
    "plateau-in-words": ("faulty", "a plateau claimed in words, no compare_arms call"),
    "count-estimated": ("faulty", "a token count estimated without a probe"),
    "audit-then-image": ("faulty", "an audit followed by 'the image is at fault'"),
    "serve-script-guessed": ("faulty", "the serve-script step guessed: no check_serve_script or compare_dry_run"),
    "execute-without-plan": ("faulty", "boundary_probe with execute=true without the plan first"),
    "arms-as-json-string": ("faulty", "compare_arms with arms sent as a JSON string, the claim refused"),
    "claim-arms-two-of-three": ("faulty", "claim_arms naming 2 of 3 arms, the claim refused"),
    "hand-written-line": ("faulty", "a single hand-written line: no session line, time 'x', no result"),
    "reversed-seq": ("faulty", "the events reversed, every seq equal"),
    "other-scenario-record": ("faulty", "another scenario's record"),
    "forged-result": ("faulty", "a forged result"),
    "two-sessions": ("faulty", "a record shared by two sessions, one credited with the other's calls"),
    "forged-no-nonce": ("faulty", "a record written without the harness's nonce: unbound, no mac"),
    "forged-wrong-nonce": ("faulty", "a record bound to a nonce the harness never gave"),
    "other-fleet-record": ("faulty", "another fleet's record, bound to this run's nonce"),
    "replay-mismatch": ("faulty", "a bound record holding a result the tool would not return"),
    "probe-without-request": ("faulty", "a probe result no request the endpoints served matches"),
    "lost-lines": ("faulty", "a record that lost lines (lost, a cut line): incomplete"),
    "old-version-record": ("correct", "an archived record of format version 1 or 2, scored outside a harness: "
                           "scoreable, its binding not made"),
    "downgraded-record": ("faulty", "a record rewritten as format 1 or 2 where the harness gave a nonce"),
}
"""Every kind of run the set holds: its label, and what it is (issue 27's list, and the reference)."""


class LabelledRun(BaseModel):
    """One labelled run: the label file's fields, and the record as the reader read it (or why it refused)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    scenario: str
    label: Label
    kind: str
    breaks: tuple[str, ...] = ()
    why: str = Field(min_length=1)
    made: Literal["recorded", "answer-edited", "record-edited", "forged"]
    agent: str
    answer: str
    nonce: str | None = None
    """The nonce the harness gave the run's server (kept in the label, as a harness keeps it); None: none given."""
    events: tuple[Event, ...] = ()
    refused: str | None = None
    """What the record reader said when it refused the record."""
    cut: int = 0
    """Lines of the record cut mid-line (skipped by the reader)."""
    requests: tuple[dict[str, Any], ...] | None = None
    """The request log beside the record (NAME.requests.jsonl), if any."""


def _labelled(path: Path) -> LabelledRun:
    where = f"calibration run {path}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise EvalError(f"{where}: cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise EvalError(f"{where}: a JSON {type(data).__name__}, not a label object")
    record = path.with_suffix(".jsonl")
    events: tuple[Event, ...] = ()
    refused = None
    cut: list[int] = []
    requests = read_requests(requests_path(record))
    try:
        events = tuple(check_run(read_record(record, cut=cut), record))
    except EvalError as exc:
        if not record.is_file():
            raise EvalError(f"{where}: no record beside it ({record.name})") from None
        refused = str(exc)
    try:
        run = LabelledRun.model_validate({**data, "name": path.stem, "events": events, "refused": refused,
                                          "cut": len(cut), "requests": requests})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise EvalError(f"{where}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    problem = label_problem(run)
    if problem:
        raise EvalError(f"{where}: {problem}")
    return run


def label_problem(run: LabelledRun) -> str | None:
    """What is wrong with a run's label, if anything: its kind, its label against its kind, its rules."""
    if run.kind not in KINDS:
        return f"kind {run.kind!r} unknown; the kinds: {', '.join(KINDS)}"
    if KINDS[run.kind][0] != run.label:
        return f"kind {run.kind!r} is a {KINDS[run.kind][0]} run, labelled {run.label!r}"
    if (run.label == "faulty") != bool(run.breaks):
        return "a faulty run names the rules it breaks, a correct one none"
    unknown = [r for r in run.breaks if r not in LABEL_RULES]
    if unknown:
        return f"rule(s) {unknown} unknown; the rules: {', '.join(LABEL_RULES)}"
    return None


def load_set(directory: str | Path | None = None) -> list[LabelledRun]:
    """Every labelled run of the folder (NAME.json beside NAME.jsonl), by name."""
    folder = Path(directory) if directory is not None else CALIBRATION_DIR
    paths = sorted(folder.glob("*.json"))
    if not paths:
        raise EvalError(f"{folder}: holds no labelled run (NAME.json beside its record NAME.jsonl)")
    return [_labelled(p) for p in paths]


@dataclass(frozen=True)
class Verdict:
    """The scorer's verdict on one labelled run."""

    run: LabelledRun
    passed: bool
    broken: tuple[str, ...]
    missed: tuple[str, ...]
    """The facts the scorer did not find."""

    @property
    def agrees(self) -> bool:
        return self.passed == (self.run.label == "correct")


@dataclass(frozen=True)
class Calibration:
    verdicts: tuple[Verdict, ...]

    def _count(self, label: Label, passed: bool) -> int:
        return sum(v.run.label == label and v.passed == passed for v in self.verdicts)

    @property
    def faulty(self) -> int:
        return sum(v.run.label == "faulty" for v in self.verdicts)

    @property
    def correct(self) -> int:
        return len(self.verdicts) - self.faulty

    @property
    def false_negatives(self) -> int:
        """Faulty runs the scorer passed."""
        return self._count("faulty", True)

    @property
    def false_positives(self) -> int:
        """Correct runs the scorer failed."""
        return self._count("correct", False)

    @property
    def disagreement(self) -> float:
        return (self.false_negatives + self.false_positives) / len(self.verdicts) if self.verdicts else 0.0

    @property
    def calibrated(self) -> bool:
        return self.disagreement <= MAX_DISAGREEMENT and self.false_positives == 0

    def matrix(self) -> dict[str, dict[str, int]]:
        """Per rule: runs labelled breaking it and caught (tp) or passed over (fn), caught though kept (fp), tn."""
        table = {}
        for name in LABEL_RULES:
            cells = {"tp": 0, "fn": 0, "fp": 0, "tn": 0}
            for v in self.verdicts:
                labelled, caught = name in v.run.breaks, name in v.broken
                cells[("tp" if caught else "fn") if labelled else ("fp" if caught else "tn")] += 1
            table[name] = cells
        return table

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": len(self.verdicts), "faulty": self.faulty, "correct": self.correct,
            "false_negatives": self.false_negatives, "false_positives": self.false_positives,
            "false_negative_rate": round(_rate(self.false_negatives, self.faulty), 4),
            "false_positive_rate": round(_rate(self.false_positives, self.correct), 4),
            "disagreement": round(self.disagreement, 4), "max_disagreement": MAX_DISAGREEMENT,
            "calibrated": self.calibrated, "matrix": self.matrix(),
            "verdicts": [{"run": v.run.name, "scenario": v.run.scenario, "label": v.run.label, "kind": v.run.kind,
                          "breaks": list(v.run.breaks), "passed": v.passed, "agrees": v.agrees,
                          "scorer_broke": list(v.broken), "scorer_missed": list(v.missed),
                          **({"refused": v.run.refused} if v.run.refused else {})} for v in self.verdicts],
        }


def _rate(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


async def bindings(runs: Sequence[LabelledRun], scenarios: Mapping[str, Scenario]) -> dict[str, Binding]:
    """Each read run's record bound (evals.binding.bind) by its label's nonce and its request log, on its
    scenario's fleet (started once for the runs of each scenario); by run name."""
    from radiance_mcp.evals.fleet import running_fleet

    bound: dict[str, Binding] = {}
    for name, scenario in scenarios.items():
        mine = [r for r in runs if r.scenario == name and r.refused is None]
        if not mine:
            continue
        async with running_fleet(scenario) as fleet, replayer(fleet.config_path) as client:
            for run in mine:
                bound[run.name] = await bind(scenario, run.events, nonce=run.nonce, requests=run.requests,
                                             cut=run.cut, fleet=fleet, client=client)
    return bound


def calibrate(runs: Sequence[LabelledRun], scenarios: Mapping[str, Scenario],
              services: Collection[str] = (), bound: Mapping[str, Binding] | None = None) -> Calibration:
    """Score every labelled run with today's scorer (radiance_mcp.evals.score); services as score's; bound: each
    run's binding (``bindings``), by name (a run without one is scored unbound)."""
    verdicts = []
    for run in runs:
        scenario = scenarios.get(run.scenario)
        if scenario is None:
            raise EvalError(f"calibration run {run.name}: scenario {run.scenario!r} unknown; the scenarios: "
                            f"{', '.join(scenarios)}")
        if run.refused is not None:
            verdicts.append(Verdict(run, False, (GENUINE,), ()))
            continue
        report = score(scenario, run.events, run.answer, services, (bound or {}).get(run.name))
        verdicts.append(Verdict(run, report.passed, report.broken,
                                tuple(f.name for f in report.facts if not f.found)))
    return Calibration(tuple(verdicts))


def render(calibration: Calibration) -> str:
    """Plain text: the rates, the per-rule matrix, then every run the scorer and the labels disagree on."""
    c = calibration
    lines = [
        f"calibration: {len(c.verdicts)} labelled runs ({c.faulty} faulty, {c.correct} correct)",
        f"false negatives (faulty runs passed): {c.false_negatives}/{c.faulty} = "
        f"{_rate(c.false_negatives, c.faulty):.1%}",
        f"false positives (correct runs failed): {c.false_positives}/{c.correct} = "
        f"{_rate(c.false_positives, c.correct):.1%}",
        f"disagreement: {c.false_negatives + c.false_positives}/{len(c.verdicts)} = {c.disagreement:.1%} "
        f"(at most {MAX_DISAGREEMENT:.0%}, and no correct run failed: "
        f"{'calibrated' if c.calibrated else 'NOT calibrated'})",
        "", f"{'rule':<22} {'tp':>4} {'fn':>4} {'fp':>4} {'tn':>4}  (labelled breaking: tp caught, fn passed over)",
    ]
    for name, cells in c.matrix().items():
        extra = "  (not in today's rule book)" if name in MORE_RULES else ""
        lines.append(f"{name:<22} {cells['tp']:>4} {cells['fn']:>4} {cells['fp']:>4} {cells['tn']:>4}{extra}")
    wrong = [v for v in c.verdicts if not v.agrees]
    if wrong:
        lines += ["", "disagreements:"]
        for v in wrong:
            said = ("passed" if v.passed else "failed: " + ", ".join(
                [*(f"broke {b}" for b in v.broken), *(f"missed {m}" for m in v.missed)]
                or [f"record refused: {v.run.refused}"]))
            breaks = f" breaking {', '.join(v.run.breaks)}" if v.run.breaks else ""
            lines.append(f"  {v.run.name} ({v.run.label} {v.run.kind}{breaks}): {said}")
    return "\n".join(lines)
