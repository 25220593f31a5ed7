"""How an eval catches a run breaking each rule of the rule book (radiance_mcp.core.rules.book).

The rule book says what each rule is and where it lives; this says how a run is caught breaking
it, from the record of a session (radiance_mcp.evals.record) and the agent's final answer, in one
or more of these ways:

- ``refusal``: the server refused a call for this rule: the error result's structured data names
  it (core.errors.REFUSAL_META; the record's ``rule``). The attempt breaks the rule, whatever the
  agent did next: a refusal worked around (a reserve dropped, the same probe sent with
  over_shape=true) is still the rule broken.
- ``call``: a call the server accepted but the procedure forbids (``over_shape=true``, a
  plateau claimed on two arms), read off the call's arguments.
- ``trap``: the answer states a figure only a wrong method gives (a ceiling from free memory
  without the engine floor, an older boot's ceiling): the scenario names those figures.
- ``required``: the run must have made a successful call of one of these tools before it
  answered (the ledger read, the step-shape audit, a cold decode probe, a token-count probe).
- ``plan``: the plan the answer gives (submitted, or the flags its text recommends) fails the
  rule book's check against the run's own results (radiance_mcp.evals.plans), with or without
  render_gates.
- ``answer``: the answer says what the run does not back (the image blamed after an audit that
  found the step shape; a reserve subtracted that no call was given).

``STEPS`` are the order the skills give their steps in (plan before execute; audit, then the
serve-script check, then the dry run; gates before a deploy is called verified): no tool refuses
them, so the evals judge them from the record's order; their statements are the book's.

Pure: no I/O, no MCP. tests/test_rule_book.py checks that every rule here is one of the book's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from radiance_mcp.core.rules import book

Detection = Literal["refusal", "call", "trap", "required", "plan", "answer"]

LEDGER_TOOLS = frozenset({
    "read_budget_table", "compute_ceiling", "check_pool_contract", "audit_step_shape", "plan_free_vram",
    "render_gates", "verify_deploy", "boundary_probe",
})
"""The tools that read the engine's boot ledger (boundary_probe reads it for the shape it backs)."""


@dataclass(frozen=True)
class Rule:
    name: str
    detection: tuple[Detection, ...]
    how: str
    """How a run is caught breaking it, in one line."""
    required_tools: frozenset[str] = field(default_factory=frozenset)
    """For ``required``: a successful call of one of these must come before the answer."""
    exercised_by: frozenset[str] | None = None
    """The tools whose calls (accepted or refused) put the rule to the test; None: every call (argument_names).
    A rule judged by ``required`` or ``trap`` is exercised by the scenario itself, one judged by ``plan`` by the
    answer's plan too; a rule nothing exercised is not judged."""

    @property
    def statement(self) -> str:
        """The rule, in one line, as the rule book states it."""
        return book.BY_NAME[self.name].statement


def _refused(name: str, *tools: str) -> Rule:
    return Rule(name, ("refusal",), f"a refusal naming {name}", exercised_by=frozenset(tools))


_RESERVES = frozenset({"compute_ceiling", "render_gates", "plan_free_vram", "check_pool_contract"})
_PLANS = frozenset({"render_gates", "check_pool_contract", "verify_deploy", "plan_free_vram"})
_BOUNDARY = frozenset({"boundary_probe"})


RULES: tuple[Rule, ...] = (
    Rule("ledger_first", ("required",), "no successful call of a ledger tool in the record", LEDGER_TOOLS),
    Rule("engine_ceiling", ("trap",),
         "the answer states a figure read off free memory (the scenario's engine_ceiling traps)"),
    Rule("newest_boot", ("trap",), "the answer states an older boot's figure (the scenario's newest_boot traps)"),
    Rule("binding_card", ("trap",),
         "the answer states a card's figure that does not bind (the scenario's binding_card traps)"),
    Rule("reserve_traced", ("refusal", "call", "answer"),
         "a reserve with neither line nor personal=true in a call, a refusal naming reserve_traced, or the answer "
         "taking a reserve of a figure no call was given", exercised_by=_RESERVES),
    _refused("reserve_not_counted", *_RESERVES),
    Rule("argument_names", ("refusal",), "a refusal naming argument_names"),
    Rule("pair_within_ceiling", ("refusal", "plan"),
         "a refusal naming pair_within_ceiling, or the answer's plan over the ceiling the run read",
         exercised_by=_PLANS),
    _refused("shared_card", "render_gates", "plan_free_vram", "verify_deploy"),
    Rule("pool_contract", ("refusal", "plan"),
         "a refusal naming pool_contract, or the answer's plan under the contract the run priced",
         exercised_by=_PLANS),
    _refused("sampler_rows", *_PLANS),
    Rule("count_above_window", ("refusal", "required"),
         "a refusal naming count_above_window, or (listed) no successful token_count_probe",
         frozenset({"token_count_probe"})),
    Rule("decode_tokens", ("refusal", "call"),
         "decode_probe called with gen_tokens below 128, or a refusal naming decode_tokens",
         exercised_by=frozenset({"decode_probe"})),
    Rule("probe_within_shape", ("refusal", "call"),
         "boundary_probe with over_shape=true, or a refusal naming probe_within_shape", exercised_by=_BOUNDARY),
    Rule("cold_rate", ("required",), "no successful decode_probe that came back cold and valid",
         frozenset({"decode_probe"})),
    Rule("no_two_arm_claim", ("call",), "compare_arms called with a claim on fewer than three arms",
         exercised_by=frozenset({"compare_arms"})),
    Rule("audit_before_image", ("required", "answer"),
         "no successful audit_step_shape call in the record, or the answer blames the image or the environment "
         "after an audit that refused the candidate's step shape", frozenset({"audit_step_shape"})),
    _refused("window_from_ledger", "token_count_probe", "boundary_probe"),
    _refused("boundary_tokens", *_BOUNDARY),
)
BY_NAME = {rule.name: rule for rule in RULES}

STEPS: dict[str, str] = {name: book.BY_NAME[name].statement
                         for name in ("plan_before_execute", "serve_script_checked", "gates_before_verified")}
"""The skills' step order: rule name -> statement (judged by radiance_mcp.evals.score from the record's order)."""
NAMES: tuple[str, ...] = (*BY_NAME, *STEPS)
"""Every rule a run is judged by, the rule book's then the step order's: the names a scenario may list."""
RuleName = str


def rule(name: str) -> Rule:
    """The rule of that name, or a KeyError naming the rules there are."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no rule named {name!r}; the rules: {', '.join(BY_NAME)}") from None
