"""The rule book: every rule of the two procedures by name, what it says, and the one function that holds it.

A rule lives once, as a pure function at its ``home``; every tool, the gates and the eval scorer ask that
function and hold no copy of it. A rule's answer is a ``Check`` (its name, pass / fail / unchecked, the
arithmetic over the figures it used, their lines, and the remedy), and a refusal raised from a failed check
carries the same data as fields of the error (``GuardRailError.rule``, ``.arithmetic``, ``.remedy``), which the
MCP layer sends as structured data beside the message (app/server.py) and the record keeps.

tests/test_rule_book.py holds the book to the code: every home imports, and every ``rule=`` a raise site
names is a rule here. radiance_mcp.evals.rules says how an eval catches a run breaking each rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from radiance_mcp.core.boot import Line
from radiance_mcp.core.constants import (
    MIN_DECODE_TOKENS,
    PREFERRED_DECODE_TOKENS,
    SAMPLER_ROW_BOUND,
    SLAB_MIB_PER_STEP,
    SLAB_SLOTS_PER_STEP,
)
from radiance_mcp.core.errors import GuardRailError


@dataclass(frozen=True)
class Rule:
    name: str
    statement: str
    """The rule, in one line."""
    home: str
    """module:function (or module:Class.method) of the one place that holds it, below radiance_mcp."""


RULES: tuple[Rule, ...] = (
    Rule("ledger_first", "Every figure comes from the engine's boot ledger, read with a tool before answering.",
         "sources.ledgers:read_boot"),
    Rule("engine_ceiling", "The ceiling is the engine's (settled free less its floor, plus the pair), never free "
         "memory seen from outside the engine.", "core.rules.capacity:card_ceiling"),
    Rule("newest_boot", "Figures come from the newest boot of a log that holds several.",
         "sources.ledgers:read_boot"),
    Rule("binding_card", "With several cards the smallest ceiling binds.", "core.rules.capacity:rank_ceilings"),
    Rule("reserve_traced", "Every reserve below the ceiling cites the ledger line of its figure, or is labelled "
         "personal.", "core.rules.reserves:trace_reserve"),
    Rule("reserve_not_counted", "A reserve never cites a figure the ceiling already counts (the floor, the arena, "
         "the pair, a total), nor one figure twice.", "core.rules.reserves:trace_reserve"),
    Rule("argument_names", "Every argument is one the tool takes (a misspelled `reserves` would drop the "
         "reserves).", "app.arguments:parse_arguments"),
    Rule("pair_within_ceiling", "A planned pair stays at or below the ceiling less the reserves.",
         "core.rules.capacity:pair_within_ceiling"),
    Rule("shared_card", "Services on one physical card spend its headroom once: their pairs' growth together "
         "stays within it.", "core.rules.shared:shared_card"),
    Rule("pool_contract", "A planned pool holds seqs x max_model_len x rate + per-sequence state + the fixed "
         "checkpoints.", "core.rules.capacity:contract_check"),
    Rule("kv_dtype", "radiance's KV cache is bf16 or fp8, one dtype for the whole cache.",
         "core.rules.capacity:kv_dtype"),
    Rule("slab_slope", "Slab MiB buys resident expert slots at the boot's own mover ratio, else the measured "
         f"constant ({SLAB_SLOTS_PER_STEP:,} slots per {SLAB_MIB_PER_STEP:,} MiB).", "core.planning:slab_slope"),
    Rule("sampler_rows", f"seqs x (1 + spec) stays inside the sampler's {SAMPLER_ROW_BOUND}-row exactness bound.",
         "core.rules.sampler:sampler_rows"),
    Rule("count_above_window", "Tokens are counted from a refusal above the window (or a tokenize endpoint), "
         "never by a prompt that pays prefill.", "probes.engine:Engine._guard"),
    Rule("decode_tokens", f"A decode rate comes from at least {MIN_DECODE_TOKENS} generated tokens "
         f"({PREFERRED_DECODE_TOKENS} preferred).",
         "core.rules.probe_verdicts:check_decode_tokens"),
    Rule("probe_within_shape", "A boundary probe sends no more prompts than the ledger backs at once.",
         "core.rules.probe_shape:probe_shape"),
    Rule("plan_boot", "A deploy is verified on the plan's own boot (its pair is the env file's, booted after the "
         "plan's): another boot keeps no prediction.", "core.rules.deploy:plan_boot"),
    Rule("cold_rate", "A rate is measured on a cold prompt (nonce at its head, thinking off), not taken from a "
         "warm cache or a thinking reply.", "core.rules.probe_verdicts:stream_rates"),
    Rule("no_two_arm_claim", "No plateau or threshold is read off two arms.", "core.planning:compare_arms"),
    Rule("audit_before_image", "The step-shape audit comes before blaming the image or the environment.",
         "core.audit.step_shape:audit"),
    Rule("window_from_ledger", "A probe runs at the window the ledger states; a window it contradicts is refused "
         "before anything is sent.", "core.rules.probe_shape:checked_window"),
    Rule("boundary_tokens", "A boundary probe generates enough tokens to hold its marker: one a character, and one "
         "for the space before it.", "core.rules.probe_verdicts:check_boundary_tokens"),
    # The skills' step order: no tool refuses it, so its home is the eval that judges a run's record by it.
    Rule("plan_before_execute", "boundary_probe plans (no execute) before it executes (execute=true).",
         "evals.score:_step"),
    Rule("serve_script_checked", "A serve-script finding comes from check_serve_script after the audit, and the "
         "fix is proven with compare_dry_run after that.", "evals.score:_step"),
    Rule("gates_before_verified", "render_gates renders the plan's gates before verify_deploy calls a deploy "
         "verified.", "evals.score:_step"),
)
BY_NAME = {rule.name: rule for rule in RULES}

Verdict = Literal["pass", "fail", "unchecked"]


@dataclass(frozen=True)
class Check:
    """One rule's answer on one plan: the arithmetic over the figures it used and, failed, the remedy;
    unchecked, why it could not be checked (in ``remedy``: what would let it be)."""

    rule: str
    verdict: Verdict
    arithmetic: str
    lines: tuple[Line, ...] = ()
    remedy: str = ""

    def __post_init__(self) -> None:
        if self.rule not in BY_NAME:
            raise KeyError(f"no rule named {self.rule!r} in the rule book")

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def refusal(self, message: str) -> GuardRailError:
        """The error a tool raises for this failed check: message for the agent, the check's data as fields."""
        return GuardRailError(message, rule=self.rule, arithmetic=self.arithmetic, remedy=self.remedy)

    def enforce(self, message: str) -> Check:
        """This check if it did not fail, else its refusal raised."""
        if self.verdict == "fail":
            raise self.refusal(message)
        return self


def failed(checks: Sequence[Check]) -> list[Check]:
    return [c for c in checks if c.verdict == "fail"]


def verdict(checks: Sequence[Check]) -> bool | None:
    """False if a rule failed; None if none failed but one was not checked; True only if every rule passed."""
    verdicts = {check.verdict for check in checks}
    return False if "fail" in verdicts else None if "unchecked" in verdicts else True
