"""The procedures' rules, each named once: its name, what it says, and how a run is caught breaking it.

A rule is caught from the record of a session (radiance_mcp.evals.record) and the agent's final
answer, in one or more of four ways:

- ``refusal``: the server refused a call for this rule: its message ends with ``[rule: NAME]``
  (radiance_mcp.core.errors.RULE_TAG). The attempt breaks the rule, whatever the agent did next: a
  refusal worked around (a reserve dropped, the same probe sent with over_shape=true) is
  still the rule broken.
- ``call``: a call the server accepted but the procedure forbids (``over_shape=true``, a
  plateau claimed on two arms), read off the call's arguments.
- ``trap``: the answer states a figure only a wrong method gives (a ceiling from free memory
  without the engine floor, an older boot's ceiling): the scenario names those figures.
- ``required``: the run must have made a successful call of one of these tools before it
  answered (the ledger read, the step-shape audit, a cold decode probe).

Pure: no I/O, no MCP; the guard rails in the server raise with these names
(``GuardRailError(..., rule="reserve_traced")``), and tests/evals/test_eval_rules.py checks
that every name a raise site uses is one of ``RULES``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from radiance_mcp.core.errors import RULE_TAG

Detection = Literal["refusal", "call", "trap", "required"]

LEDGER_TOOLS = frozenset({
    "read_budget_table", "compute_ceiling", "check_pool_contract", "audit_step_shape", "plan_free_vram",
    "render_gates", "verify_deploy",
})
"""The tools that read the engine's boot ledger."""


@dataclass(frozen=True)
class Rule:
    name: str
    statement: str
    """The rule, in one line."""
    detection: tuple[Detection, ...]
    how: str
    """How a run is caught breaking it, in one line."""
    required_tools: frozenset[str] = field(default_factory=frozenset)
    """For ``required``: a successful call of one of these must come before the answer."""


RULES: tuple[Rule, ...] = (
    Rule("ledger_first", "Every figure comes from the engine's boot ledger, read with a tool before answering.",
         ("required",), "no successful call of a ledger tool in the record", LEDGER_TOOLS),
    Rule("engine_ceiling", "The ceiling is the engine's (settled free less its floor, plus the pair), never free "
         "memory seen from outside the engine.", ("trap",),
         "the answer states a figure read off free memory (the scenario's engine_ceiling traps)"),
    Rule("newest_boot", "Figures come from the newest boot of a log that holds several.", ("trap",),
         "the answer states an older boot's figure (the scenario's newest_boot traps)"),
    Rule("binding_card", "With several cards the smallest ceiling binds.", ("trap",),
         "the answer states a card's figure that does not bind (the scenario's binding_card traps)"),
    Rule("reserve_traced", "Every reserve below the ceiling cites the ledger line of its figure, or is labelled "
         "personal.", ("refusal", "call"),
         "a reserve with neither line nor personal=true in a call, or a refusal tagged reserve_traced"),
    Rule("reserve_not_counted", "A reserve never cites a figure the ceiling already counts (the floor, the arena, "
         "the pair, a total), nor one figure twice.", ("refusal",), "a refusal tagged reserve_not_counted"),
    Rule("argument_names", "Every argument is one the tool takes (a misspelled `reserves` would drop the "
         "reserves).", ("refusal",), "a refusal tagged argument_names"),
    Rule("pair_within_ceiling", "A planned pair stays at or below the ceiling less the reserves.", ("refusal",),
         "a refusal tagged pair_within_ceiling"),
    Rule("pool_contract", "A planned pool holds seqs x max_model_len x rate + per-sequence state + the fixed "
         "checkpoints.", ("refusal",), "a refusal tagged pool_contract"),
    Rule("sampler_rows", "seqs x (1 + spec) stays inside the sampler's exactness bound.", ("refusal",),
         "a refusal tagged sampler_rows"),
    Rule("count_above_window", "Tokens are counted from a refusal above the window (or a tokenize endpoint), "
         "never by a prompt that pays prefill.", ("refusal",), "a refusal tagged count_above_window"),
    Rule("decode_tokens", "A decode rate comes from at least 128 generated tokens (512 preferred).",
         ("refusal", "call"), "decode_probe called with gen_tokens below 128, or a refusal tagged decode_tokens"),
    Rule("probe_within_shape", "A boundary probe sends no more prompts than the ledger backs at once.",
         ("refusal", "call"), "boundary_probe with over_shape=true, or a refusal tagged probe_within_shape"),
    Rule("cold_rate", "A rate is measured on a cold prompt (nonce at its head, thinking off), not taken from a "
         "warm cache or a thinking reply.", ("required",),
         "no successful decode_probe that came back cold and valid", frozenset({"decode_probe"})),
    Rule("no_two_arm_claim", "No plateau or threshold is read off two arms.", ("call",),
         "compare_arms called with a claim on fewer than three arms"),
    Rule("audit_before_image", "The step-shape audit comes before blaming the image or the environment.",
         ("required",), "no successful audit_step_shape call in the record", frozenset({"audit_step_shape"})),
)
BY_NAME = {rule.name: rule for rule in RULES}
RuleName = str

_TAG = re.compile(re.escape(RULE_TAG).replace(r"\{\}", r"([a-z_]+)") + r"\s*\Z")


def rule_of_refusal(text: str) -> str | None:
    """The rule a refusal's text names at its end ('... [rule: reserve_traced]'), if any."""
    match = _TAG.search(text.rstrip())
    return match.group(1) if match else None


def rule(name: str) -> Rule:
    """The rule of that name, or a KeyError naming the rules there are."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no rule named {name!r}; the rules: {', '.join(BY_NAME)}") from None
