"""Tool descriptions quote the same numbers the code computes with (one home for each fact)."""

from __future__ import annotations

import inspect
import re

import pytest

from radiance_mcp import constants
from radiance_mcp.capacity import REFUSAL
from radiance_mcp.tools import TOOLS

DOCS = {spec.name: inspect.getdoc(spec.run) or "" for spec in TOOLS}
RATE = constants.DEFAULT_MODEL.rate_bytes_per_token

# (tool, text the docstring must hold, built from the constant it states)
QUOTED = [
    ("compute_ceiling", f"{constants.WORKED_PAIR_MIB:,} + (2,058 - 209) = {constants.WORKED_CEILING_MIB:,} MiB/card"),
    ("compute_ceiling", f"about {constants.AT_CEILING_WORST_FREE_MIB} MiB free"),
    ("check_pool_contract", f"{constants.DEFAULT_MODEL.per_seq_mib} * seqs + {constants.DEFAULT_MODEL.fixed_mib}"),
    ("check_pool_contract", f"{RATE['fp8']:,} B per token"),
    ("check_pool_contract", f"{RATE['bf16']:,} B for bf16"),
    ("check_pool_contract", f"({RATE['bf16'] / RATE['fp8']:.2f}x, not 2x"),
    ("check_pool_contract", f"{constants.DEFAULT_MODEL.per_seq_mib} MiB of recurrent state"),
    ("check_pool_contract", f"{constants.DEFAULT_MODEL.fixed_mib} MiB of prefix checkpoints"),
    ("check_pool_contract", REFUSAL.format(window="N").split(",")[0]),
]


@pytest.mark.parametrize(("tool", "text"), QUOTED)
def test_docstring_quotes_the_constant(tool: str, text: str) -> None:
    assert text in " ".join(DOCS[tool].split()), f"{tool}'s docstring should say {text!r}"


def test_every_tool_has_a_rule_in_its_description() -> None:
    for name, doc in DOCS.items():
        assert len(doc.split("\n\n")) >= 2 or len(doc) > 200, f"{name}: describe the rule and its traps"


def test_docstring_numbers_are_known_figures() -> None:
    """A number written in a ledger tool's docstring must be one the constants produce."""
    known = {
        f"{n:,}"
        for n in (
            constants.WORKED_PAIR_MIB, constants.WORKED_CEILING_MIB, constants.AT_CEILING_WORST_FREE_MIB,
            RATE["fp8"], RATE["bf16"],
            constants.DEFAULT_MODEL.per_seq_mib, constants.DEFAULT_MODEL.fixed_mib, 2_058, 209,
        )
    } | {f"{RATE['bf16'] / RATE['fp8']:.2f}", "0.01", "3.25", "2026-10-13", "2", "1", "400"}  # 400: the HTTP status
    for name in ("compute_ceiling", "check_pool_contract", "read_budget_table"):
        for number in re.findall(r"(?<![\w-])\d[\d,.-]*\d|\b\d\b", DOCS[name]):
            assert number.rstrip(".,") in known, f"{name}: {number} is not a figure from radiance_mcp.constants"
