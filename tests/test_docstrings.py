"""Tool descriptions an agent can afford and act on (issue 11): what, when, the rule, what next;
no site's names or figures (those live in examples); every number a known constant."""

from __future__ import annotations

import inspect
import re

import pytest

from radiance_mcp.core import constants
from radiance_mcp.tools import TOOLS

DOCS = {spec.name: inspect.getdoc(spec.run) or "" for spec in TOOLS}
SITE_WORDS = ("dankserver", "frank-archon", "frank_archon", "FRANK_ARCHON", "2026-10-13", "qwen38", "PHRASEBOOK",
              "seed", "vram_budget.cpp")
SITE_FIGURES = (f"{constants.WORKED_PAIR_MIB:,}", f"{constants.WORKED_CEILING_MIB:,}", "2,058", "209", "200000",
                "200,000", "202,777", "271.25")


@pytest.mark.parametrize("name", sorted(DOCS))
def test_a_description_says_what_when_the_rule_and_next(name: str) -> None:
    doc = " ".join(DOCS[name].split())
    what, _, rest = doc.partition(" When: ")
    assert what and rest, f"{name}: a sentence of what it does, then 'When: ...'"
    assert "Rule:" in rest or name == "list_fleet", f"{name}: the rule it keeps"
    assert len(doc) <= 520, f"{name}: {len(doc)} characters; an agent pays for every one on every turn"


@pytest.mark.parametrize("name", sorted(DOCS))
def test_a_description_names_no_site(name: str) -> None:
    doc = DOCS[name]
    assert not [w for w in SITE_WORDS if w.lower() in doc.lower()], name
    assert not [f for f in SITE_FIGURES if f in doc], name


def test_the_next_tool_a_description_names_exists() -> None:
    for name, doc in DOCS.items():
        for nxt in re.findall(r"Next: ([a-z_]+)", " ".join(doc.split())):
            assert nxt in DOCS or nxt in ("fix", "deploy"), f"{name} sends the agent to {nxt}, which is no tool"


def test_description_numbers_are_constants() -> None:
    """A number in a description is a constant of the code, so the two cannot disagree."""
    known = {str(constants.MIN_DECODE_TOKENS), str(round(constants.NOISE_BAND * 100)), str(constants.SAMPLER_ROW_BOUND)}
    for name, doc in DOCS.items():
        for number in re.findall(r"(?<![\w-])\d[\d,.]*\d|\b\d\b", doc):
            assert number.rstrip(".,") in known, f"{name}: {number} is not a constant of radiance_mcp.core.constants"
