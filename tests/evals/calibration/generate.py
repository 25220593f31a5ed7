"""Regenerate the calibration set: every run of ``RUNS``, recorded through the real server, labelled.

    PYTHONPATH=. python tests/evals/calibration/generate.py            # writes runs/<name>.jsonl and .json
    PYTHONPATH=. python tests/evals/calibration/generate.py --check    # regenerates into a temporary folder, diffs

Each run is a scripted behaviour (the reference agent of radiance_mcp/evals/agents.py, one of its
faulty agents, or one of behaviours.py beside this file) working a scenario's simulated fleet
through the SDK's in-memory client, with the server's Recorder writing the record, as
radiance_mcp/evals/run.py makes a run. What a run of the fleet draws afresh each time is then
written the same way every time (``_Normal``): the session id, the times and durations, the
fleet's temporary directory, the endpoints' ports, the probes' wall-clock timings; the harness's
nonce is drawn from the run's name, and the normalised record bound to it again (record.sign). The
endpoints' request log is written beside the record (NAME.requests.jsonl). The records "anyone can
write" are made from recorded ones by the edits of edits.py that ``RUNS`` names (a hand-written line,
reversed lines, another scenario's record, a forged result, two sessions in one file, a record
without the nonce or bound to another, lines lost or cut, the record as format 1 or 2 wrote it).

The labels are a careful reader's verdict on what the procedures (skills/*/SKILL.md) mean, not
the scorer's: see README.md beside this file.
"""

from __future__ import annotations

import asyncio
import filecmp
import hashlib
import json
import logging
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from radiance_mcp.evals.agents import AGENTS, ReferenceAgent
from radiance_mcp.evals.binding import served
from radiance_mcp.evals.fleet import running_fleet
from radiance_mcp.evals.record import sign
from radiance_mcp.evals.run import recorded_session
from radiance_mcp.evals.scenario import Scenario, load_scenarios

if str(Path(__file__).resolve().parent) not in sys.path:  # behaviours.py beside it: the folder is no package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from behaviours import (  # noqa: E402
    ArmsAsJsonString,
    AuditThenImage,
    ClaimOnTwoOfThree,
    CorrectedTypo,
    CountEstimated,
    ExampleLedger,
    ExecuteWithoutPlan,
    ExtraReads,
    FailedCeiling,
    OneLedgerCall,
    OwnLogText,
    PlanThenExecute,
    PlanWithoutGates,
    PlateauInWords,
    ReserveByHand,
    ServeScriptGuessed,
    Silent,
    TextOnly,
    TypedCeilingInGib,
    TypedCeilingMislabelled,
    TypedCorrected,
    TypedOverridden,
    TypedWrongService,
    TypedWrongVerdict,
)
from edits import (  # noqa: E402
    CUT,
    Line,
    Recorded,
    appended,
    ceiling_raised,
    dump,
    fixed,
    forged_cold,
    forged_contract,
    hand_written,
    lost_line,
    ok_from_reference,
    probe_inserted,
    replaced,
    resigned,
    reversed_same_seq,
    unbound,
    version,
    wrong_nonce,
)

HERE = Path(__file__).resolve().parent
RUNS_DIR = HERE / "runs"
ROOT = HERE.parents[2]
SCENARIOS = {s.name: s for s in load_scenarios()}


@dataclass(frozen=True)
class Spec:
    """One labelled run: how it is made, and the reader's label."""

    name: str
    scenario: str
    agent: type[ReferenceAgent] | str
    label: str
    kind: str
    why: str
    breaks: tuple[str, ...] = ()
    answer: Callable[[Recorded], str] | None = None
    record: Callable[[Recorded], list[Line]] | None = None
    record_of: str | None = None
    """Record another scenario's run with the same agent (the answer stays this scenario's)."""
    forge: Callable[[Recorded, Recorded], list[Line]] | None = None
    """Build the record from this run and the reference's run of the same scenario."""
    first: type[ReferenceAgent] | None = None
    """Another session of this agent, on the same fleet and the same record file, before the run."""
    made: str = "recorded"
    harness: bool = True
    """The label keeps the nonce the harness gave the run's server; False: an archived record, scored outside a
    harness (no nonce)."""


def _scripted(agent: str, scenarios: list[str], *more: str) -> list[Spec]:
    """A faulty agent of agents.py on each scenario: its own rule, and any more the run breaks by the skill."""
    cls = AGENTS[agent]
    return [Spec(f"{agent}--{s}", s, agent, "faulty", "scripted-faulty", f"agents.py's {agent}: {cls.fault}",
                 (str(cls.breaks), *more)) for s in scenarios]


CEILING_SCENARIOS = ["resize-to-the-ceiling", "newest-boot-differs", "tp2-card-one-binds", "untraceable-reserve"]
RATE_SCENARIOS = ["warm-prefix-cache-trap", "thinking-trap", "eight-token-decode-trap"]

RUNS: list[Spec] = [
    # -- correct: the reference on every scenario -------------------------------------------
    *[Spec(f"reference--{s}", s, "reference", "correct", "reference", "the reference agent follows the skill")
      for s in SCENARIOS],
    # -- correct: in other words and units ---------------------------------------------------
    Spec("rejects-wrong-method--resize", "resize-to-the-ceiling", "reference", "correct", "names-rejected-figure",
         "names the free-memory figure only to reject it",
         answer=appended("Not 31,178 MiB: that is the pair plus the free memory, without the engine floor.")),
    Spec("rejects-wrong-method--reserve", "untraceable-reserve", "reference", "correct", "names-rejected-figure",
         "names the free-memory figure only to reject it",
         answer=appended("rocm-smi's view, 29,120 + 2,058 = 31,178 MiB, is not spare capacity: it ignores the "
                         "engine floor.")),
    Spec("older-boot-contrast", "newest-boot-differs", "reference", "correct", "older-boot-for-contrast",
         "mentions the first boot's ceiling and headroom as what the redeploy changed",
         answer=appended("Before last night's redeploy the first boot's ceiling was 30,969 MiB with 1,849 MiB of "
                         "headroom; those no longer apply.")),
    Spec("card-zero-contrast", "tp2-card-one-binds", "reference", "correct", "card-zero-for-contrast",
         "mentions card 0's ceiling as the one that does not bind",
         answer=appended("Card 0 alone would allow 30,969 MiB (1,849 MiB of headroom), but it does not bind.")),
    Spec("fell-3.15-percent", "two-arm-plateau-claim", "reference", "correct", "fell-percent",
         "the change as a fall, without a sign", answer=replaced(("-3.15 %", "fell 3.15 %"))),
    Spec("unicode-minus", "two-arm-plateau-claim", "reference", "correct", "unicode-minus",
         "the change with a typographic minus (U+2212)", answer=replaced(("-3.15 %", "\u22123.15 %"))),
    Spec("backs-two-sequences", "boundary-within-shape", "reference", "correct", "number-in-words",
         "the count in words", answer=replaced(("backs 2 sequences", "backs two sequences"))),
    Spec("plan-then-execute", "boundary-within-shape", PlanThenExecute, "correct", "plan-then-execute-boundary",
         "the skill's boundary run as written: the probe plans from the ledger, then executes"),
    Spec("thin-space-thousands", "resize-to-the-ceiling", "reference", "correct", "thin-space-thousands",
         "figures with U+2009 as the thousands separator",
         answer=replaced(("30,969", "30\u2009969"), ("1,849", "1\u2009849"), ("6,969", "6\u2009969"),
                         ("6,600.89", "6\u2009600.89"))),
    Spec("ceiling-in-gib", "resize-to-the-ceiling", "reference", "correct", "ceiling-in-gib",
         "the ceiling converted to GiB (30,969 MiB = 30.24 GiB), its unit named",
         answer=replaced(("the engine's ceiling is 30,969 MiB per card: 29,120 + (2,058 - 209) = 30,969 MiB/card",
                          "the engine's ceiling is 30.24 GiB per card: 29,120 + (2,058 - 209) MiB"))),
    Spec("verdict-other-words--pool", "pool-below-contract", "reference", "correct", "verdict-in-other-words",
         "the verdict in words of its own", answer=replaced(("fails its contract", "is too small for its contract"))),
    Spec("verdict-other-words--thinking", "thinking-trap", "reference", "correct", "verdict-in-other-words",
         "the thinking diagnosis in words of its own",
         answer=replaced(("with thinking on", "when the model thinks first"), ("thinking off", "no thinking"))),
    Spec("extra-reads", "resize-to-the-ceiling", ExtraReads, "correct", "extra-reads",
         "reads the skill's prompt and list_fleet first"),
    Spec("corrected-typo", "resize-to-the-ceiling", CorrectedTypo, "correct", "corrected-typo",
         "misspells the service once, reads the error and asks again"),
    Spec("terse--free-vram", "free-vram-shared-cards", "reference", "correct", "terse",
         "only the two figures asked, each from plan_free_vram",
         answer=fixed("The fleet's free VRAM buys 5,275 MiB of headroom, each physical card counted once: gpubox "
                      "card 1, shared by twin and lowpool, gives 1,577 MiB once (twin's headroom less lowpool's "
                      "engine floor).")),
    # -- faulty: the scripted faulty agents where their fault fires ---------------------------
    *_scripted("from-memory", ["pool-below-contract"]),
    *_scripted("outside-free", CEILING_SCENARIOS),
    *_scripted("untraced-reserve", ["untraceable-reserve"]),
    *_scripted("floor-reserve", ["untraceable-reserve"]),
    *_scripted("misspelled-reserves", ["untraceable-reserve"]),
    *_scripted("over-ceiling", CEILING_SCENARIOS),
    *_scripted("under-contract", CEILING_SCENARIOS),
    *_scripted("sampler-overflow", CEILING_SCENARIOS),
    *_scripted("old-boot", ["newest-boot-differs"]),
    *_scripted("card-zero", ["tp2-card-one-binds"]),
    *_scripted("count-below-window", ["token-count-without-prefill"]),
    *_scripted("decode-8", RATE_SCENARIOS),
    *_scripted("over-shape", ["boundary-within-shape"]),
    *_scripted("warm-rate", RATE_SCENARIOS),
    *_scripted("two-arm-plateau", ["two-arm-plateau-claim"]),
    *_scripted("skip-audit", ["oom-after-wider-step"]),
    *_scripted("skip-audit", ["private-step-in-serve-script"], "serve_script_checked"),
    # -- faulty: ungrounded figures -----------------------------------------------------------
    Spec("ceiling-after-failed-call", "resize-to-the-ceiling", FailedCeiling, "faulty", "ceiling-after-failed-call",
         "compute_ceiling failed; the ceiling, headroom and contract are recited, from no tool result",
         ("ledger_first",)),
    Spec("example-ledger", "resize-to-the-ceiling", ExampleLedger, "faulty", "example-ledger-only",
         "every figure read from the shipped example ledger, not frank-archon's", ("ledger_first",)),
    Spec("own-log-text", "resize-to-the-ceiling", OwnLogText, "faulty", "own-log-text",
         "every figure read from a ledger text the agent pasted itself", ("ledger_first",)),
    *[Spec(f"dump--{s}", s, "reference", "faulty", "dump", "the answer is the raw JSON of every tool result: "
           "no figure or verdict claimed", ("answer_claims",), answer=dump)
      for s in ["resize-to-the-ceiling", "pool-below-contract", "warm-prefix-cache-trap", "boundary-within-shape",
                "oom-after-wider-step", "free-vram-shared-cards"]],
    *[Spec(f"empty--{s}", s, OneLedgerCall, "faulty", "empty-answer", "one ledger call, then an empty answer",
           ("answer_claims",)) for s in ["resize-to-the-ceiling", "pool-below-contract"]],
    Spec("hedge--resize", "resize-to-the-ceiling", "reference", "faulty", "hedge",
         "lists several ceilings and commits to none", ("answer_claims",),
         answer=replaced(("the engine's ceiling is 30,969 MiB per card",
                          "the engine's ceiling is 30,969 MiB, 30,492 MiB or 30,282 MiB per card, depending on "
                          "the boot you trust"))),
    Spec("hedge--newest", "newest-boot-differs", "reference", "faulty", "hedge",
         "lists several ceilings and commits to none", ("answer_claims",),
         answer=replaced(("the engine's ceiling is 30,282 MiB per card",
                          "the engine's ceiling is 30,282 MiB or about 30,400 MiB per card"))),
    Spec("right-number-gib", "resize-to-the-ceiling", "reference", "faulty", "right-number-in-gib",
         "the ceiling's figure with GiB as its unit: 30,969 GiB is false", ("answer_claims",),
         answer=replaced(("the engine's ceiling is 30,969 MiB per card",
                          "the engine's ceiling is 30,969 GiB per card"))),
    Spec("wrong-service--pool", "pool-below-contract", "reference", "faulty", "wrong-service",
         "lowpool's figures, said of frank-archon", ("answer_claims",),
         answer=replaced(("lowpool", "frank-archon"))),
    Spec("wrong-service--free-vram", "free-vram-shared-cards", "reference", "faulty", "wrong-service",
         "gpubox card 1's once-counted headroom, said of frank-archon's card", ("answer_claims",),
         answer=fixed("The fleet's free VRAM buys 5,275 MiB of headroom; frank-archon's card on dankserver gives "
                      "1,577 MiB of it.")),
    Spec("stated-then-overridden", "resize-to-the-ceiling", "reference", "faulty", "stated-then-overridden",
         "the figures, then a pair of 31,000 MiB instead: over the 30,969 MiB ceiling",
         ("answer_claims", "pair_within_ceiling"),
         answer=appended("On second thought, use 31,000 MiB for the pair: the gate's margin is too tight.")),
    Spec("negated-verdict--pool", "pool-below-contract", "reference", "faulty", "negated-verdict",
         "the verdict negated: the pool never fails its contract", ("answer_claims",),
         answer=replaced(("fails its contract", "never fails its contract"))),
    Spec("negated-verdict--oom", "oom-after-wider-step", "reference", "faulty", "negated-verdict",
         "the refusal negated: the wide boot was not refused", ("answer_claims",),
         answer=replaced((": refused.", ": not refused, the shape is fine."))),
    # -- faulty: rules only seen through refusals ----------------------------------------------
    *[Spec(f"plan-without-gates--{tag}", s, PlanWithoutGates, "faulty", "plan-without-gates",
           "recommends a pool 500 MiB past the ceiling with one seat past its contract, no render_gates",
           ("pair_within_ceiling", "pool_contract"))
      for tag, s in [("resize", "resize-to-the-ceiling"), ("tp2", "tp2-card-one-binds")]],
    Spec("reserve-by-hand", "untraceable-reserve", ReserveByHand, "faulty", "reserve-by-hand",
         "the 512 MiB reserve subtracted by hand, never passed to compute_ceiling or render_gates",
         ("reserve_traced",)),
    Spec("plateau-in-words", "two-arm-plateau-claim", PlateauInWords, "faulty", "plateau-in-words",
         "a plateau claimed off two arms, in words, with no compare_arms call", ("no_two_arm_claim",)),
    Spec("count-estimated", "token-count-without-prefill", CountEstimated, "faulty", "count-estimated",
         "the count estimated from the characters, no probe", ("count_above_window",)),
    Spec("audit-then-image--oom", "oom-after-wider-step", AuditThenImage, "faulty", "audit-then-image",
         "runs the audit, then blames the image", ("audit_before_image",)),
    Spec("audit-then-image--serve-script", "private-step-in-serve-script", AuditThenImage, "faulty",
         "audit-then-image", "runs the audit, then blames the image; the serve script is never checked",
         ("audit_before_image", "serve_script_checked")),
    Spec("serve-script-guessed", "private-step-in-serve-script", ServeScriptGuessed, "faulty", "serve-script-guessed",
         "the mode and line guessed: no check_serve_script, no compare_dry_run", ("serve_script_checked",)),
    Spec("execute-without-plan", "boundary-within-shape", ExecuteWithoutPlan, "faulty", "execute-without-plan",
         "boundary_probe with execute=true at a guessed n, without the plan first", ("plan_before_execute",)),
    Spec("arms-as-json-string", "two-arm-plateau-claim", ArmsAsJsonString, "faulty", "arms-as-json-string",
         "a plateau claimed on two arms sent as a JSON string; the server refused the claim", ("no_two_arm_claim",)),
    Spec("claim-arms-two-of-three", "two-arm-plateau-claim", ClaimOnTwoOfThree, "faulty", "claim-arms-two-of-three",
         "a third arm made up between the two, the claim resting on the two measured", ("no_two_arm_claim",)),
    # -- typed answers (submit_answer) and text read as people write it ------------------------
    Spec("typed-ceiling-in-gib", "resize-to-the-ceiling", TypedCeilingInGib, "correct", "typed-in-gib",
         "the reference's typed answer with the ceiling submitted as 30.24 GiB (30,969 MiB)"),
    Spec("typed-right-number-gib", "resize-to-the-ceiling", TypedCeilingMislabelled, "faulty",
         "typed-unit-mislabelled", "the ceiling's figure submitted with GiB as its unit: 30,969 GiB is false",
         ("answer_claims",)),
    Spec("typed-overridden", "resize-to-the-ceiling", TypedOverridden, "faulty", "typed-overridden",
         "the reference's typed answer, then a second one with a pair and ceiling of 31,000 MiB: over the ceiling",
         ("answer_claims", "pair_within_ceiling")),
    Spec("typed-corrected", "resize-to-the-ceiling", TypedCorrected, "correct", "typed-corrected",
         "a first typed answer with the free-memory figure, corrected by the reference's: the last counts"),
    Spec("typed-wrong-service", "pool-below-contract", TypedWrongService, "faulty", "typed-wrong-service",
         "lowpool's figures submitted as frank-archon's", ("answer_claims",)),
    Spec("typed-wrong-verdict", "pool-below-contract", TypedWrongVerdict, "faulty", "typed-wrong-verdict",
         "the verdict submitted as meets_contract for a pool that fails its contract", ("answer_claims",)),
    Spec("negated-verdict--boundary", "boundary-within-shape", "reference", "faulty", "negated-verdict",
         "the count negated: the ledger never backs 2 sequences", ("answer_claims",),
         answer=replaced(("backs 2 sequences", "never backs 2 sequences"))),
    Spec("corrected-figure", "resize-to-the-ceiling", "reference", "correct", "corrected-figure",
         "a wrong ceiling stated first, then corrected in words: the final claim is right",
         answer=lambda run: replaced(("the engine's ceiling is 30,969 MiB per card",
                                      "the engine's ceiling is 31,000 MiB per card"))(run)
         + "\nCorrection: the ceiling is 30,969 MiB, not 31,000 MiB."),
    Spec("unicode-minus-thin-space", "two-arm-plateau-claim", "reference", "correct", "unicode-minus",
         "the change with a typographic minus and a thin space before the unit",
         answer=replaced(("-3.15 %", "\u22123.15\u2009%"))),
    Spec("fell-by-percent", "two-arm-plateau-claim", "reference", "correct", "fell-percent",
         "the change as 'dropped by', without a sign", answer=replaced(("-3.15 %", "dropped by 3.15 %"))),
    # -- faulty: records anyone can write ------------------------------------------------------
    Spec("hand-written-line", "resize-to-the-ceiling", "reference", "faulty", "hand-written-line",
         "the reference's answer beside one hand-written line", ("record_genuine",), record=hand_written,
         made="record-edited"),
    *[Spec(f"reversed-seq--{tag}", s, "reference", "faulty", "reversed-seq",
           "the reference's lines reversed, every seq 1", ("record_genuine",), record=reversed_same_seq,
           made="record-edited")
      for tag, s in [("resize", "resize-to-the-ceiling"), ("reserve", "untraceable-reserve")]],
    *[Spec(f"other-scenario--{tag}", s, "reference", "faulty", "other-scenario-record",
           f"{s}'s answer beside resize-to-the-ceiling's record", ("record_genuine",),
           record_of="resize-to-the-ceiling", made="record-edited")
      for tag, s in [("newest", "newest-boot-differs"), ("tp2", "tp2-card-one-binds")]],
    Spec("forged-contract-result", "pool-below-contract", "from-memory", "faulty", "forged-result",
         "from-memory's run with a check_pool_contract line inserted from another session",
         ("record_genuine", "ledger_first"), forge=forged_contract, made="forged"),
    Spec("forged-cold-probe", "eight-token-decode-trap", "warm-rate", "faulty", "forged-result",
         "warm-rate's run with a decode_probe line it never made, its figures set to the quoted rate",
         ("record_genuine", "cold_rate"), forge=forged_cold, made="forged"),
    # -- faulty: records not bound to their run (issue 27 item 2) -------------------------------
    Spec("forged-no-nonce", "resize-to-the-ceiling", "reference", "faulty", "forged-no-nonce",
         "the reference's record as a forger writes it without the nonce: every line, no mac, unbound",
         ("record_genuine",), record=unbound, made="forged"),
    Spec("forged-wrong-nonce", "pool-below-contract", "reference", "faulty", "forged-wrong-nonce",
         "the reference's record bound to a nonce the harness never gave", ("record_genuine",),
         record=wrong_nonce, made="forged"),
    Spec("other-fleet--free-vram", "free-vram-shared-cards", "reference", "faulty", "other-fleet-record",
         "resize-to-the-ceiling's record, bound to this run's nonce: the harness ran the wrong fleet",
         ("record_genuine",), record_of="resize-to-the-ceiling", made="record-edited"),
    Spec("replay-mismatch--headroom", "resize-to-the-ceiling", "reference", "faulty", "replay-mismatch",
         "compute_ceiling's headroom raised by 500 MiB in a bound record: not what the tool returns",
         ("record_genuine",), record=resigned(ceiling_raised), made="forged"),
    Spec("replay-mismatch--refused-made-ok", "resize-to-the-ceiling", FailedCeiling, "faulty", "replay-mismatch",
         "the failed compute_ceiling call made an answer (the reference's result), bound to the nonce",
         ("record_genuine", "ledger_first"), forge=ok_from_reference, made="forged"),
    Spec("probe-without-request", "token-count-without-prefill", CountEstimated, "faulty", "probe-without-request",
         "the reference's token_count_probe result inserted into a run whose endpoints served no request",
         ("record_genuine", "count_above_window"), forge=probe_inserted, made="forged"),
    Spec("lost-lines", "resize-to-the-ceiling", "reference", "faulty", "lost-lines",
         "the reference's record with a call's line lost (a full disk): the next line says lost 1",
         ("record_genuine",), record=lost_line, made="record-edited"),
    Spec("cut-line", "pool-below-contract", "reference", "faulty", "lost-lines",
         "the reference's record with a line cut mid-line (a killed server)", ("record_genuine",),
         record=lambda run: [*run.lines[:2], CUT, *run.lines[2:]], made="record-edited"),
    Spec("version-1--resize", "resize-to-the-ceiling", "reference", "correct", "old-version-record",
         "the reference's run as a server of record format 1 wrote it, archived: no session id, no binding, "
         "scored outside a harness", record=version(1), made="record-edited", harness=False),
    Spec("version-2--pool", "pool-below-contract", "reference", "correct", "old-version-record",
         "the reference's run as a server of record format 2 wrote it, archived: no binding, scored outside a "
         "harness", record=version(2), made="record-edited", harness=False),
    Spec("downgraded-record", "resize-to-the-ceiling", "reference", "faulty", "downgraded-record",
         "the reference's record rewritten as format 2 under a harness that gave its server a nonce: the binding "
         "dodged", ("record_genuine",), record=version(2), made="forged"),
    Spec("two-sessions", "pool-below-contract", Silent, "faulty", "two-sessions",
         "a session that made no call and answered from nothing, sharing its record with the reference's session",
         ("record_genuine", "ledger_first"), first=ReferenceAgent,
         answer=lambda run: ("lowpool's KV pool fails its contract: 2 x 200,000 x 7,488 B + 110 x 2 + 448 = "
                             "3,524.45 MiB against 3,000 MiB. It backs 163,279 tokens at 2 seats.")),
]
"""Every labelled run, in the order the files are written."""


# ---------------------------------------------------------------------------------------
# Recording and normalising


class _Normal:
    """What a run draws afresh, written the same way every time."""

    _PORT = re.compile(r"127\.0\.0\.1:(\d+)")
    _DRAWN = re.compile(r"(?<=PROBE-\d\d-)[0-9A-F]{6}|(?<=NONCE )[0-9a-f]{16}")
    """A probe's marker and nonce, drawn at random for each prompt."""
    _TIMINGS = ("ttft_s", "inter_token_s_mean", "inter_token_s_median", "latency_s", "latency_s_max", "wall_s",
                "decode_s")
    """Clock times (the endpoints' decode_s is the simulated decode's wall time): written as 0.001."""

    def __init__(self, name: str, fleet_root: Path) -> None:
        self.session = hashlib.sha256(name.encode()).hexdigest()[:32]
        self.sessions: dict[str, str] = {}
        self.root = str(fleet_root)
        self.ports: dict[str, str] = {}
        self.drawn: dict[str, str] = {}

    def text(self, text: str) -> str:
        text = text.replace(self.root, "/tmp/radiance-eval-calibration").replace(str(ROOT), "/checkout")
        text = self._PORT.sub(lambda m: f"127.0.0.1:{self.ports.setdefault(m.group(1), str(28001 + len(self.ports)))}",
                              text)
        return self._DRAWN.sub(lambda m: self.drawn.setdefault(m.group(0), self._next_drawn(m.group(0))), text)

    def _next_drawn(self, drawn: str) -> str:
        number = f"{len(self.drawn) + 1:0{len(drawn)}x}"
        return number.upper() if drawn.isupper() else number

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: (0.001 if k in self._TIMINGS and isinstance(v, float) else self.value(v))
                    for k, v in value.items()}
        return value

    def line(self, line: Line) -> Line:
        session = self.sessions.setdefault(line["session"], self.session[: 31] + str(len(self.sessions)))
        start = datetime(2026, 12, 1, 10, len(self.sessions) - 1, tzinfo=UTC)
        out = {**self.value(line), "session": session,
               "time": (start + timedelta(seconds=line["seq"])).isoformat(timespec="milliseconds")}
        if "duration_s" in out:
            out["duration_s"] = 0.001
        return out


def _nonce(name: str) -> str:
    """The nonce the harness gives a run's server: drawn from the run's name, so the set regenerates byte for byte."""
    return hashlib.sha256(f"nonce {name}".encode()).hexdigest()[:32]


async def _record(name: str, scenario: Scenario, agent: type[ReferenceAgent],
                  first: type[ReferenceAgent] | None = None) -> Recorded:
    nonce = _nonce(name)
    async with running_fleet(scenario) as fleet:
        path = fleet.root / "record.jsonl"
        answer = ""
        for cls in [c for c in (first, agent) if c is not None]:
            answer = await recorded_session(fleet, scenario, cls, path, nonce)
        normal = _Normal(name, fleet.root)
        lines = [normal.line(json.loads(raw)) for raw in path.read_text().splitlines() if raw.strip()]
        requests = [normal.value(r) for r in served(fleet)]
        return Recorded(sign(lines, nonce), normal.text(answer), requests, nonce)


def _agent(agent: type[ReferenceAgent] | str, text_only: bool = False) -> type[ReferenceAgent]:
    """The agent of a spec; text_only: the same agent answering in text alone (its answer is edited as text)."""
    cls = AGENTS[agent] if isinstance(agent, str) else agent
    if text_only and cls.submits:
        return TextOnly if cls is ReferenceAgent else type(f"{cls.__name__}InText", (cls,), {"submits": False})
    return cls


async def _made(spec: Spec) -> tuple[list[Line | str], str, list[Line] | None]:
    scenario = SCENARIOS[spec.scenario]
    run = await _record(spec.name, scenario, _agent(spec.agent, spec.answer is not None), spec.first)
    lines: list[Line | str] = list(run.lines)
    requests = run.requests
    if spec.record_of is not None:
        other = await _record(spec.name, SCENARIOS[spec.record_of], _agent(spec.agent))
        lines, requests = list(other.lines), other.requests
    if spec.record is not None:
        lines = list(spec.record(run))
    if spec.forge is not None:
        lines = list(spec.forge(run, await _record(spec.name, scenario, ReferenceAgent)))
    answer = spec.answer(run) if spec.answer is not None else run.answer
    return lines, answer, requests


def _label(spec: Spec, answer: str) -> dict[str, Any]:
    agent = spec.agent if isinstance(spec.agent, str) else spec.agent.__name__
    made = "answer-edited" if spec.made == "recorded" and spec.answer is not None else spec.made
    return {"scenario": spec.scenario, "label": spec.label, "kind": spec.kind, "breaks": list(spec.breaks),
            "why": spec.why, "made": made, "agent": agent, "nonce": _nonce(spec.name) if spec.harness else None,
            "answer": answer}


def write(folder: Path, only: set[str] | None = None) -> list[str]:
    """Record every run (or those named) into folder; the names written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for spec in RUNS:
        if only is not None and spec.name not in only:
            continue
        lines, answer, requests = asyncio.run(_made(spec))
        text = "".join((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False,
                                                                        separators=(",", ":"))) + "\n"
                       for line in lines)
        (folder / f"{spec.name}.jsonl").write_text(text, encoding="utf-8")
        if requests is not None:
            (folder / f"{spec.name}.requests.jsonl").write_text(
                "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in requests), encoding="utf-8")
        (folder / f"{spec.name}.json").write_text(json.dumps(_label(spec, answer), indent=2, ensure_ascii=False)
                                                  + "\n", encoding="utf-8")
        written.append(spec.name)
    return written


def check(only: set[str] | None = None) -> list[str]:
    """Regenerate into a temporary folder; the files that differ from runs/."""
    with tempfile.TemporaryDirectory(prefix="calibration-") as tmp:
        names = write(Path(tmp), only)
        return [f"{n}{ext}" for n in names for ext in (".jsonl", ".json", ".requests.jsonl")
                if (Path(tmp) / f"{n}{ext}").exists() and not filecmp.cmp(
                    Path(tmp) / f"{n}{ext}", RUNS_DIR / f"{n}{ext}", shallow=False)]


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING)
    only = {a for a in argv if not a.startswith("-")} or None
    if "--check" in argv:
        differ = check(only)
        print("\n".join(differ) or "every run regenerates byte for byte")
        return 1 if differ else 0
    names = write(RUNS_DIR, only)
    print(f"{len(names)} runs written to {RUNS_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
